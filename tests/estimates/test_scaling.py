"""Tests for rules.estimates.scaling: modelled and measured scaling efficiency."""

import pytest

from rules.estimates.communication import communication_bytes_per_step
from rules.estimates.interconnect import Bandwidth
from rules.estimates.scaling import measured_scaling, measured_scaling_efficiency, modelled_step, scaling_efficiency


def test_scaling_efficiency_model():
    # compute 1 s, comm 0.5 s, half of compute overlappable: exposed 0, efficiency 1.
    assert scaling_efficiency(1.0, 0.5, 0.5).efficiency == pytest.approx(1.0)
    # No overlap: 1 / 1.5.
    no_overlap = scaling_efficiency(1.0, 0.5, 0.0)
    assert no_overlap.efficiency == pytest.approx(2 / 3)
    assert no_overlap.exposed_communication_s == pytest.approx(0.5)
    # Partial: exposed = 0.5 - 0.2 = 0.3 → 1/1.3.
    assert scaling_efficiency(1.0, 0.5, 0.2).efficiency == pytest.approx(1 / 1.3)
    with pytest.raises(ValueError):
        scaling_efficiency(1.0, 0.5, 1.5)


def test_measured_scaling_efficiency_against_smallest_run():
    # Seed 000 "Size interconnect from scaling efficiency": measure at two or more device counts.
    points = measured_scaling_efficiency([(64, 560_000.0), (8, 80_000.0), (32, 300_000.0)])
    assert [p.gpus for p in points] == [8, 32, 64]
    assert points[0].efficiency == 1.0
    assert points[1].efficiency == pytest.approx((300_000 / 32) / (80_000 / 8))
    assert points[2].efficiency == pytest.approx(0.875)
    assert all(p.base_gpus == 8 for p in points)
    with pytest.raises(ValueError):
        measured_scaling_efficiency([(8, 1.0), (8, 2.0)])
    with pytest.raises(ValueError):
        measured_scaling_efficiency([])


def test_modelled_step_by_hand():
    # 256 sequences × 4096 tokens = 1,048,576 tokens at 4,000 tokens/s per GPU on 64 GPUs: 4.096 s of compute.
    # DDP all-reduce of 7e9 bf16 gradients over 64 ranks across nodes at 46 GB/s busbw:
    # 2 × 63/64 × 14e9 / 46e9 = 0.59918 s, all hidden behind half of the compute.
    step = communication_bytes_per_step("ddp", 7e9, 64, ranks_per_node=8)
    links = Bandwidth(360.0, 46.0, 46.0, "network", "NVLink 900 GB/s", "", 8)

    modelled = modelled_step(256, 4096, 4_000.0, 64, step, links, overlap_fraction=0.5)

    assert modelled.tokens == 1_048_576
    assert modelled.scaling.compute_s == pytest.approx(4.096)
    assert modelled.scaling.communication_s == pytest.approx(2 * 63 / 64 * 14e9 / 46e9)
    assert modelled.scaling.efficiency == 1.0


def test_measured_scaling_needs_two_gpu_counts():
    assert measured_scaling([]) == (None, "")
    assert measured_scaling([(8, 1e5)]) == (None, "one measurements.scaling point; two or more GPU counts are needed")
    points, note = measured_scaling([(8, 80_000.0), (64, 560_000.0)])
    assert note == "" and points[-1].efficiency == pytest.approx(0.875)
    assert measured_scaling([(8, 1.0), (8, 2.0)])[1] == (
        "measurements.scaling not used: two measurements at 8 GPUs; give one (e.g. their mean)")

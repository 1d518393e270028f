"""Tests for rules.estimates.training_time.scaling: modelled and measured scaling efficiency."""

import pytest

from rules.estimates.communication.collectives import communication_bytes_per_step
from rules.estimates.communication.interconnect import Bandwidth
from rules.estimates.training_time.scaling import (
    extrapolated_efficiency,
    measured_scaling,
    measured_scaling_efficiency,
    modelled_step,
    scaling_efficiency,
)


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


def test_a_rate_measured_at_half_the_scale_is_carried_by_the_ratio_of_the_two_modelled_efficiencies():
    # Weak scaling: 4 sequences of 4,096 tokens per rank at 4,000 tokens/s per GPU are 4.096 s of compute on
    # 32 GPUs (128 sequences) and on 64 (256). A DDP all-reduce of 7e9 bf16 gradients across nodes at 46 GB/s,
    # nothing hidden: 64 ranks 2 × 63/64 × 14e9 / 46e9 = 0.599185 s, E(64) = 4.096 / 4.695185 = 0.872383;
    # 32 ranks 2 × 31/32 × 14e9 / 46e9 = 0.589674 s, E(32) = 4.096 / 4.685674 = 0.874154.
    links = Bandwidth(360.0, 46.0, 46.0, "network", "NVLink 900 GB/s", "", 8)
    quoted = modelled_step(256, 4096, 4_000.0, 64, communication_bytes_per_step("ddp", 7e9, 64, 8), links, 0.0)
    measured = modelled_step(128, 4096, 4_000.0, 32, communication_bytes_per_step("ddp", 7e9, 32, 8), links, 0.0)
    assert quoted.scaling.efficiency == pytest.approx(0.872383, abs=1e-6)
    assert measured.scaling.efficiency == pytest.approx(0.874154, abs=1e-6)

    ratio = extrapolated_efficiency(quoted.scaling.efficiency, measured.scaling.efficiency)

    # r(64) = r(32) · E(64) / E(32) = (4.096 + 0.589674) / (4.096 + 0.599185): the 32-GPU all-reduce is replaced
    # by the 64-GPU one, not added to it (E(64) alone would be 0.872383).
    c64, c32 = 2 * 63 / 64 * 14e9 / 46e9, 2 * 31 / 32 * 14e9 / 46e9
    assert ratio == pytest.approx((4.096 + c32) / (4.096 + c64), rel=1e-12)
    assert ratio == pytest.approx(0.997974, abs=1e-6)


def test_the_same_scale_carries_a_rate_unchanged_and_fewer_gpus_carry_it_up():
    assert extrapolated_efficiency(0.8, 0.8) == 1.0
    assert extrapolated_efficiency(0.9, 0.75) == pytest.approx(1.2)  # measured on more GPUs than quoted
    for at_quoted, at_measured in ((0.0, 0.5), (0.5, 1.5), (1.2, 0.9)):
        with pytest.raises(ValueError, match="at_"):
            extrapolated_efficiency(at_quoted, at_measured)

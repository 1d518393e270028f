"""The per-operator step model pinned to the hardware measurements it runs on, each against its published figure.

- GEMMs: OpenXLA ``default_matmul_perf_table.txtpb`` @ 8b82b7bc (sm_90 = H100, sm_100_B200), TFLOP/s at b = 1:
  H100 bf16 4096³ 780.2, 2048³ 641.0, 1024³ 252.8, 1024 × 4096 × 4096 751.9; B200 bf16 4096³ 1416.9; best H100
  entry 804.7 (b = 4, 4096 × 2048 × 4096). mamf-finder's best H100 shape: 794.5 (stas00/ml-engineering).
- FlashAttention-2 forward + backward, causal (Dao-AILab/flash-attention assets, FA2 paper Figs. 4 and 7):
  H100 head 128: 294 TFLOP/s at 4k, 328 at 16k; A100 head 64: 140 at 2k.
- Collectives: nccl-tests all_reduce_perf, 8 × A100 on one node, ring (stas00/ml-engineering network/README.md):
  busbw 171.54 GB/s at 64 MiB, 234.89 at 16 GiB; 8 × H200 ring (NVLS off) 367.2 at 16 GiB.
"""

from __future__ import annotations

import pytest

from rules.catalogue import load_catalogue
from rules.estimates.communication.collectives import collective_s
from rules.estimates.communication.interconnect import busbw_factor
from rules.estimates.training_time.kernel_rates import attention_rates_from_data, gemm_sweep_from_data
from rules.estimates.training_time.step_time_figures import (
    Measured,
    achievable_rates,
    efficiencies_from_data,
    hardware_from_catalogue,
)
from rules.policy import default_policy

MIB = 2**20


@pytest.fixture(scope="module")
def step_time_data() -> dict:
    return load_catalogue().document["step_time"]


@pytest.mark.parametrize(("architecture", "shape", "tflops"), [
    ("hopper", (4096, 4096, 4096), 780.2),
    ("hopper", (2048, 2048, 2048), 641.0),
    ("hopper", (1024, 1024, 1024), 252.8),
    ("hopper", (1024, 4096, 4096), 751.9),
    ("blackwell", (4096, 4096, 4096), 1416.9),
])
def test_a_measured_gemm_shape_runs_at_its_published_rate(step_time_data, architecture, shape, tflops):
    sweep = gemm_sweep_from_data(step_time_data, architecture)
    assert sweep.efficiency(*shape) * sweep.best_tflops == pytest.approx(tflops, abs=0.05)


def test_between_measured_shapes_the_rate_lies_between_its_neighbours(step_time_data):
    """3,000³ lies between 2,048³ (641.0) and 4,096³ (780.2); 8,192 rows take the b = 2 entry at 4,096 rows."""
    sweep = gemm_sweep_from_data(step_time_data, "hopper")
    assert 641.0 < sweep.efficiency(3000, 3000, 3000) * sweep.best_tflops < 780.2
    assert sweep.best_tflops == pytest.approx(804.7)


def test_an_h100_gemm_in_a_step_is_the_sweeps_profile_times_the_best_matmul(step_time_data):
    """The largest H100 shape in a step: 794.5 (mamf-finder best) × 780.2 / 804.7 × the fitted in-step share."""
    catalogue = load_catalogue().document
    efficiencies = efficiencies_from_data(catalogue, default_policy().document, "H100-SXM5-80GB")
    rates = achievable_rates(hardware_from_catalogue(catalogue, "DGX-H100"), efficiencies, Measured(), "bf16-mixed")
    in_step = step_time_data["gemm_fraction_in_step"]["hopper"]
    rate = rates.gemm_flops_s * efficiencies.gemm_sweep.efficiency(4096, 4096, 4096)
    assert rate == pytest.approx(794.5e12 * in_step * 780.2 / 804.7, rel=1e-3)


@pytest.mark.parametrize(("architecture", "head_dim", "sequence", "tflops"), [
    ("hopper", 128, 4096, 294), ("hopper", 128, 16384, 328), ("ampere", 64, 2048, 140),
])
def test_flash_attention_runs_at_its_published_rate(step_time_data, architecture, head_dim, sequence, tflops):
    assert attention_rates_from_data(step_time_data, architecture).tflops_at(head_dim, sequence) == tflops


def test_a_gpu_without_attention_measurements_scales_by_its_best_matmul():
    """B200 follows the H100's FlashAttention-2 rates × 1745.0 / 794.5 (the two GPUs' mamf-finder best)."""
    efficiencies = efficiencies_from_data(load_catalogue().document, default_policy().document, "B200-SXM-180GB")
    assert efficiencies.attention.gpu == "H100-SXM5-80GB"
    assert efficiencies.attention_scale == pytest.approx(1745.0 / 794.5)


@pytest.mark.parametrize(("server", "size_bytes", "busbw_gbs", "tolerance"), [
    ("DGX-A100", 64 * MIB, 171.54, 0.05),
    ("DGX-A100", 16 * 2**30, 234.89, 0.05),
    ("DGX-H100", 16 * 2**30, 367.2, 0.05),
])
def test_an_all_reduce_at_a_message_size_runs_at_its_measured_busbw(server, size_bytes, busbw_gbs, tolerance):
    """One node's all-reduce: factor(8)·(S + S½)/busbw∞ against the nccl-tests time factor(8)·S/busbw(S)."""
    catalogue = load_catalogue().document
    hardware = hardware_from_catalogue(catalogue, server)
    efficiencies = efficiencies_from_data(catalogue, default_policy().document, hardware.gpu.model)
    rates = achievable_rates(hardware, efficiencies, Measured(), "bf16-mixed")
    seconds = collective_s("all-reduce", size_bytes, 8, rates.domain_busbw_gbs, efficiencies.collective_half_bytes)
    measured_s = busbw_factor("all-reduce", 8) * size_bytes / (busbw_gbs * 1e9)
    assert seconds == pytest.approx(measured_s, rel=tolerance)

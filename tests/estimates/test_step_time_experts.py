"""The step-time model of a mixture of experts: the dispatch volume, the all-to-all at DeepEP's measured bandwidth, the
grouped-GEMM rate of the OpenXLA sweep at the per-expert shape, and MFU from the active parameters.

Mixtral 8x7B (mistralai/Mixtral-8x7B-v0.1 config.json: 32 layers, hidden 4096, 32 heads, 8 KV heads, 8 experts of
14,336, top-2, vocabulary 32,000; Jiang et al. 2024, arXiv 2401.04088 §2.1: 12.9B active of 46.7B) on DGX H100 (NVLink
900 GB/s, one 400 Gb/s NIC per GPU), sequences of 4,096, micro-batch 1.
"""

from __future__ import annotations

import math

import pytest

from rules.catalogue import load_catalogue
from rules.errors import InconsistentInput
from rules.estimates.model.layout import training_layout
from rules.estimates.model.shapes import Experts, ModelShape
from rules.estimates.training_time.expert_step import all_to_all_s
from rules.estimates.training_time.expert_work import dispatch_bytes, expert_layer_work, moe_matrix_parameters
from rules.estimates.training_time.step_time import StepTimeModel
from rules.estimates.training_time.step_time_figures import (
    Measured,
    achievable_rates,
    efficiencies_from_data,
    hardware_from_catalogue,
)
from rules.estimates.training_time.transformer_work import LayerSlice
from rules.policy import default_policy

MIB = 2**20
MIXTRAL = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000, mlp="swiglu",
                     norm="rmsnorm", dropout=False, experts=Experts(count=8, active=2, ffn_hidden=14336))
# DeepEP docs/legacy.md @ 0297fc80 (H800, 200 GB/s NVLink per direction, CX7 400 Gb/s): intranode EP8 dispatch
# 153 GB/s, internode EP16 43 GB/s; as fractions 153 / 200 and 43 / 50 (catalogue step_time.all_to_all).
H100_NVLINK_PER_DIRECTION_GBS = 900 / 2
A2A_NVLINK_GBS = H100_NVLINK_PER_DIRECTION_GBS * 153 / 200  # 344.25 GB/s
A2A_NIC_GBS = 400 / 8 * 43 / 50  # 43 GB/s
LOAD_FACTOR = 1.25  # the policy's memory.moe.dropless_load_factor


def _model() -> StepTimeModel:
    catalogue, policy = load_catalogue().document, default_policy().document
    hardware = hardware_from_catalogue(catalogue, "DGX-H100")
    return StepTimeModel(MIXTRAL, 4096, hardware, efficiencies_from_data(catalogue, policy, "H100-SXM5-80GB"),
                         load_factor=LOAD_FACTOR)


def test_mixtral_dispatch_volume_by_hand() -> None:
    # 4,096 tokens × top-2 × hidden 4,096 × 2 bytes = 67,108,864 B = 64 MiB per dispatch (and per combine) per layer;
    # at EP8 7/8 of it, 56 MiB, leaves the GPU.
    part = LayerSlice(4096, 1)
    assert dispatch_bytes(MIXTRAL, part) == 4096 * 2 * 4096 * 2 == 64 * MIB
    work = expert_layer_work(MIXTRAL, part, 8, LOAD_FACTOR, "none")
    assert work.all_to_all_bytes * 7 / 8 == 56 * MIB
    assert work.all_to_alls == 4  # dispatch + combine, forward and backward
    assert expert_layer_work(MIXTRAL, part, 8, LOAD_FACTOR, "full").all_to_alls == 6  # the recomputed forward's


def test_all_to_all_time_at_deepep_bandwidth() -> None:
    model = _model()
    rates = achievable_rates(model.hardware, model.efficiencies, Measured(), "bf16-mixed")
    assert rates.all_to_all_domain_gbs == pytest.approx(A2A_NVLINK_GBS)
    assert rates.all_to_all_nic_gbs == pytest.approx(A2A_NIC_GBS)
    # EP8 inside one DGX: 56 MiB over NVLink at 344.25 GB/s, × 1.25 for the busiest receiver = 213.2 µs.
    assert all_to_all_s(64 * MIB, 8, LOAD_FACTOR, rates) == pytest.approx(1.25 * 56 * MIB / 344.25e9)
    assert all_to_all_s(64 * MIB, 8, LOAD_FACTOR, rates) == pytest.approx(213.2e-6, rel=1e-3)
    # EP16 over two DGX: 8/16 of it over the NIC at 43 GB/s (7/16 over NVLink is faster) = 975.4 µs.
    assert all_to_all_s(64 * MIB, 16, LOAD_FACTOR, rates) == pytest.approx(1.25 * 32 * MIB / 43e9)


def test_grouped_gemm_rate_is_the_sweeps_at_the_per_expert_shape() -> None:
    # EP8: each GPU holds 1 expert; it receives 8 × 4,096 × 2 × 1.25 / 8 = 10,240 rows. Its gate+up GEMM is
    # (10,240 × 28,672 × 4,096): the OpenXLA sweep (H100 rows, catalogue step_time.gemm_sweeps) clamps n to 4,096 and
    # takes 10,240 rows as 2.5 batches of 4,096, between its b = 2 and b = 4 entries at (4096, 4096, 4096).
    model = _model()
    work = expert_layer_work(MIXTRAL, LayerSlice(4096, 1), 8, LOAD_FACTOR, "none")
    assert work.local_experts == 1 and work.routed_rows_per_expert == 10240
    section = load_catalogue().document["step_time"]
    sweep_rows = section["gemm_sweeps"][section["gemm_sweep_of_architecture"]["hopper"]]["bf16_tflops"]
    table = {(b, m, n, k): tflops for b, m, n, k, tflops in sweep_rows}
    w = math.log2(2.5 / 2)  # log₂-linear between b = 2 and b = 4
    rate = math.exp((1 - w) * math.log(table[(2, 4096, 4096, 4096)]) + w * math.log(table[(4, 4096, 4096, 4096)]))
    assert model.efficiencies.gemm_sweep.efficiency(10240, 28672, 4096) == pytest.approx(rate / max(table.values()))


def test_mfu_counts_the_active_parameters() -> None:
    # Jiang et al. 2024: 12,879,925,248 active (tests/test_models_by_name.py); the step model's N leaves out the norms,
    # 2 per layer and the final one of 4,096 each: 12,879,925,248 − 65 × 4,096 = 12,879,659,008.
    assert moe_matrix_parameters(MIXTRAL, active=True) == 12_879_925_248 - 65 * 4096
    model = _model()
    layout = training_layout(128, 8, 16, tensor=1, pipeline=4, sharding="zero1", micro_batch=1, global_batch=1024,
                             recompute="full", flash_attention=True, expert=8, experts=8)
    step = model.evaluate(layout)
    flops = 6 * (12_879_925_248 - 65 * 4096) + 12 * 32 * 4096 * 4096  # PaLM App. B, per token
    assert step.mfu == pytest.approx(1024 * 4096 * flops / (128 * step.step_s * 989.4e12), rel=1e-3)
    # 32 micro-batches per pipeline × 8 layers a stage × 6 all-to-alls (full recompute) × 213.2 µs.
    assert step.breakdown.ep_comm_s == pytest.approx(32 * 8 * 6 * 1.25 * 56 * MIB / 344.25e9)


def test_expert_tensor_parallelism_is_refused() -> None:
    layout = training_layout(128, 8, 16, tensor=1, pipeline=4, sharding="zero1", micro_batch=1, global_batch=1024,
                             expert=4, expert_tensor=2, experts=8)
    with pytest.raises(InconsistentInput, match="expert_tensor"):
        _model().evaluate(layout)

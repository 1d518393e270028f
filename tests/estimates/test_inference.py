"""Tests for rules.estimates.serving.inference: replicas, Little's law and the serving plan, quoting their sources."""

from __future__ import annotations

import math
from dataclasses import fields, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.estimates.model.hardware import GpuSpec
from rules.estimates.serving.inference import (
    BatchPoint,
    Requests,
    Slo,
    Traffic,
    modelled_latency,
    quoted_capacity,
    replicas_needed,
    requests_per_s_per_replica,
    serving_plan,
)
from rules.estimates.serving.inference_latency import Roofline, ServedModel, prefill_time_s
from rules.estimates.serving.inference_memory import (
    WEIGHT_PRECISIONS,
    ServingEngine,
    kv_cache_bytes_per_token,
    weight_bytes,
)

GB = 1e9
GIB = 2**30
# NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: 3.35 TB/s HBM3, 989 TFLOPS BF16 dense, 80 GB.
H100_SXM = GpuSpec(capacity_bytes=80 * GB, hbm_tbs=3.35, bf16_tflops=989.0)
# meta-llama/Meta-Llama-3-70B config.json: num_hidden_layers 80, num_key_value_heads 8, head dim 128.
LLAMA3_70B_TP8 = ServedModel(
    parameters=70e9, weight_bytes=weight_bytes(70e9, "bf16"),
    kv_bytes_per_token_per_gpu=kv_cache_bytes_per_token(80, 8, 128, "bf16", tensor_parallel=8).per_gpu_bytes,
    tensor_parallel=8)


# ------------------------------------------------------------------------------ throughput, replicas


def test_replicas_seed_004_step7_100_rps_peak_300_15_per_gpu_is_20_plus_4_spare() -> None:
    # Seed 004 step 7: "average is 100 RPS, peak 300 RPS, and each GPU handles 15 RPS, you need 20 GPUs
    # for peak, plus 4 spare = 24 GPUs" (20 % headroom).
    count = replicas_needed(rps=100, peak_factor=3, headroom=0.2, rps_per_replica=15)
    assert count.peak_rps == 300
    assert (count.peak_replicas, count.spare_replicas, count.total_replicas) == (20, 4, 24)


def test_replicas_rounds_up() -> None:
    assert replicas_needed(10, 1, 0, 3).total_replicas == 4
    assert replicas_needed(0, 2, 0.2, 3).total_replicas == 0


def test_little_law_seed_004_step6_batch32_200_tokens_3000_tokens_per_s_is_15_rps() -> None:
    # Seed 004 step 6: batch 32, 200 tokens per request, 3,000 tokens/s → 15 requests/s per GPU.
    # As Little's law: TPOT = 32 / 3000 s, no prefill → 32 / (200 × 32/3000) = 15.
    assert requests_per_s_per_replica(32, 0.0, 200, 32 / 3000) == pytest.approx(15.0)
    assert requests_per_s_per_replica(0, 0.1, 200, 0.01) == 0.0


def test_quoted_capacity_seed_004_step7_24_of_32_gpus() -> None:
    # 24 GPUs needed of 32 quoted leave 1 − 24/32 = 25 % spare; 40 needed are 8 short.
    assert quoted_capacity(24, 32).spare_fraction == 0.25 and quoted_capacity(24, 32).shortfall_gpus == 0
    assert quoted_capacity(40, 32).shortfall_gpus == 8 and quoted_capacity(40, 32).spare_fraction == 0.0


# ---------------------------------------------------------------------------------- serving plan


VLLM_DEFAULTS = ServingEngine(gpu_memory_utilization=0.9, reserve_bytes=4 * GIB)  # block 16, max_num_seqs 256
SLO_2S_50MS = Slo(ttft_ms_p95=2000.0, tpot_ms_p95=50.0)
ROOFLINE = Roofline(hbm_efficiency=0.8, flops_efficiency=0.5)


def _plan(model: ServedModel = LLAMA3_70B_TP8, *, engine: ServingEngine = VLLM_DEFAULTS, slo: Slo = SLO_2S_50MS,
          roofline: Roofline = ROOFLINE):
    return serving_plan(model, H100_SXM, engine, Requests(1024, 256), Traffic(10.0, 3.0, 0.2), slo, roofline)


def test_serving_plan_llama3_70b_h100_tp8_picks_largest_batch_within_slos() -> None:
    plan = _plan()
    assert plan.feasible
    assert plan.points[0].batch == 1
    assert len(plan.points) == min(plan.concurrency.max_sequences, 256)
    assert plan.batch == max(p.batch for p in plan.points if p.meets_slo)
    assert all(not p.meets_slo for p in plan.points if p.batch > plan.batch)
    best = plan.points[plan.batch - 1]
    assert plan.ttft_ms <= 2000 and plan.tpot_ms <= 50
    # Little's law at the chosen batch.
    assert plan.rps_per_replica == pytest.approx(best.batch / (best.ttft_ms / 1e3 + 256 * best.tpot_ms / 1e3))
    assert plan.replicas_needed == math.ceil(10 * 3 * 1.2 / plan.rps_per_replica - 1e-9)
    assert plan.gpus_needed == plan.replicas_needed * 8
    # TPOT at batch 1: (17.5 GB + 1152 × 40,960 B) / (3.35 TB/s × 0.8).
    assert plan.points[0].tpot_ms == pytest.approx((17.5e9 + 1152 * 40_960) / 2.68e12 * 1e3)


def test_serving_plan_ttft_is_prefill_of_the_whole_batch_floored_at_one_weight_read() -> None:
    plan = _plan()
    for point in plan.points[:4]:
        prefill_ms = prefill_time_s(70e9, 1024, point.batch, 8, 989.0, 0.5) * 1e3
        weight_read_ms = 140e9 / 8 / 2.68e12 * 1e3
        assert point.ttft_ms == pytest.approx(max(prefill_ms, weight_read_ms))


def test_serving_plan_says_so_when_no_batch_meets_the_slos() -> None:
    # A 1 ms TPOT cannot be met: streaming 17.5 GB per GPU takes 6.5 ms.
    plan = _plan(slo=Slo(2000.0, 1.0))
    assert not plan.feasible
    assert (plan.batch, plan.rps_per_replica) == (0, 0.0)
    assert plan.replicas_needed is None and plan.gpus_needed is None
    assert "TPOT" in plan.reason


def test_serving_plan_says_so_when_weights_do_not_fit() -> None:
    plan = _plan(replace(LLAMA3_70B_TP8, tensor_parallel=1))
    assert not plan.feasible
    assert plan.concurrency.max_sequences == 0
    assert plan.points == ()
    assert plan.batch == 0 and plan.gpus_needed is None
    assert "fits" in plan.reason


def test_serving_plan_reports_max_num_seqs_cap() -> None:
    plan = _plan(engine=ServingEngine(0.9, 4 * GIB, max_num_seqs=8), slo=Slo(1e6, 1e6))
    assert plan.batch == 8
    assert "max_num_seqs" in plan.reason


def test_serving_plan_prefill_efficiency_defaults_to_flops_efficiency_and_can_differ() -> None:
    # Prefill runs large matrix products and reaches a higher share of peak than decode; the policy says how much.
    same = _plan()
    explicit = _plan(roofline=Roofline(0.8, 0.5, prefill_flops_efficiency=0.5))
    faster = _plan(roofline=Roofline(0.8, 0.25, prefill_flops_efficiency=0.5))
    assert explicit == same
    prefill_ms = prefill_time_s(70e9, 1024, 4, 8, 989.0, 0.5) * 1e3
    assert faster.points[3].ttft_ms == pytest.approx(max(prefill_ms, same.points[3].ttft_ms))
    assert faster.points[-1].tpot_ms >= same.points[-1].tpot_ms  # decode compute slowed by the 0.25 efficiency
    with pytest.raises(ValueError, match="prefill_flops_efficiency"):
        _plan(roofline=Roofline(0.8, 0.5, prefill_flops_efficiency=0.0))


# ------------------------------------------------------------------------------------- properties


@settings(max_examples=150, deadline=None)
@given(
    parameters=st.floats(1e8, 1e12),
    precision=st.sampled_from(WEIGHT_PRECISIONS),
    layers=st.integers(1, 160),
    kv_heads=st.integers(1, 128),
    head_dim=st.sampled_from([64, 80, 96, 128, 256]),
    kv_precision=st.sampled_from(["fp32", "bf16", "fp16", "fp8", "int8"]),
    tp=st.sampled_from([1, 2, 4, 8, 16]),
    capacity_gb=st.floats(8, 300),
    utilization=st.floats(0.05, 1.0),
    reserve_gb=st.floats(0, 20),
    prompt_tokens=st.integers(1, 32_768),
    output_tokens=st.integers(1, 8_192),
    hbm_tbs=st.floats(0.1, 10),
    bf16_tflops=st.floats(10, 5000),
    hbm_efficiency=st.floats(0.05, 1.0),
    flops_efficiency=st.floats(0.05, 1.0),
    ttft_ms=st.floats(1, 1e5),
    tpot_ms=st.floats(1, 1e4),
    rps=st.floats(0, 1e4),
    peak_factor=st.floats(1, 10),
    headroom=st.floats(0, 1),
)
def test_serving_estimates_never_nan_or_negative_for_valid_inputs(
    parameters: float, precision: str, layers: int, kv_heads: int, head_dim: int, kv_precision: str, tp: int,
    capacity_gb: float, utilization: float, reserve_gb: float, prompt_tokens: int, output_tokens: int,
    hbm_tbs: float, bf16_tflops: float, hbm_efficiency: float, flops_efficiency: float, ttft_ms: float,
    tpot_ms: float, rps: float, peak_factor: float, headroom: float,
) -> None:
    weights = weight_bytes(parameters, precision)
    kv = kv_cache_bytes_per_token(layers, kv_heads, head_dim, kv_precision, tp)
    assert weights > 0 and math.isfinite(weights)
    assert 0 < kv.per_gpu_bytes <= kv.whole_model_bytes

    plan = serving_plan(ServedModel(parameters, weights, kv.per_gpu_bytes, tp),
                        GpuSpec(capacity_bytes=capacity_gb * GB, hbm_tbs=hbm_tbs, bf16_tflops=bf16_tflops),
                        ServingEngine(utilization, reserve_gb * GB),
                        Requests(prompt_tokens, output_tokens), Traffic(rps, peak_factor, headroom),
                        Slo(ttft_ms, tpot_ms), Roofline(hbm_efficiency, flops_efficiency))
    concurrency = plan.concurrency
    for value in (concurrency.usable_bytes, concurrency.kv_budget_bytes, concurrency.shortfall_bytes,
                  concurrency.kv_bytes_per_sequence, plan.ttft_ms, plan.tpot_ms, plan.rps_per_replica):
        assert math.isfinite(value) and value >= 0
    assert concurrency.max_sequences >= 0 and plan.batch >= 0
    for point in plan.points:
        assert point.ttft_ms > 0 and point.tpot_ms > 0 and point.rps_per_replica > 0
        assert math.isfinite(point.ttft_ms) and math.isfinite(point.tpot_ms)
    if plan.feasible:
        assert plan.batch >= 1 and plan.rps_per_replica > 0
        assert plan.replicas_needed is not None and plan.replicas_needed >= 0
        assert plan.gpus_needed == plan.replicas_needed * tp
    else:
        assert plan.batch == 0 and plan.rps_per_replica == 0 and plan.gpus_needed is None


def test_serving_plan_points_are_modelled_latency_at_each_batch_to_the_bit() -> None:
    # The plan computes its batch sweep without re-validating the arguments at every batch; each point must
    # still be exactly what modelled_latency and Little's law give at that batch.
    for roofline in (Roofline(0.7, 0.5), Roofline(0.8, 0.4, 0.6)):
        plan = _plan(roofline=roofline)
        requests = Requests(1024, 256)
        assert len(plan.points) > 100
        for point in plan.points:
            latency = modelled_latency(LLAMA3_70B_TP8, H100_SXM, requests, roofline, point.batch)
            assert point.ttft_ms == latency.ttft_s * 1e3 and point.tpot_ms == latency.tpot_s * 1e3
            assert point.memory_bound == latency.memory_bound
            assert point.rps_per_replica == requests_per_s_per_replica(point.batch, latency.ttft_s, 256,
                                                                       latency.tpot_s)
            # Built without the dataclass's __init__: still a BatchPoint equal to the one it would build.
            assert type(point) is BatchPoint and point == BatchPoint(**vars(point))
            assert list(vars(point)) == [f.name for f in fields(BatchPoint)]

"""Tests for rules.estimates.inference: each quotes the published figure it reproduces."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.estimates.inference import (
    WEIGHT_PRECISIONS,
    decode_step,
    decode_step_time_s,
    kv_cache_bytes_per_token,
    max_concurrent_sequences,
    prefill_time_s,
    replicas_needed,
    requests_per_s_per_replica,
    serving_plan,
    weight_bytes,
)

GB = 1e9
GIB = 2**30
# NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: 3.35 TB/s HBM3, 989 TFLOPS BF16 dense, 80 GB.
H100_SXM_HBM_TBS = 3.35
H100_SXM_BF16_TFLOPS = 989.0
H100_SXM_CAPACITY_BYTES = 80 * GB
# meta-llama/Meta-Llama-3-70B config.json: num_hidden_layers 80, num_key_value_heads 8,
# hidden_size 8192 / num_attention_heads 64 = head dim 128.
LLAMA3_70B = {"layers": 80, "kv_heads": 8, "head_dim": 128}


# ---------------------------------------------------------------------------------------- weights


@pytest.mark.parametrize(
    ("precision", "bytes_per_param"),
    [("fp32", 4.0), ("bf16", 2.0), ("fp16", 2.0), ("fp8", 1.0), ("BF16", 2.0)],
)
def test_weight_bytes_plain_precisions(precision: str, bytes_per_param: float) -> None:
    assert weight_bytes(7e9, precision) == pytest.approx(7e9 * bytes_per_param)


def test_weight_bytes_seed_004_7b_fp16_is_14_gb() -> None:
    # Seed 004 step 4: "For a 7B model, weights = 14 GB" in FP16.
    assert weight_bytes(7e9, "fp16") == pytest.approx(14 * GB)


def test_weight_bytes_int4_group128_counts_fp16_scale_and_4bit_zero_per_group() -> None:
    # AutoGPTQ qlinear: per 128 input weights one fp16 scale (2 B) + one 4-bit packed zero (0.5 B).
    per_param = 0.5 + (2 + 0.5) / 128
    assert weight_bytes(70e9, "int4") == pytest.approx(70e9 * per_param)
    assert weight_bytes(70e9, "int4", zero_point=False) == pytest.approx(70e9 * (0.5 + 2 / 128))
    assert weight_bytes(70e9, "int4", group_size=32) > weight_bytes(70e9, "int4", group_size=128)


def test_weight_bytes_int8_counts_one_fp32_scale_per_channel() -> None:
    assert weight_bytes(1e9, "int8") == pytest.approx(1e9 * (1 + 4 / 4096))
    assert weight_bytes(1e9, "int8", int8_channel_size=8192) == pytest.approx(1e9 * (1 + 4 / 8192))


def test_weight_bytes_unknown_precision_lists_allowed_values() -> None:
    with pytest.raises(ValueError) as excinfo:
        weight_bytes(7e9, "int3")
    for allowed in WEIGHT_PRECISIONS:
        assert allowed in str(excinfo.value)


@pytest.mark.parametrize("parameters", [0, -1, math.nan, math.inf])
def test_weight_bytes_rejects_non_positive_or_non_finite_parameters(parameters: float) -> None:
    with pytest.raises(ValueError):
        weight_bytes(parameters, "bf16")


# --------------------------------------------------------------------------------------- KV cache


def test_kv_cache_llama3_70b_bf16_is_327680_bytes_per_token_per_hf_config() -> None:
    # 2 × 80 layers × 8 KV heads × 128 × 2 B (vLLM CacheEngine.get_cache_block_size per token).
    kv = kv_cache_bytes_per_token(**LLAMA3_70B, kv_precision="bf16")
    assert kv.whole_model_bytes == 327_680
    assert kv.per_gpu_bytes == 327_680
    assert kv.kv_heads_per_gpu == 8


def test_kv_cache_llama3_70b_splits_over_tp_then_replicates_past_kv_heads() -> None:
    tp4 = kv_cache_bytes_per_token(**LLAMA3_70B, kv_precision="bf16", tensor_parallel=4)
    assert (tp4.kv_heads_per_gpu, tp4.per_gpu_bytes) == (2, 81_920)
    tp8 = kv_cache_bytes_per_token(**LLAMA3_70B, kv_precision="bf16", tensor_parallel=8)
    assert (tp8.kv_heads_per_gpu, tp8.per_gpu_bytes) == (1, 40_960)
    # tp 16 > 8 KV heads: vLLM replicates, each GPU still holds one head.
    tp16 = kv_cache_bytes_per_token(**LLAMA3_70B, kv_precision="bf16", tensor_parallel=16)
    assert (tp16.kv_heads_per_gpu, tp16.per_gpu_bytes) == (1, 40_960)
    assert tp16.whole_model_bytes == 327_680


def test_kv_cache_fp8_halves_bf16() -> None:
    assert kv_cache_bytes_per_token(**LLAMA3_70B, kv_precision="fp8").whole_model_bytes == 163_840


def test_kv_cache_seed_004_7b_batch32_seq2048_fp16_is_34_4_gb() -> None:
    # Seed 004_fd79d6760ce15dd9.txt step 4: 7B, 32 layers, hidden 4096 (32 heads × 128, no GQA),
    # sequence 2048, batch 32, fp16: 2 × 32 × 4096 × 2048 × 32 × 2 ≈ 34 GB.
    kv = kv_cache_bytes_per_token(layers=32, kv_heads=32, head_dim=128, kv_precision="fp16")
    total = kv.whole_model_bytes * 2048 * 32
    assert total == 2 * 32 * 4096 * 2048 * 32 * 2 == 34_359_738_368
    assert total / GB == pytest.approx(34.4, abs=0.05)
    # "Add to weights (14 GB) → ~48 GB, so one 80 GB GPU can handle that batch."
    assert (total + weight_bytes(7e9, "fp16")) / GB == pytest.approx(48.4, abs=0.05)


def test_kv_cache_unknown_precision_lists_allowed_values() -> None:
    with pytest.raises(ValueError, match="allowed: fp32, bf16, fp16, fp8, int8"):
        kv_cache_bytes_per_token(32, 32, 128, "int4")


# ------------------------------------------------------------------------------------ concurrency


def test_max_concurrent_sequences_seed_004_7b_fits_32_sequences_of_2048_on_80gb() -> None:
    # Given the seed's 7B fp16 example on one 80 GB GPU with vLLM's default 0.9 utilisation
    # and a 2 GiB activation reserve,
    kv = kv_cache_bytes_per_token(32, 32, 128, "fp16")
    budget = max_concurrent_sequences(
        capacity_bytes=80 * GB,
        gpu_memory_utilization=0.9,
        weight_bytes_per_gpu=weight_bytes(7e9, "fp16"),
        reserve_bytes=2 * GIB,
        kv_bytes_per_token_per_gpu=kv.per_gpu_bytes,
        context_tokens=2048,
    )
    # then usable = 72 GB, KV budget = 72 − 14 − 2.15 GB, and 52 sequences of 2048 tokens fit (≥ 32).
    assert budget.usable_bytes == pytest.approx(72 * GB)
    assert budget.kv_budget_bytes == pytest.approx(72 * GB - 14 * GB - 2 * GIB)
    assert budget.kv_bytes_per_sequence == 2048 * 524_288
    assert budget.max_sequences == math.floor((72 * GB - 14 * GB - 2 * GIB) / (2048 * 524_288)) == 52
    assert budget.shortfall_bytes == 0


def test_max_concurrent_sequences_rounds_context_up_to_whole_blocks() -> None:
    plain = max_concurrent_sequences(1000.0, 1.0, 0.0, 0.0, 1.0, 17, block_size_tokens=1)
    paged = max_concurrent_sequences(1000.0, 1.0, 0.0, 0.0, 1.0, 17, block_size_tokens=16)
    assert plain.max_sequences == 1000 // 17 == 58
    assert paged.kv_bytes_per_sequence == 32
    assert paged.max_sequences == 1000 // 16 // 2 == 31


def test_max_concurrent_sequences_is_zero_with_shortfall_when_weights_do_not_fit() -> None:
    # Llama-3-70B bf16 (140 GB) on one 80 GB H100.
    budget = max_concurrent_sequences(80 * GB, 0.9, 140 * GB, 0.0, 327_680, 8192)
    assert budget.max_sequences == 0
    assert budget.kv_budget_bytes == 0
    assert budget.shortfall_bytes == pytest.approx(68 * GB)


@pytest.mark.parametrize("utilization", [0, 1.01, -0.5, math.nan])
def test_max_concurrent_sequences_rejects_utilization_outside_0_1(utilization: float) -> None:
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        max_concurrent_sequences(80 * GB, utilization, 14 * GB, 0, 524_288, 2048)


# ---------------------------------------------------------------------------------------- latency


def test_decode_70b_bf16_one_h100_batch1_is_41_8_ms_per_h100_datasheet_3_35_tbs() -> None:
    # 140 GB of weights streamed once per token at 3.35 TB/s (H100 SXM datasheet): 140 / 3.35 = 41.8 ms.
    step_s = decode_step_time_s(
        weight_bytes=140e9,
        kv_bytes_per_token_per_gpu=0,
        batch=1,
        context_tokens=0,
        tp=1,
        hbm_tbs=H100_SXM_HBM_TBS,
        hbm_efficiency=1.0,
        parameters=70e9,
        bf16_tflops=H100_SXM_BF16_TFLOPS,
        flops_efficiency=1.0,
    )
    assert step_s * 1e3 == pytest.approx(41.79, rel=1e-3)
    assert step_s * 1e3 == pytest.approx(140 / 3.35, rel=0.01)


def test_decode_step_adds_kv_reads_and_becomes_compute_bound_at_large_batch() -> None:
    kv = kv_cache_bytes_per_token(**LLAMA3_70B, kv_precision="bf16", tensor_parallel=8)
    args = dict(
        weight_bytes=140e9,
        kv_bytes_per_token_per_gpu=kv.per_gpu_bytes,
        context_tokens=4096,
        tp=8,
        hbm_tbs=H100_SXM_HBM_TBS,
        hbm_efficiency=0.8,
        parameters=70e9,
        bf16_tflops=H100_SXM_BF16_TFLOPS,
        flops_efficiency=0.5,
    )
    small = decode_step(batch=1, **args)
    assert small.memory_bound
    assert small.bytes_read_per_gpu == pytest.approx(140e9 / 8 + 4096 * 40_960)
    assert small.step_time_s == pytest.approx(small.bytes_read_per_gpu / (3.35e12 * 0.8))
    # Without KV reads the compute term overtakes the weight read at batch ≈ 17.5e9/2.68e12 / 1.77e-5.
    no_kv = dict(args, kv_bytes_per_token_per_gpu=0)
    large = decode_step(batch=1024, **no_kv)
    assert not large.memory_bound
    assert large.step_time_s == pytest.approx(2 * 70e9 * 1024 / (8 * 989e12 * 0.5))


def test_prefill_7b_2048_tokens_on_one_h100_at_half_peak() -> None:
    # Kaplan et al. 2020: 2N FLOPs per token → 2 × 7e9 × 2048 / (989e12 × 0.5) = 58.0 ms.
    assert prefill_time_s(7e9, 2048, 1, 1, H100_SXM_BF16_TFLOPS, 0.5) * 1e3 == pytest.approx(57.98, rel=1e-3)
    assert prefill_time_s(7e9, 2048, 4, 2, H100_SXM_BF16_TFLOPS, 0.5) == pytest.approx(
        2 * prefill_time_s(7e9, 2048, 1, 1, H100_SXM_BF16_TFLOPS, 0.5)
    )


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


# ---------------------------------------------------------------------------------- serving plan

LLAMA3_70B_ON_H100_TP8 = dict(
    parameters=70e9,
    weight_bytes=weight_bytes(70e9, "bf16"),
    kv_bytes_per_token_per_gpu=kv_cache_bytes_per_token(
        **LLAMA3_70B, kv_precision="bf16", tensor_parallel=8
    ).per_gpu_bytes,
    tp=8,
    capacity_bytes=H100_SXM_CAPACITY_BYTES,
    gpu_memory_utilization=0.9,
    reserve_bytes=4 * GIB,
    prompt_tokens=1024,
    output_tokens=256,
    hbm_tbs=H100_SXM_HBM_TBS,
    bf16_tflops=H100_SXM_BF16_TFLOPS,
    hbm_efficiency=0.8,
    flops_efficiency=0.5,
    ttft_ms_p95=2000.0,
    tpot_ms_p95=50.0,
    rps=10.0,
    peak_factor=3.0,
    headroom=0.2,
)


def test_serving_plan_llama3_70b_h100_tp8_picks_largest_batch_within_slos() -> None:
    plan = serving_plan(**LLAMA3_70B_ON_H100_TP8)
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
    plan = serving_plan(**LLAMA3_70B_ON_H100_TP8)
    for point in plan.points[:4]:
        prefill_ms = prefill_time_s(70e9, 1024, point.batch, 8, 989.0, 0.5) * 1e3
        weight_read_ms = 140e9 / 8 / 2.68e12 * 1e3
        assert point.ttft_ms == pytest.approx(max(prefill_ms, weight_read_ms))


def test_serving_plan_says_so_when_no_batch_meets_the_slos() -> None:
    # A 1 ms TPOT cannot be met: streaming 17.5 GB per GPU takes 6.5 ms.
    plan = serving_plan(**dict(LLAMA3_70B_ON_H100_TP8, tpot_ms_p95=1.0))
    assert not plan.feasible
    assert (plan.batch, plan.rps_per_replica) == (0, 0.0)
    assert plan.replicas_needed is None and plan.gpus_needed is None
    assert "TPOT" in plan.reason


def test_serving_plan_says_so_when_weights_do_not_fit() -> None:
    plan = serving_plan(**dict(LLAMA3_70B_ON_H100_TP8, tp=1))
    assert not plan.feasible
    assert plan.concurrency.max_sequences == 0
    assert plan.points == ()
    assert plan.batch == 0 and plan.gpus_needed is None
    assert "fits" in plan.reason


def test_serving_plan_reports_max_num_seqs_cap() -> None:
    plan = serving_plan(**dict(LLAMA3_70B_ON_H100_TP8, ttft_ms_p95=1e6, tpot_ms_p95=1e6, max_num_seqs=8))
    assert plan.batch == 8
    assert "max_num_seqs" in plan.reason


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
    parameters: float,
    precision: str,
    layers: int,
    kv_heads: int,
    head_dim: int,
    kv_precision: str,
    tp: int,
    capacity_gb: float,
    utilization: float,
    reserve_gb: float,
    prompt_tokens: int,
    output_tokens: int,
    hbm_tbs: float,
    bf16_tflops: float,
    hbm_efficiency: float,
    flops_efficiency: float,
    ttft_ms: float,
    tpot_ms: float,
    rps: float,
    peak_factor: float,
    headroom: float,
) -> None:
    weights = weight_bytes(parameters, precision)
    kv = kv_cache_bytes_per_token(layers, kv_heads, head_dim, kv_precision, tp)
    assert weights > 0 and math.isfinite(weights)
    assert 0 < kv.per_gpu_bytes <= kv.whole_model_bytes

    plan = serving_plan(
        parameters=parameters,
        weight_bytes=weights,
        kv_bytes_per_token_per_gpu=kv.per_gpu_bytes,
        tp=tp,
        capacity_bytes=capacity_gb * GB,
        gpu_memory_utilization=utilization,
        reserve_bytes=reserve_gb * GB,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        hbm_tbs=hbm_tbs,
        bf16_tflops=bf16_tflops,
        hbm_efficiency=hbm_efficiency,
        flops_efficiency=flops_efficiency,
        ttft_ms_p95=ttft_ms,
        tpot_ms_p95=tpot_ms,
        rps=rps,
        peak_factor=peak_factor,
        headroom=headroom,
    )
    concurrency = plan.concurrency
    for value in (
        concurrency.usable_bytes,
        concurrency.kv_budget_bytes,
        concurrency.shortfall_bytes,
        concurrency.kv_bytes_per_sequence,
        plan.ttft_ms,
        plan.tpot_ms,
        plan.rps_per_replica,
    ):
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


def test_serving_plan_prefill_efficiency_defaults_to_flops_efficiency_and_can_differ() -> None:
    # Prefill runs large matrix products and reaches a higher share of peak than decode; the policy says how much.
    same = serving_plan(**LLAMA3_70B_ON_H100_TP8)
    explicit = serving_plan(**LLAMA3_70B_ON_H100_TP8,
                            prefill_flops_efficiency=LLAMA3_70B_ON_H100_TP8["flops_efficiency"])
    faster = serving_plan(**{**LLAMA3_70B_ON_H100_TP8, "flops_efficiency": 0.25}, prefill_flops_efficiency=0.5)
    assert explicit == same
    prefill_ms = prefill_time_s(70e9, 1024, 4, 8, 989.0, 0.5) * 1e3
    assert faster.points[3].ttft_ms == pytest.approx(max(prefill_ms, same.points[3].ttft_ms))
    assert faster.points[-1].tpot_ms >= same.points[-1].tpot_ms  # decode compute slowed by the 0.25 efficiency
    with pytest.raises(ValueError, match="prefill_flops_efficiency"):
        serving_plan(**LLAMA3_70B_ON_H100_TP8, prefill_flops_efficiency=0.0)

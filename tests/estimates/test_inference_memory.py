"""Tests for rules.estimates.serving.inference_memory: each quotes the published figure it reproduces."""

from __future__ import annotations

import math

import pytest

from rules.estimates.model.hardware import GpuSpec, NodeSpec
from rules.estimates.serving.inference_memory import (
    WEIGHT_PRECISIONS,
    AttentionShape,
    Deployment,
    ServingEngine,
    context_tokens,
    default_head_dim,
    kv_cache_bytes_per_token,
    max_concurrent_sequences,
    replica_memory,
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


# --------------------------------------------------------------------------------- replica memory


def test_replica_memory_seed_004_7b_fp16_on_one_80_gb_gpu() -> None:
    # Given the seed's 7B fp16 model (32 layers, 32 KV heads of 128) on one 80 GB GPU at vLLM's 0.9
    # utilisation with a 2 GiB reserve and sequences of 2048 tokens,
    group = NodeSpec(GpuSpec(capacity_bytes=80 * GB), gpus_per_node=8, nodes=1)
    engine = ServingEngine(gpu_memory_utilization=0.9, reserve_bytes=2 * GIB, block_size_tokens=16)
    attention = AttentionShape(layers=32, heads=32, kv_heads=32, head_dim=128, hidden=4096)

    replica = replica_memory(Deployment(7e9, "fp16", "fp16", 1), group, engine, attention, 2048)

    # then 14 GB of weights and 2 GiB leave 72 − 14 − 2.15 GB for 52 sequences of 1 GiB each
    # (2 × 32 × 32 × 128 × 2 B = 524,288 B per token), as in test_max_concurrent_sequences_seed_004 above.
    assert replica.weight_bytes == pytest.approx(14 * GB)
    assert replica.weight_bytes_per_param == pytest.approx(2.0)
    assert replica.usable_bytes == pytest.approx(72 * GB)
    assert replica.weights_and_reserve_bytes == pytest.approx(14 * GB + 2 * GIB)
    assert replica.kv.per_gpu_bytes == 524_288
    assert replica.concurrency.max_sequences == 52
    assert group.gpus == 8


def test_replica_memory_without_attention_sizes_the_weights_only() -> None:
    # Llama-3-70B in int4 at tp 4: 70e9 × (0.5 + 2.5/128) B = 36.37 GB, 9.09 GB per GPU (AutoGPTQ/AWQ).
    group = NodeSpec(GpuSpec(capacity_bytes=80 * GB), 8, 1)
    engine = ServingEngine(0.9, 2 * GIB)

    replica = replica_memory(Deployment(70e9, "int4", "bf16", 4), group, engine, None, None)

    assert replica.weight_bytes_per_gpu == pytest.approx(70e9 * (0.5 + 2.5 / 128) / 4)
    assert replica.kv is None and replica.concurrency is None


def test_head_dim_and_context_defaults() -> None:
    # Llama-3-70B: hidden 8192 / 64 heads = head dim 128; fewer hidden units than heads give none.
    assert default_head_dim(8192, 64) == 128
    assert default_head_dim(32, 64) is None
    # vLLM reserves prompt + output tokens per sequence when no max_model_len is set.
    assert context_tokens(1024, 256) == 1280

"""Tests for rules.estimates.serving.inference_latency: the roofline of prefill and decode against datasheet figures."""

from __future__ import annotations

import pytest

from rules.estimates.model.hardware import GpuSpec
from rules.estimates.serving.inference_latency import (
    Roofline,
    ServedModel,
    decode_floor,
    decode_floor_s,
    decode_step,
    decode_step_time_s,
    floor_peak_tflops,
    prefill_floor,
    prefill_time_s,
)

GB = 1e9
# NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: 3.35 TB/s HBM3, 989 TFLOPS BF16 dense, 80 GB.
H100_SXM = GpuSpec(capacity_bytes=80 * GB, hbm_tbs=3.35, bf16_tflops=989.0)
# Llama-3-70B in bf16 (140 GB); its KV cache at tp 8 is 2 × 80 layers × 1 KV head × 128 × 2 B = 40,960 B
# per token per GPU (see test_inference_memory).
LLAMA3_70B_TP8 = ServedModel(parameters=70e9, weight_bytes=140e9, kv_bytes_per_token_per_gpu=40_960,
                             tensor_parallel=8)


def test_decode_70b_bf16_one_h100_batch1_is_41_8_ms_per_h100_datasheet_3_35_tbs() -> None:
    # 140 GB of weights streamed once per token at 3.35 TB/s (H100 SXM datasheet): 140 / 3.35 = 41.8 ms.
    one_gpu = ServedModel(70e9, 140e9, 0, 1)
    step_s = decode_step_time_s(one_gpu, H100_SXM, Roofline(1.0, 1.0), batch=1, context_tokens=0)
    assert step_s * 1e3 == pytest.approx(41.79, rel=1e-3)
    assert step_s * 1e3 == pytest.approx(140 / 3.35, rel=0.01)
    # The floor ignores the KV cache and the efficiencies: the same weight read.
    assert decode_floor_s(ServedModel(70e9, 140e9, 327_680, 1), H100_SXM) == step_s


def test_decode_step_adds_kv_reads_and_becomes_compute_bound_at_large_batch() -> None:
    roofline = Roofline(hbm_efficiency=0.8, flops_efficiency=0.5)
    small = decode_step(LLAMA3_70B_TP8, H100_SXM, roofline, batch=1, context_tokens=4096)
    assert small.memory_bound
    assert small.bytes_read_per_gpu == pytest.approx(140e9 / 8 + 4096 * 40_960)
    assert small.step_time_s == pytest.approx(small.bytes_read_per_gpu / (3.35e12 * 0.8))
    # Without KV reads the compute term overtakes the weight read at batch ≈ 17.5e9/2.68e12 / 1.77e-5.
    no_kv = ServedModel(70e9, 140e9, 0, 8)
    large = decode_step(no_kv, H100_SXM, roofline, batch=1024, context_tokens=4096)
    assert not large.memory_bound
    assert large.step_time_s == pytest.approx(2 * 70e9 * 1024 / (8 * 989e12 * 0.5))


def test_prefill_7b_2048_tokens_on_one_h100_at_half_peak() -> None:
    # Kaplan et al. 2020: 2N FLOPs per token → 2 × 7e9 × 2048 / (989e12 × 0.5) = 58.0 ms.
    assert prefill_time_s(7e9, 2048, 1, 1, 989.0, 0.5) * 1e3 == pytest.approx(57.98, rel=1e-3)
    assert prefill_time_s(7e9, 2048, 4, 2, 989.0, 0.5) == pytest.approx(2 * prefill_time_s(7e9, 2048, 1, 1, 989.0, 0.5))


def test_prefill_efficiency_defaults_to_the_decode_flops_efficiency() -> None:
    assert Roofline(0.7, 0.5).prefill_efficiency == 0.5
    assert Roofline(0.7, 0.5, prefill_flops_efficiency=0.6).prefill_efficiency == 0.6


# ------------------------------------------------------------------------------ floors (100 % of the datasheet)
# Llama-2-70B in bf16: 70e9 parameters, 140 GB; 80 layers, 8 KV heads of 128 (GQA, Hugging Face
# meta-llama/Llama-2-70b-hf config.json), so 2 × 80 × 1 × 128 × 2 B = 40,960 B per token per GPU at tp 8.
LLAMA2_70B_TP8 = ServedModel(parameters=70e9, weight_bytes=140e9, kv_bytes_per_token_per_gpu=40_960,
                             tensor_parallel=8)


def test_decode_floor_llama2_70b_bf16_8x_h100_sxm_batch1_is_5_2_ms_per_h100_datasheet_3_35_tbs() -> None:
    # 140 GB / 8 GPUs = 17.5 GB per GPU read once per step at 3.35 TB/s: 17.5e9 / 3.35e12 = 5.22 ms.
    floor = decode_floor(LLAMA2_70B_TP8, H100_SXM)
    assert floor.step_time_s * 1e3 == pytest.approx(5.2239, abs=1e-4)
    assert floor.weight_bytes_per_gpu == 17.5e9
    assert floor.kv_bytes_per_gpu == 0
    assert decode_floor_s(LLAMA2_70B_TP8, H100_SXM) == floor.step_time_s


def test_decode_floor_adds_the_batchs_kv_cache_read_at_full_bandwidth() -> None:
    # Batch 64 of 2,048-token contexts: 64 × 2,048 × 40,960 B = 5.37 GB of KV per GPU on top of 17.5 GB,
    # (17.5e9 + 5.369e9) / 3.35e12 = 6.83 ms.
    floor = decode_floor(LLAMA2_70B_TP8, H100_SXM, batch=64, context_tokens=2048)
    assert floor.kv_bytes_per_gpu == 64 * 2048 * 40_960 == 5_368_709_120
    assert floor.bytes_read_per_gpu == pytest.approx(17.5e9 + 5_368_709_120)
    assert floor.step_time_s * 1e3 == pytest.approx((17.5e9 + 5_368_709_120) / 3.35e12 * 1e3)
    assert floor.step_time_s * 1e3 == pytest.approx(6.826, abs=1e-3)
    # The floor never depends on an efficiency: the roofline's decode step at 100 % reads the same bytes.
    assert floor.step_time_s == decode_step(LLAMA2_70B_TP8, H100_SXM, Roofline(1.0, 1.0), 64, 2048).memory_time_s


def test_decode_floor_llama31_8b_a100_40gb_sits_under_a_published_batch1_measurement() -> None:
    # Llama-3.1-8B (8.03e9 parameters, bf16: 16.06 GB) on one A100 40GB (1,555 GB/s, A100 whitepaper): the floor
    # is 16.06e9 / 1.555e12 = 10.33 ms, i.e. 96.8 tokens/s. J. Musgrave, "vLLM throughput-latency sweep on NVIDIA
    # A100" (vllm bench serve, 1,024-token prompts, concurrency 1) measured about 75 tokens/s, "roughly 77% of the
    # GPU's memory-bandwidth ceiling": 13.3 ms, above the floor by 1 / 0.77.
    a100_40gb = GpuSpec(capacity_bytes=40 * GB, hbm_tbs=1.555, bf16_tflops=312.0)
    floor_ms = decode_floor_s(ServedModel(8.03e9, 16.06e9, 131_072, 1), a100_40gb) * 1e3
    assert floor_ms == pytest.approx(10.328, abs=1e-3)
    assert floor_ms / (1e3 / 75) == pytest.approx(0.77, abs=0.01)


def test_prefill_floor_llama2_70b_1024_tokens_8x_h100_is_18_1_ms_of_compute() -> None:
    # Kaplan et al. 2020: 2N FLOPs per token → 2 × 70e9 × 1,024 = 1.434e14 FLOPs over 8 × 989e12 FLOP/s.
    floor = prefill_floor(LLAMA2_70B_TP8, H100_SXM, 1024, 989.0)
    assert floor.compute_s == pytest.approx(2 * 70e9 * 1024 / (8 * 989e12))
    assert floor.time_s * 1e3 == pytest.approx(18.12, abs=0.01)
    assert floor.compute_bound
    assert floor.compute_s == prefill_time_s(70e9, 1024, 1, 8, 989.0, 1.0)


def test_prefill_floor_of_a_short_prompt_is_the_weight_read() -> None:
    # 128 tokens: 2 × 70e9 × 128 / 7.912e15 = 2.26 ms of FLOPs, but the forward pass reads 17.5 GB per GPU: 5.22 ms.
    floor = prefill_floor(LLAMA2_70B_TP8, H100_SXM, 128, 989.0)
    assert floor.compute_s * 1e3 == pytest.approx(2.265, abs=1e-3)
    assert floor.time_s == floor.weight_read_s == decode_floor_s(LLAMA2_70B_TP8, H100_SXM)
    assert not floor.compute_bound


def test_floor_peak_is_the_fastest_dense_rate_for_the_weights_per_datasheets() -> None:
    # H100 SXM datasheet: FP8 1,979 dense TFLOPS = 2 × BF16 989; A100 whitepaper: INT8 624, INT4 1,248 = 2 and 4 × 312.
    assert floor_peak_tflops(989.5, "fp8") == pytest.approx(1979)
    assert floor_peak_tflops(312.0, "int8") == 624
    assert floor_peak_tflops(312.0, "int4") == 1248
    assert floor_peak_tflops(989.5, "bf16") == floor_peak_tflops(989.5, "fp32") == 989.5
    with pytest.raises(ValueError, match="weight precision"):
        floor_peak_tflops(989.5, "int3")

"""Tests for rules.estimates.inference_latency: the roofline of prefill and decode against datasheet figures."""

from __future__ import annotations

import pytest

from rules.estimates.inference_latency import (
    GpuSpec,
    Roofline,
    ServedModel,
    decode_floor_s,
    decode_step,
    decode_step_time_s,
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

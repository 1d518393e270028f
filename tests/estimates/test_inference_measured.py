"""Tests for rules.estimates.serving.inference_measured: capacity from measured latencies, and measurements against
floors."""

from __future__ import annotations

import pytest

from rules.estimates.model.hardware import GpuSpec
from rules.estimates.serving.inference import Requests, Slo, Traffic, requests_per_s_per_replica, serving_plan
from rules.estimates.serving.inference_latency import Roofline, ServedModel
from rules.estimates.serving.inference_measured import (
    MeasuredPoint,
    floor_comparison,
    furthest_below_floor,
    measured_capacity,
    representative_points,
)
from rules.estimates.serving.inference_memory import ServingEngine

GB = 1e9
# NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: 3.35 TB/s HBM3, 989 TFLOPS BF16 dense, 80 GB.
H100_SXM = GpuSpec(capacity_bytes=80 * GB, hbm_tbs=3.35, bf16_tflops=989.0)
# Llama-2-70B in bf16 at tp 8: 140 GB of weights, 40,960 B of KV cache per token per GPU (80 layers, 8 KV heads).
LLAMA2_70B_TP8 = ServedModel(parameters=70e9, weight_bytes=140e9, kv_bytes_per_token_per_gpu=40_960,
                             tensor_parallel=8)
ONE_GPU = ServedModel(parameters=7e9, weight_bytes=14e9, kv_bytes_per_token_per_gpu=131_072, tensor_parallel=1)


def _point(batch: int, ttft_ms: float, tpot_ms: float, model: ServedModel = LLAMA2_70B_TP8, prompt: int = 1024,
           context: int | None = None) -> MeasuredPoint:
    return MeasuredPoint(batch=batch, ttft_ms=ttft_ms, tpot_ms=tpot_ms, prompt_tokens=prompt,
                         context_tokens=prompt if context is None else context, model=model)


# ------------------------------------------------------------------------------ floors


def test_a_tpot_of_2_1_ms_at_batch_64_is_below_the_h100_hbm_floor() -> None:
    # 17.5 GB of weights + 64 × 2,048 × 40,960 B of KV per GPU at 3.35 TB/s: 6.83 ms; a measured 2.1 ms is 31 % of it.
    comparison = floor_comparison(_point(64, 400, 2.1, prompt=2048), H100_SXM, 989.0)
    assert comparison.decode.step_time_s * 1e3 == pytest.approx((17.5e9 + 64 * 2048 * 40_960) / 3.35e12 * 1e3)
    assert comparison.tpot_to_floor == pytest.approx(2.1 / 6.826, abs=1e-3)
    assert (comparison.figure, comparison.below_floor) == ("TPOT", True)
    assert comparison.floor_ms == pytest.approx(6.826, abs=1e-3)
    assert comparison.measured_ms == 2.1


def test_a_ttft_below_the_prefill_floor_is_the_figure_named() -> None:
    # One 1,024-token prompt of a 70B model on 8 H100s at 989 TFLOP/s: 18.1 ms; 9 ms is half of it.
    comparison = floor_comparison(_point(16, 9, 12.5), H100_SXM, 989.0)
    assert comparison.ttft_to_floor == pytest.approx(9 / 18.12, abs=1e-3)
    assert comparison.figure == "TTFT"
    assert comparison.to_floor == comparison.ttft_to_floor


def test_an_honest_measurement_lies_above_both_floors() -> None:
    comparison = floor_comparison(_point(32, 290, 15.8), H100_SXM, 989.0)
    assert comparison.to_floor > 1
    assert not comparison.below_floor


def test_the_decode_floor_reads_the_context_each_sequence_holds_at_least() -> None:
    # Context defaults to the prompt (the least a decoding sequence holds); a longer context reads more KV.
    short = floor_comparison(_point(64, 400, 10, prompt=1024), H100_SXM, 989.0)
    long = floor_comparison(_point(64, 400, 10, prompt=1024, context=4096), H100_SXM, 989.0)
    assert long.decode.kv_bytes_per_gpu == 4 * short.decode.kv_bytes_per_gpu == 4 * 64 * 1024 * 40_960


def test_the_point_furthest_below_its_floor_is_chosen() -> None:
    comparisons = [floor_comparison(p, H100_SXM, 989.0) for p in (_point(16, 210, 12.5), _point(64, 520, 3.0),
                                                                  _point(16, 12, 12.5))]
    assert furthest_below_floor(comparisons) is comparisons[1]  # 3.0 / 6.07 = 0.49 < 12 / 18.1 = 0.66
    assert furthest_below_floor([]) is None


# ------------------------------------------------------------------------------ capacity


def test_measured_capacity_seed_004_steps6_and_7_batch32_15_rps_24_replicas() -> None:
    # Seed 004 step 6: batch 32, 200 output tokens, 3,000 tokens/s → TPOT 32/3000 s and 15 requests/s per GPU;
    # step 7: 100 rps average, peak 3, 20 % headroom → 20 + 4 = 24 GPUs. Batch 64 misses the TPOT SLO.
    points = [_point(16, 0.0, 16 / 3000 * 1e3, ONE_GPU), _point(32, 0.0, 32 / 3000 * 1e3, ONE_GPU),
              _point(64, 0.0, 64 / 3000 * 1e3, ONE_GPU)]
    capacity = measured_capacity(points, 200, Traffic(100, 3, 0.2), Slo(ttft_ms_p95=500, tpot_ms_p95=15))
    assert capacity.feasible and capacity.batch == 32
    assert capacity.rps_per_replica == pytest.approx(15.0)
    assert capacity.replicas is not None
    assert (capacity.replicas.peak_replicas, capacity.replicas.spare_replicas, capacity.replicas_needed) == (20, 4, 24)
    assert capacity.gpus_needed == 24
    assert capacity.reason == "the next measured batch, 64, misses the TPOT SLO"


def test_measured_and_modelled_capacity_use_the_same_little_law_estimator() -> None:
    # Given the roofline plan of a replica, when its chosen point is submitted as a measurement,
    # then the measured plan gives the same requests/s per replica and the same replicas.
    requests, traffic, slo = Requests(1024, 256, 8192), Traffic(6, 2, 0.2), Slo(1000, 50)
    engine = ServingEngine(gpu_memory_utilization=0.9, reserve_bytes=2 * 2**30)
    plan = serving_plan(LLAMA2_70B_TP8, H100_SXM, engine, requests, traffic, slo, Roofline(0.7, 0.5, 0.5))
    point = _point(plan.batch, plan.ttft_ms, plan.tpot_ms)

    capacity = measured_capacity([point], requests.output_tokens, traffic, slo)

    assert capacity.rps_per_replica == pytest.approx(plan.rps_per_replica, rel=1e-12)
    assert (capacity.replicas_needed, capacity.gpus_needed) == (plan.replicas_needed, plan.gpus_needed)
    assert capacity.reason == f"the largest batch measured ({plan.batch})"


def test_little_law_on_a_measured_point() -> None:
    # 64 in flight, each for 0.52 s + 256 × 22.4 ms = 6.25 s: 10.23 requests/s.
    capacity = measured_capacity([_point(64, 520, 22.4)], 256, Traffic(4, 2, 0.2), Slo(1000, 50))
    assert capacity.rps_per_replica == pytest.approx(64 / (0.52 + 256 * 0.0224))
    assert capacity.rps_per_replica == requests_per_s_per_replica(64, 0.52, 256, 0.0224)
    assert (capacity.replicas_needed, capacity.gpus_needed) == (1, 8)  # 4 × 2 × 1.2 = 9.6 rps ≤ 10.23


def test_a_batch_measured_twice_meets_the_slo_only_if_both_runs_do() -> None:
    points = [_point(16, 210, 12.5), _point(32, 290, 15.8), _point(32, 1200, 16.0)]
    capacity = measured_capacity(points, 256, Traffic(1, 1, 0), Slo(1000, 50))
    assert capacity.batch == 16
    assert capacity.reason == "the next measured batch, 32, misses the TTFT SLO"


def test_the_slowest_run_of_the_deciding_batch_counts() -> None:
    capacity = measured_capacity([_point(32, 290, 15.8), _point(32, 300, 17.0)], 256, Traffic(1, 1, 0),
                                 Slo(1000, 50))
    assert capacity.point is not None and capacity.point.tpot_ms == 17.0


def test_no_measured_batch_within_the_slos_is_infeasible_and_says_why() -> None:
    capacity = measured_capacity([_point(32, 1500, 20), _point(16, 1200, 60)], 256, Traffic(1, 1, 0),
                                 Slo(1000, 50))
    assert not capacity.feasible
    assert (capacity.batch, capacity.rps_per_replica, capacity.gpus_needed) == (0, 0.0, None)
    assert capacity.reason.startswith("no measured batch meets both SLOs: the smallest measured, batch 16, has p95 "
                                      "TTFT 1200 ms")


def test_only_points_at_the_replicas_tp_and_prompt_length_size_the_plan() -> None:
    tp4 = ServedModel(70e9, 140e9, 81_920, 4)
    points = [_point(16, 210, 12.5), _point(16, 150, 20, tp4), _point(16, 90, 12, prompt=128),
              _point(16, 300, 13, prompt=2048)]
    assert representative_points(points, 8, 1024) == (points[0], points[3])

"""Property: for any valid serving workload, evaluate() decides both serving checks without raising, and
their evidence holds no NaN, infinite or negative number."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules.catalogue import load_catalogue
from rules.evaluate import evaluate, validate_submission

SERVING_CHECKS = ("inference-memory", "inference-capacity")
GPU_MODELS = sorted(load_catalogue().gpu_models())


# Inputs a submission may leave out: the checks then default them or report them missing.
OMITTABLE = ("weight_precision", "kv_cache_precision", "tensor_parallel", "context_tokens", "prompt_tokens",
             "output_tokens", "rps", "peak_factor", "headroom", "gpu_memory_utilization", "ttft_ms_p95",
             "tpot_ms_p95", "architecture")


@st.composite
def architectures(draw: st.DrawFn) -> dict[str, Any]:
    heads = draw(st.sampled_from([1, 2, 8, 12, 16, 32, 40, 64, 96, 128]))
    head_dim = draw(st.sampled_from([32, 64, 80, 128, 256]))
    kv_heads = draw(st.one_of(st.sampled_from([h for h in (1, 2, 4, 8, 16, 32, 64, 128) if h <= heads]),
                              st.integers(1, 256)))
    architecture = {"layers": draw(st.integers(1, 160)), "heads": heads}
    if draw(st.booleans()):
        architecture["hidden"] = heads * head_dim
    else:  # head_dim given, hidden perhaps not a multiple of heads (or even smaller than heads)
        architecture["head_dim"] = head_dim
        if draw(st.booleans()):
            architecture["hidden"] = draw(st.integers(1, 32768))
    if draw(st.booleans()):
        architecture["kv_heads"] = kv_heads
    return architecture


@st.composite
def serving_submissions(draw: st.DrawFn) -> dict[str, Any]:
    gpu: dict[str, Any] = {"model": draw(st.sampled_from(GPU_MODELS)), "count": draw(st.sampled_from([1, 2, 4, 8]))}
    if draw(st.booleans()):  # figures the quote states itself, overriding the catalogue
        gpu.update(memory_gib=draw(st.floats(1, 300)), hbm_tbs=draw(st.floats(0.05, 10)),
                   bf16_tflops=draw(st.floats(5, 5000)))
    omitted = draw(st.one_of(st.just(frozenset()), st.frozensets(st.sampled_from(OMITTABLE), max_size=4)))
    fields: dict[str, Any] = {
        "weight_precision": draw(st.sampled_from(["bf16", "fp16", "fp8", "int8", "int4", "fp32"])),
        "kv_cache_precision": draw(st.sampled_from(["bf16", "fp16", "fp8", "int8"])),
        "tensor_parallel": draw(st.sampled_from([1, 2, 3, 4, 8, 16, 32])),
        "context_tokens": draw(st.one_of(st.integers(1, 32768), st.integers(1, 1_048_576))),
        "prompt_tokens": draw(st.integers(1, 32768)),
        "output_tokens": draw(st.integers(1, 8192)),
        "rps": 10 ** draw(st.floats(-3, 5)),
        "peak_factor": draw(st.floats(0.1, 10)),
        "headroom": draw(st.floats(0, 3)),
        "gpu_memory_utilization": draw(st.floats(0.01, 1)),
    }
    slo = {"ttft_ms_p95": 10 ** draw(st.floats(0, 5)), "tpot_ms_p95": 10 ** draw(st.floats(-0.5, 3.5))}
    model: dict[str, Any] = {"name": "m", "parameters": 10 ** draw(st.floats(6, 12.3)),
                             "architecture": draw(architectures())}
    inference = {"model": {k: v for k, v in model.items() if k not in omitted},
                 **{k: v for k, v in fields.items() if k not in omitted},
                 "slo": {k: v for k, v in slo.items() if k not in omitted}}
    submission = {"schema_version": "1",
                  "quote": {"vendor": "Property", "quote_id": "P-1",
                            "node_groups": [{"name": "serve", "count": draw(st.integers(1, 64)), "gpu": gpu}]},
                  "workload": {"inference": inference}}
    points = draw(st.lists(measured_points(), max_size=4))
    if points:
        submission["measurements"] = {"serving_latency": points}
    return submission


@st.composite
def measured_points(draw: st.DrawFn) -> dict[str, Any]:
    """A measured load point (measurements.serving_latency), its optional members drawn or left out."""
    point: dict[str, Any] = {"batch": draw(st.integers(1, 1024)), "ttft_ms": 10 ** draw(st.floats(-2, 5)),
                             "tpot_ms": 10 ** draw(st.floats(-2, 4))}
    optional = {"prompt_tokens": st.integers(1, 32768), "context_tokens": st.integers(1, 1_048_576),
                "tensor_parallel": st.sampled_from([1, 2, 4, 8, 16])}
    for name, values in optional.items():
        if draw(st.booleans()):
            point[name] = draw(values)
    return point


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [value]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return []


def test_the_catalogue_lists_gpu_models_to_draw_from() -> None:
    assert GPU_MODELS


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(serving_submissions())
def test_serving_checks_decide_every_valid_workload_with_finite_non_negative_evidence(
        submission: dict[str, Any]) -> None:
    validate_submission(submission)  # the strategy draws only valid submissions

    record = evaluate(submission)

    for check_id in SERVING_CHECKS:
        result = next(c for c in record["checks"] if c["id"] == check_id)
        assert result["status"] in ("pass", "warn", "fail", "insufficient-data"), result
        numbers = _numbers({k: v for k, v in result["evidence"].items() if k != "inputs"})
        assert all(math.isfinite(n) and n >= 0 for n in numbers), (check_id, result["evidence"])
        if result["status"] == "insufficient-data" and "rejects the inputs" not in result["message"]:
            assert result["evidence"]["missing"], result

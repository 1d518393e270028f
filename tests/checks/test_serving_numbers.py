"""The serving checks reproduce published serving figures through their evidence, and the serving example passes.

Sources: seed 004_fd79d6760ce15dd9.txt step 4 (KV cache of a 7B model); Hugging Face
meta-llama/Meta-Llama-3-70B config.json (num_hidden_layers 80, num_key_value_heads 8, hidden_size 8192,
num_attention_heads 64: head dim 128); NVIDIA H100 Tensor Core GPU datasheet (H100 SXM: 3.35 TB/s HBM3).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rules.evaluate import evaluate, parse_submission
from rules.units import GB, GIB

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "l40s-8b-serving.json"

# meta-llama/Meta-Llama-3-70B config.json
LLAMA3_70B_ARCHITECTURE = {"layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672,
                           "vocab": 128256, "tied_embeddings": False, "mlp": "swiglu"}
TRAFFIC = {"prompt_tokens": 512, "output_tokens": 128, "rps": 1, "peak_factor": 2,
           "slo": {"ttft_ms_p95": 2000, "tpot_ms_p95": 100}}


def _serving(group: dict[str, Any], **inference: Any) -> dict[str, Any]:
    return {"schema_version": "1",
            "quote": {"vendor": "Test", "quote_id": "T-1", "node_groups": [{"name": "serve", "count": 1, **group}]},
            "workload": {"inference": inference}}


def _check(record: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in record["checks"] if c["id"] == check_id)


def _seed_7b_on_one_80gb_gpu() -> dict[str, Any]:
    # Seed 004 step 4: 7B, 32 layers, hidden 4096, fp16 (32 heads of 128; the seed's formula uses the
    # hidden size, i.e. one KV head per query head), sequence 2048.
    return _serving({"gpu": {"model": "A100-SXM4-80GB", "count": 1}},
                    model={"name": "7B", "parameters": 7e9,
                           "architecture": {"layers": 32, "hidden": 4096, "heads": 32}},
                    weight_precision="fp16", context_tokens=2048, **TRAFFIC)


def test_seed_004_step4_7b_batch32_seq2048_fp16_kv_cache_is_34_4_gb_through_the_check() -> None:
    result = _check(evaluate(_seed_7b_on_one_80gb_gpu()), "inference-memory")
    evidence = result["evidence"]

    # 2 × 32 × 4096 × 2048 × 32 × 2 bytes = 34,359,738,368 ≈ 34.4 GB (seed: "≈ 34 GB").
    kv_batch32 = evidence["kv_cache_bytes_per_token"] * 2048 * 32
    assert kv_batch32 == 2 * 32 * 4096 * 2048 * 32 * 2 == 34_359_738_368
    assert kv_batch32 / GB == pytest.approx(34.4, abs=0.05)
    # "Add to weights (14 GB) → ~48 GB, so one 80 GB GPU can handle that batch."
    assert evidence["weights_gib"] * GIB == pytest.approx(14 * GB)
    assert evidence["max_concurrent_sequences"] >= 32
    assert result["status"] == "pass"
    assert "32 KV heads (no GQA" in result["message"]
    assert evidence["gqa"] is False


def test_llama3_70b_bf16_kv_cache_is_327680_bytes_per_token_per_hf_config() -> None:
    # 2 × 80 layers × 8 KV heads × 128 × 2 B (bf16): GQA makes it 8× smaller than the 64 query heads would.
    submission = _serving({"server_model": "DGX-H100"},
                          model={"name": "Llama-3-70B", "parameters": 70553706496,
                                 "architecture": LLAMA3_70B_ARCHITECTURE},
                          weight_precision="bf16", tensor_parallel=8, context_tokens=8192, **TRAFFIC)
    evidence = _check(evaluate(submission), "inference-memory")["evidence"]

    assert evidence["kv_cache_bytes_per_token"] == 327_680
    assert evidence["kv_cache_bytes_per_token_per_gpu"] == 327_680 // 8
    assert (evidence["kv_heads"], evidence["head_dim"], evidence["gqa"]) == (8, 128, True)


def test_decode_floor_70b_bf16_one_h100_sxm5_batch1_is_42_ms_per_h100_datasheet_3_35_tbs() -> None:
    # 140 GB of bf16 weights streamed once per token at 3.35 TB/s: 41.8 ms, whatever the batch's KV cache.
    submission = _serving({"gpu": {"model": "H100-SXM5-80GB", "count": 1}},
                          model={"name": "70B", "parameters": 70e9, "architecture": LLAMA3_70B_ARCHITECTURE},
                          weight_precision="bf16", context_tokens=4096, **TRAFFIC)
    result = _check(evaluate(submission), "inference-capacity")

    floor_ms = result["evidence"]["decode_floor_ms_batch1"]
    assert floor_ms == pytest.approx(140e9 / 3.35e12 * 1e3, rel=0.01)
    assert floor_ms == pytest.approx(42, rel=0.01)
    assert result["status"] == "fail"  # 130 GiB of weights do not fit one 80 GB GPU


def test_kv_cache_precision_defaults_to_bf16_for_int4_weights_and_says_so() -> None:
    submission = _serving({"gpu": {"model": "L40S-48GB", "count": 8}},
                          model={"name": "70B", "parameters": 70e9, "architecture": LLAMA3_70B_ARCHITECTURE},
                          weight_precision="int4", tensor_parallel=2, context_tokens=8192, **TRAFFIC)
    result = _check(evaluate(submission), "inference-memory")
    evidence = result["evidence"]

    # AutoGPTQ/AWQ group 128: 0.5 B + (2 B fp16 scale + 0.5 B zero) / 128 per weight.
    assert evidence["weight_bytes_per_param"] == pytest.approx(0.5 + 2.5 / 128)
    assert evidence["kv_cache_precision"] == "bf16"
    assert "int4 weights are not 16-bit" in result["message"]


def test_fp8_kv_cache_halves_the_bytes_per_token_and_is_reported_as_submitted() -> None:
    submission = _serving({"server_model": "DGX-H100"},
                          model={"name": "Llama-3-70B", "parameters": 70553706496,
                                 "architecture": LLAMA3_70B_ARCHITECTURE},
                          weight_precision="bf16", kv_cache_precision="fp8", tensor_parallel=8,
                          context_tokens=8192, **TRAFFIC)
    result = _check(evaluate(submission), "inference-memory")

    assert result["evidence"]["kv_cache_bytes_per_token"] == 163_840
    assert "fp8, as submitted" in result["message"]


def test_tensor_parallel_beyond_kv_heads_replicates_them() -> None:
    # vLLM ModelConfig.get_num_kv_heads: max(1, 8 // 16) = 1 head per GPU, so per-GPU KV stops shrinking.
    submission = _serving({"server_model": "DGX-H100"},
                          model={"name": "Llama-3-70B", "parameters": 70553706496,
                                 "architecture": LLAMA3_70B_ARCHITECTURE},
                          weight_precision="bf16", tensor_parallel=16, context_tokens=8192, **TRAFFIC)
    evidence = _check(evaluate(submission), "inference-memory")["evidence"]

    assert (evidence["kv_heads_per_gpu"], evidence["kv_cache_bytes_per_token_per_gpu"]) == (1, 40_960)


def test_capacity_needs_more_gpus_than_one_node_when_tp_exceeds_it() -> None:
    # tp 16 on one 8-GPU node: a single replica already needs twice the quoted GPUs.
    submission = _serving({"server_model": "DGX-H100"},
                          model={"name": "Llama-3-70B", "parameters": 70553706496,
                                 "architecture": LLAMA3_70B_ARCHITECTURE},
                          weight_precision="bf16", tensor_parallel=16, context_tokens=8192, **TRAFFIC)
    result = _check(evaluate(submission), "inference-capacity")

    assert result["status"] == "fail"
    assert result["evidence"]["gpus_needed"] >= 16 > result["evidence"]["gpus_quoted"] == 8


def test_l40s_serving_example_passes_the_serving_checks() -> None:
    # Given the two-node L40S quote for Llama-3-8B in bf16 (examples/l40s-8b-serving.json),
    submission = parse_submission(EXAMPLE.read_bytes(), origin=str(EXAMPLE))
    # when it is evaluated,
    record = evaluate(submission)
    memory, capacity = _check(record, "inference-memory"), _check(record, "inference-capacity")
    # then both serving checks pass with the figures the example documents, and nothing fails.
    assert (memory["status"], capacity["status"]) == ("pass", "pass"), (memory["message"], capacity["message"])
    assert memory["evidence"]["kv_cache_bytes_per_token"] == 2 * 32 * 8 * 128 * 2
    assert memory["evidence"]["max_concurrent_sequences"] == 23
    assert capacity["evidence"]["gpus_quoted"] == 16
    assert capacity["evidence"]["gpus_needed"] == 12
    assert capacity["evidence"]["ttft_ms"] <= 1000 and capacity["evidence"]["tpot_ms"] <= 50
    assert _check(record, "training-objective")["status"] == "not-applicable"
    # Its racks fit (2 × 5 kW within 2N PDUs of 17.3 kW and 15 kW air); rack-power warns only that its Supermicro
    # server is not in the catalogue, so the server's own figures are the vendor's.
    power = _check(record, "rack-power")
    assert (power["status"], power["rule"]) == ("warn", "not-in-catalogue")
    assert power["evidence"]["worst_draw_kw"] == pytest.approx(10.0)
    assert power["evidence"]["worst_utilisation"] < power["thresholds"]["warn_fraction"]


def test_serving_example_is_valid_json_with_the_hf_config_of_llama3_8b() -> None:
    architecture = json.loads(EXAMPLE.read_text())["workload"]["inference"]["model"]["architecture"]
    values = {k: v["value"] if isinstance(v, dict) else v for k, v in architecture.items()}
    assert values == {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
                      "vocab": 128256, "tied_embeddings": False, "mlp": "swiglu"}


# meta-llama/Llama-2-70b-hf config.json: 80 layers, hidden 8192, 64 heads, 8 KV heads (GQA), vocab 32,000.
LLAMA2_70B = {"name": "Llama-2-70B", "parameters": 70e9,
              "architecture": {"layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672,
                               "vocab": 32000, "tied_embeddings": False, "mlp": "swiglu"}}


def _measured(points: list[dict[str, Any]], **inference: Any) -> dict[str, Any]:
    submission = _serving({"server_model": "DGX-H100"}, model=LLAMA2_70B, weight_precision="bf16",
                          tensor_parallel=8, context_tokens=4096,
                          **{**TRAFFIC, "prompt_tokens": 2048, "output_tokens": 256, **inference})
    submission["measurements"] = {"serving_latency": points}
    return submission


def test_tpot_2_1_ms_at_batch_64_fails_below_the_6_8_ms_floor_of_llama2_70b_on_8_h100() -> None:
    # Given a claimed p95 TPOT of 2.1 ms at batch 64 for Llama-2-70B bf16 at tp 8 on a DGX H100,
    record = evaluate(_measured([{"batch": 64, "ttft_ms": 400, "tpot_ms": 2.1}]))
    result = _check(record, "inference-capacity")
    # then each step must read 140 GB / 8 = 17.5 GB of weights and 64 × 2,048 × 40,960 B = 5.37 GB of KV cache per
    # GPU at the datasheet's 3.35 TB/s: 22.87 GB / 3.35e12 = 6.83 ms, so the claim fails as beyond physics.
    assert (result["status"], result["rule"]) == ("fail", "latency-beyond-floor")
    assert result["evidence"]["latency_floor_ms"] == pytest.approx((17.5e9 + 64 * 2048 * 40_960) / 3.35e12 * 1e3)
    assert "measured p95 TPOT 2.1 ms at batch 64" in result["message"]
    assert "below the 6.83 ms that the H100-SXM5-80GB's 3.35 TB/s needs just to read each GPU's 17.5 GB" \
        in result["message"]


def test_measured_points_at_the_planned_replica_size_the_plan_beside_the_roofline() -> None:
    points = [{"batch": 16, "ttft_ms": 300, "tpot_ms": 13}, {"batch": 48, "ttft_ms": 700, "tpot_ms": 21},
              {"batch": 96, "ttft_ms": 2600, "tpot_ms": 30}]
    result = _check(evaluate(_measured(points)), "inference-capacity")
    evidence = result["evidence"]

    assert (result["basis"], evidence["latency_from"], evidence["measured_batch"]) == ("measured", "measured", 48)
    assert evidence["rps_per_replica"] == pytest.approx(48 / (0.7 + 256 * 0.021))
    assert (evidence["ttft_ms"], evidence["tpot_ms"]) == (700, 21)
    assert evidence["modelled_ttft_ms"] > 0 and evidence["modelled_tpot_ms"] > 0
    assert "the next measured batch, 96, misses the TTFT SLO" in result["message"]


def test_measured_points_of_another_replica_are_judged_against_their_floor_but_do_not_size_the_plan() -> None:
    result = _check(evaluate(_measured([{"batch": 16, "ttft_ms": 300, "tpot_ms": 20, "tensor_parallel": 4}])),
                    "inference-capacity")

    assert (result["basis"], result["evidence"]["latency_from"]) == ("estimated", "modelled")
    assert "no measured point is at the replica's tp 8" in result["message"]
    # At tp 4 each GPU reads 35 GB of weights and 16 × 2,048 × 81,920 B of KV cache: 12.0 ms, below the 20 ms.
    assert result["evidence"]["latency_floor_ms"] == pytest.approx((35e9 + 16 * 2048 * 81_920) / 3.35e12 * 1e3)


def test_without_measurements_the_plan_says_its_latencies_are_modelled() -> None:
    result = _check(evaluate(parse_submission(EXAMPLE.read_bytes(), origin=str(EXAMPLE))), "inference-capacity")

    assert (result["basis"], result["evidence"]["latency_from"]) == ("estimated", "modelled")
    assert "measured_to_floor_ratio" not in result["evidence"]

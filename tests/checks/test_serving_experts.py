"""Serving Mixtral-8x7B on 8 H100: inference-memory counts every expert's weights, inference-capacity the active ones'
compute, the experts the batch touches and the expert-parallel all-to-all.

Published numbers used:
- Mixtral 8x7B: Hugging Face mistralai/Mixtral-8x7B-v0.1 config.json (32 layers, hidden 4096, 32 heads, 8 KV heads,
  intermediate 14336, vocab 32000, 8 local experts, 2 per token); 46,702,792,704 parameters in all and 12,879,925,248
  active per token (Jiang et al. 2024, arXiv 2401.04088 §2.1: "47B" and "13B active"; the exact counts from the
  config as tests/test_models_by_name.py checks them). By name the model catalogue states the paper's 46.7e9
  parameters, which size the weights; the architecture's counts split them: the routed experts, 32 layers × 8 × 3 ×
  4096 × 14336 = 45,097,156,608 of the 46,702,792,704 (96.56 %), the rest (attention, norms, routers, embeddings)
  1,605,636,096.
- NVIDIA H100 SXM datasheet: 3.35 TB/s HBM3, 989.4 dense BF16 TFLOP/s, NVLink 900 GB/s (450 per direction).
- DeepEP docs/legacy.md: intranode EP8 all-to-all bottleneck 153 of 200 GB/s per direction = 0.765 (catalogue
  step_time.all_to_all.nvlink_fraction).
- The policy's serving efficiencies (prefill 50 % of peak FLOP/s, decode 70 % of HBM bandwidth and 50 % of peak) and
  routed load factor 1.25 (memory.moe.dropless_load_factor), as rules/data/policy.default.json states them.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rules.checks.facts.serving import EXPERTS_NOT_MODELLED
from rules.evaluate import evaluate

TOTAL, ACTIVE, ROUTED = 46_702_792_704, 12_879_925_248, 45_097_156_608
BY_NAME = 46.7e9  # the catalogue's parameters of Mixtral-8x7B (Jiang et al. 2024 §2.1)
WEIGHT_BYTES = BY_NAME * 2  # bf16
ROUTED_BYTES = WEIGHT_BYTES * ROUTED / TOTAL
GPUS = 8
HBM_BYTES_S, BF16_FLOPS_S = 3.35e12, 989.4e12
PREFILL_EFF, DECODE_HBM_EFF, DECODE_FLOPS_EFF = 0.5, 0.7, 0.5
A2A_BYTES_S = 900e9 / 2 * 0.765  # H100 NVLink per direction × DeepEP's intranode fraction
LOAD_FACTOR = 1.25
LAYERS, HIDDEN, EXPERTS, TOP_K = 32, 4096, 8, 2
KV_BYTES_PER_TOKEN_PER_GPU = 2 * LAYERS * 1 * 128 * 2  # K and V × layers × one of 8 KV heads per GPU × dim × bf16
PROMPT, OUTPUT = 1024, 256

SUBMISSION: dict[str, Any] = {
    "schema_version": "1",
    "quote": {"vendor": "Test", "quote_id": "T-1",
              "node_groups": [{"name": "serve", "count": 1, "server_model": "DGX-H100"}]},
    "workload": {"inference": {
        "model": {"name": "Mixtral-8x7B"},
        "weight_precision": "bf16", "tensor_parallel": 8, "parallelism": {"expert": 8},
        "context_tokens": 8192, "prompt_tokens": PROMPT, "output_tokens": OUTPUT, "rps": 6, "peak_factor": 2,
        "headroom": 0.2, "slo": {"ttft_ms_p95": 1000, "tpot_ms_p95": 50}}},
}


def _checks(submission: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in evaluate(submission)["checks"]}


def _all_to_all_s(tokens: float) -> float:
    # One all-to-all: each GPU sends its tokens / 8 × 2 copies × 4096 × 2 bytes, 7/8 of it to its 7 NVLink peers,
    # × the busiest receiver's load; dispatch and combine in each of the 32 layers.
    size = tokens / GPUS * TOP_K * HIDDEN * 2
    return 2 * LAYERS * LOAD_FACTOR * size * 7 / 8 / A2A_BYTES_S


@pytest.fixture(scope="module")
def mixtral() -> dict[str, dict[str, Any]]:
    return _checks(SUBMISSION)


def test_inference_memory_holds_every_experts_weights(mixtral: dict[str, dict[str, Any]]) -> None:
    memory = mixtral["inference-memory"]["evidence"]

    # Every expert's weights: 46.7e9 × 2 B = 93.4e9 B (86.99 GiB), 11.675e9 B (10.87 GiB) on each of the 8 GPUs.
    assert memory["parameters"] == BY_NAME
    assert memory["weights_gib"] == pytest.approx(93.4e9 / 2**30)
    assert memory["weights_gib_per_gpu"] == pytest.approx(11.675e9 / 2**30)
    assert mixtral["inference-memory"]["status"] == "pass"


def test_inference_capacity_computes_with_the_active_parameters(mixtral: dict[str, dict[str, Any]]) -> None:
    capacity = mixtral["inference-capacity"]["evidence"]

    # 2 FLOPs per active parameter per token: 2 × 12,879,925,248 = 25,759,850,496 (attention left out, as for a
    # dense model); all 46.7B would give 93,405,585,408, 3.6× more.
    assert capacity["active_parameters"] == ACTIVE
    assert capacity["flops_per_token"] == 25_759_850_496
    assert (capacity["experts"], capacity["active_experts"], capacity["expert_parallel"]) == (8, 2, 8)


def test_time_to_first_token_at_batch_1_is_the_active_prefill_plus_the_all_to_all(
        mixtral: dict[str, dict[str, Any]]) -> None:
    # One 1,024-token prompt: 25,759,850,496 × 1,024 = 2.638e13 FLOPs over 8 × 989.4e12 × 0.5 = 6.665 ms, above
    # the read of every expert's weights (1,024 tokens hit all 8: 8 × (1 − 0.75^1024) = 8), 11.675e9 B at
    # 3.35e12 × 0.7 = 4.98 ms; plus 64 all-to-alls of 1,024 / 8 × 2 × 4,096 × 2 = 2,097,152 B: 0.426 ms.
    prefill_s = 2 * ACTIVE * PROMPT / (GPUS * BF16_FLOPS_S * PREFILL_EFF)
    ttft_s = prefill_s + _all_to_all_s(PROMPT)

    assert prefill_s > WEIGHT_BYTES / GPUS / (HBM_BYTES_S * DECODE_HBM_EFF)
    assert mixtral["inference-capacity"]["evidence"]["ttft_ms_batch1"] == pytest.approx(ttft_s * 1e3, rel=1e-9)
    assert ttft_s * 1e3 == pytest.approx(7.092, abs=1e-3)


def test_a_decode_step_at_batch_1_reads_the_two_active_experts_only(mixtral: dict[str, dict[str, Any]]) -> None:
    # Batch 1 touches 2 of the 8 experts per layer: the weights besides the routed experts (93.4e9 B × 3.44 %) and a
    # quarter of the routed ones (93.4e9 B × 96.56 %), 25.757e9 B, 3.220e9 B per GPU; with the KV cache of
    # 1,024 + 128 tokens × 16,384 B per GPU at 3.35e12 × 0.7: 1.3812 ms (memory-bound: the compute is
    # 2 × 12,879,925,248 / (8 × 989.4e12 × 0.5) = 6.5 µs), plus 64 all-to-alls of 2,048 B: 0.42 µs.
    touched = WEIGHT_BYTES - ROUTED_BYTES + ROUTED_BYTES * TOP_K / EXPERTS
    kv = (PROMPT + OUTPUT // 2) * KV_BYTES_PER_TOKEN_PER_GPU
    tpot_s = (touched / GPUS + kv) / (HBM_BYTES_S * DECODE_HBM_EFF) + _all_to_all_s(1)
    capacity = mixtral["inference-capacity"]["evidence"]

    assert touched == pytest.approx(25.757e9, rel=1e-4)
    assert capacity["tpot_ms_batch1"] == pytest.approx(tpot_s * 1e3, rel=1e-9)
    assert tpot_s * 1e3 == pytest.approx(1.3815, abs=1e-4)
    # The floor: the 3.220e9 B each GPU touches at the full 3.35 TB/s, 0.961 ms (a dense 46.7B: 3.49 ms).
    assert capacity["decode_floor_ms_batch1"] == pytest.approx(touched / GPUS / HBM_BYTES_S * 1e3)


def test_at_the_planned_batch_the_tokens_touch_every_expert(mixtral: dict[str, dict[str, Any]]) -> None:
    capacity = mixtral["inference-capacity"]["evidence"]
    batch = capacity["batch"]

    # E·(1 − (1 − k/E)^B) under uniform routing: at the planned batch (141, limited by the 1 s TTFT) 8 × (1 − 0.75^141),
    # 8 to 17 digits, so each GPU reads its whole 11.675e9 B shard per step.
    assert batch == capacity["experts_batch"] == 141
    assert capacity["experts_hit_per_layer"] == pytest.approx(EXPERTS * (1 - (1 - TOP_K / EXPERTS) ** batch))
    assert capacity["weights_read_gib_per_gpu"] == pytest.approx(11.675e9 / 2**30)
    assert capacity["all_to_all_ms_per_step"] == pytest.approx(_all_to_all_s(batch) * 1e3)
    assert mixtral["inference-capacity"]["status"] == "warn"  # one replica of 8 on 8 GPUs: no spare


def test_without_expert_parallelism_there_is_no_all_to_all() -> None:
    submission = copy.deepcopy(SUBMISSION)
    del submission["workload"]["inference"]["parallelism"]
    capacity = _checks(submission)["inference-capacity"]["evidence"]

    assert capacity["expert_parallel"] == 1 and capacity["all_to_all_ms_per_step"] == 0
    touched = WEIGHT_BYTES - ROUTED_BYTES + ROUTED_BYTES * TOP_K / EXPERTS
    kv = (PROMPT + OUTPUT // 2) * KV_BYTES_PER_TOKEN_PER_GPU
    assert capacity["tpot_ms_batch1"] == pytest.approx((touched / GPUS + kv) / (HBM_BYTES_S * DECODE_HBM_EFF) * 1e3)


def test_expert_tensor_parallelism_in_serving_is_refused_by_name() -> None:
    submission = copy.deepcopy(SUBMISSION)
    submission["workload"]["inference"]["parallelism"] = {"expert": 4, "expert_tensor": 2}
    capacity = _checks(submission)["inference-capacity"]

    assert capacity["status"] == "insufficient-data" and capacity["message"].endswith(EXPERTS_NOT_MODELLED)


@pytest.mark.parametrize(("expert", "tensor_parallel", "words"), [
    (3, 8, "expert parallelism 3 must divide the 8 experts of each layer and the replica's tensor_parallel 8"),
    (8, 4, "expert parallelism 8 must divide the 8 experts of each layer and the replica's tensor_parallel 4"),
])
def test_an_expert_split_the_replica_cannot_hold_is_refused(expert: int, tensor_parallel: int, words: str) -> None:
    submission = copy.deepcopy(SUBMISSION)
    submission["workload"]["inference"].update(parallelism={"expert": expert}, tensor_parallel=tensor_parallel)
    capacity = _checks(submission)["inference-capacity"]

    assert capacity["status"] == "insufficient-data" and words in capacity["message"]

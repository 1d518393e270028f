"""Mixture-of-experts jobs: what the step-time model decides, what waits for a measurement (expert tensor parallelism,
not modelled), and the FLOPs a stated MFU stands for.

Mixtral 8x7B by name (46.7B parameters, 12,879,925,248 active per token: tests/test_models_by_name.py) replaces the
model of the 16 × DGX H100 fine-tuning example (128 GPUs, sequence 8192, FSDP full shard, MFU 0.38 stated).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rules.checks.facts.step_model import EXPERTS_NOT_MODELLED
from rules.evaluate import evaluate
from tests.checks.fixture_support import load_fixture

ROOT = Path(__file__).resolve().parents[2]
TRAINING = json.loads((ROOT / "examples" / "dgx-h100-70b-finetune.json").read_text())
SERVING = json.loads((ROOT / "examples" / "l40s-8b-serving.json").read_text())
MIXTRAL_ACTIVE, LAYERS, SEQUENCE, HIDDEN = 12_879_925_248, 32, 8192, 4096
H100_BF16_TFLOPS = 989.4  # the catalogue's dense bf16 peak of H100-SXM5-80GB


def mixtral(throughput: dict[str, Any] | None) -> dict[str, Any]:
    submission = copy.deepcopy(TRAINING)
    training = submission["workload"]["training"]
    training["model"] = {"name": "Mixtral-8x7B"}
    if throughput is None:
        del training["throughput"]
    else:
        training["throughput"] = throughput
    return submission


def check(submission: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in evaluate(submission)["checks"] if c["id"] == check_id)


def expert_tensor(submission: dict[str, Any], degree: int) -> dict[str, Any]:
    submission["workload"]["training"]["parallelism"].update({"expert": 8, "expert_tensor": degree})
    return submission


def test_without_a_stated_rate_time_to_result_is_decided_by_the_modelled_step() -> None:
    result = check(mixtral(None), "time-to-result")

    assert result["status"] in ("pass", "warn", "fail")
    assert result["evidence"]["modelled_step_s"] > 0


def test_without_a_stated_rate_expert_tensor_parallelism_waits_for_a_measured_one() -> None:
    result = check(expert_tensor(mixtral(None), 2), "time-to-result")

    assert result["status"] == "insufficient-data"
    assert result["message"] == f"needs /workload/training/throughput: {EXPERTS_NOT_MODELLED}"
    assert "does not model expert tensor parallelism (parallelism.expert_tensor > 1)" in result["message"]


def test_interconnect_scaling_waits_for_measured_scaling_even_beside_a_stated_rate() -> None:
    result = check(expert_tensor(mixtral({"tokens_per_s_per_gpu": 3000, "measured_at_gpus": 128}), 2),
                   "interconnect-scaling")

    assert result["status"] == "insufficient-data"
    assert result["evidence"]["missing"] == ["/measurements/scaling"]
    assert result["message"].endswith(EXPERTS_NOT_MODELLED)


def test_measured_scaling_decides_interconnect_scaling_of_a_mixture_of_experts() -> None:
    # 3000 tokens/s per GPU on 64 GPUs and 2850 on 128: efficiency 2850 / 3000 = 95 % (measured).
    submission = mixtral({"tokens_per_s_per_gpu": 2850, "measured_at_gpus": 128})
    submission["measurements"] = {"scaling": [{"gpus": 64, "tokens_per_s": 64 * 3000},
                                              {"gpus": 128, "tokens_per_s": 128 * 2850}]}
    result = check(submission, "interconnect-scaling")

    assert (result["status"], result["basis"]) == ("pass", "measured")
    assert result["evidence"]["efficiency"] == pytest.approx(0.95)


def test_a_rate_measured_at_the_quoted_scale_times_the_run() -> None:
    result = check(mixtral({"tokens_per_s_per_gpu": 3000, "measured_at_gpus": 128}), "time-to-result")

    assert result["status"] in ("pass", "warn") and result["evidence"]["efficiency"] == 1.0
    # 20e9 tokens (10e9 × 2 epochs) at 3000 tokens/s on each of 128 GPUs: 0.603 days without failures.
    assert result["evidence"]["compute_days"] == pytest.approx(20e9 / (3000 * 128) / 86400)


def test_a_stated_mfu_counts_the_active_parameters_flops() -> None:
    # PaLM App. B: model FLOPs per token 6·N_active + 12·L·s·h = 6 × 12,879,925,248 + 12 × 32 × 8192 × 4096; tokens/s
    # per GPU = 0.38 × 989.4e12 / that. Counting all 46.7B parameters would give 3.4× fewer.
    flops = 6 * MIXTRAL_ACTIVE + 12 * LAYERS * SEQUENCE * HIDDEN
    result = check(mixtral({"mfu": 0.38, "measured_at_gpus": 128}), "time-to-result")

    assert result["evidence"]["model_flops_per_token"] == pytest.approx(flops)
    assert result["evidence"]["tokens_per_s_per_gpu"] == pytest.approx(0.38 * H100_BF16_TFLOPS * 1e12 / flops)
    assert result["evidence"]["model_flops"] == pytest.approx(20e9 * flops)


def test_memory_checks_decide_a_mixture_of_experts_without_a_rate() -> None:
    record = evaluate(mixtral(None))
    statuses = {c["id"]: c["status"] for c in record["checks"]}

    assert statuses["peak-memory"] == "pass" and statuses["sharding"] == "pass"


def test_serving_a_mixture_of_experts_sizes_every_experts_weights_and_its_active_compute() -> None:
    # Qwen3-30B-A3B by name: its 30.5e9 parameters at 2 B (bf16) on one L40S, 56.8 GiB: more than the GPU holds, so
    # no batch can be served; its compute per token is 2 × its 3,353,020,416 active parameters (Qwen3 Technical
    # Report, arXiv 2505.09388, Table 2: 3.3B activated).
    submission = copy.deepcopy(SERVING)
    submission["workload"]["inference"]["model"] = {"name": "Qwen/Qwen3-30B-A3B"}
    record = evaluate(submission)
    memory = next(c for c in record["checks"] if c["id"] == "inference-memory")
    capacity = next(c for c in record["checks"] if c["id"] == "inference-capacity")

    assert memory["evidence"]["weights_gib"] == pytest.approx(30.5e9 * 2 / 2**30)
    assert memory["status"] == "fail"
    assert capacity["status"] == "fail" and capacity["evidence"]["batch"] == 0
    assert capacity["evidence"]["flops_per_token"] == 2 * 3_353_020_416
    assert capacity["evidence"]["active_parameters"] == pytest.approx(3.3e9, rel=0.02)


PEAK_MEMORY = ROOT / "tests" / "checks" / "peak_memory"


def test_the_mixtral_fixtures_model_state_is_its_expert_grid_by_hand() -> None:
    # Mixtral 8x7B by name (46.7e9 stated; routed experts 45,097,156,608) at TP 1 PP 4 EP 8 on 64 GPUs under ZeRO-1,
    # 16 B/param (ZeRO §3.1): the 1,602,843,392 others on the first stage are × 1,867,780,096 / 1,605,636,096 (its
    # Megatron share, tests/estimates/test_experts.py) / 4 stages, at 2 + 2 + 12/16 B (DP 16); the routed experts
    # / (8 × 4) at 2 + 2 + 12/2 B (EDP 64 / 32 = 2).
    others = (46.7e9 - 45_097_156_608) * 1_867_780_096 / 1_605_636_096 / 4
    expected = others * (4 + 12 / 16) + 45_097_156_608 / 32 * (4 + 12 / 2)
    fixture = load_fixture(PEAK_MEMORY / "pass_dgx_h100_mixtral_8x7b_by_name_tp1_pp4_ep8_64_gpus.json")
    assert check(fixture, "peak-memory")["evidence"]["model_state_gb_per_gpu"] == pytest.approx(expected / 1e9)
    # Without expert parallelism each of the 4 stages holds a quarter of the routed experts, sharded over EDP 16.
    fixture = load_fixture(PEAK_MEMORY / "fail_dgx_h100_mixtral_8x7b_by_name_tp1_pp4_without_expert_parallelism.json")
    assert check(fixture, "peak-memory")["evidence"]["model_state_gb_per_gpu"] == pytest.approx(
        (others + 45_097_156_608 / 4) * (4 + 12 / 16) / 1e9)


def test_the_qwen3_235b_fixtures_model_state_is_its_expert_grid_by_hand() -> None:
    # Qwen3-235B-A22B by name (235e9 stated; routed 94 × 128 × 3 × 4096 × 1536 = 227,096,395,776) at TP 2 PP 8 EP 8 on
    # 128 GPUs, ZeRO-1. Megatron's first stage of 8 besides the routed experts: attention 2 × 4096 × 8192 × (1 + 4/64)
    # × 94 / 8 = 837,812,224 + embedding 622,329,856 + norms and routers (770,048 + 49,283,072 + 4096) / 8 =
    # 6,257,152, of 7,997,214,720: × 8 / 7,997,214,720 = 1.46691. Others (235e9 − routed) × that / (2 × 8) at 2 + 2 +
    # 12/8 B (DP 8); routed / (8 × 8) at 2 + 2 + 12/2 B (EDP 128 / 64 = 2).
    others = (235e9 - 227_096_395_776) * 1_466_399_232 * 8 / 7_997_214_720 / 16
    expected = others * (4 + 12 / 8) + 227_096_395_776 / 64 * (4 + 12 / 2)
    fixture = load_fixture(PEAK_MEMORY / "pass_dgx_h100_qwen3_235b_a22b_by_name_tp2_pp8_ep8_full_recompute.json")
    result = check(fixture, "peak-memory")
    assert result["evidence"]["model_state_gb_per_gpu"] == pytest.approx(expected / 1e9)
    assert result["status"] == "pass"


@pytest.mark.parametrize(("fixture", "total", "active"), [
    ("peak_memory/pass_dgx_h100_mixtral_8x7b_by_name_tp1_pp4_ep8_64_gpus.json", 46.7e9, 12.9e9),
    ("peak_memory/pass_dgx_h100_qwen3_235b_a22b_by_name_tp2_pp8_ep8_full_recompute.json", 235e9, 22e9),
], ids=["Mixtral-8x7B", "Qwen3-235B-A22B"])
def test_mixtral_and_qwen3_235b_by_name_are_counted_sized_timed_and_served(fixture: str, total: float, active: float):
    # Given the model by name on its quote, with a dataset to train and the same model served there too
    submission = load_fixture(ROOT / "tests" / "checks" / fixture)
    training = submission["workload"]["training"]
    training["dataset_tokens"] = 50e9
    submission["workload"]["inference"] = {
        "model": {"name": training["model"]["name"]}, "weight_precision": "bf16", "tensor_parallel": 8,
        "context_tokens": 4096, "prompt_tokens": 1024, "output_tokens": 256, "rps": 1,
        "slo": {"ttft_ms_p95": 2000, "tpot_ms_p95": 100}}
    record = evaluate(submission)
    statuses = {c["id"]: c["status"] for c in record["checks"]}
    # Then the counts are the published ones (within 1 %), and memory, schedule and serving memory are decided
    counts = next(c for c in record["checks"] if c["id"] == "training-objective")["evidence"]
    assert counts["parameters"] == pytest.approx(total, rel=0.01)
    assert counts["active_parameters"] == pytest.approx(active, rel=0.01)
    undecided = {"insufficient-data", "not-applicable"}
    assert {check: statuses[check] for check in ("peak-memory", "time-to-result", "inference-memory")
            if statuses[check] in undecided} == {}

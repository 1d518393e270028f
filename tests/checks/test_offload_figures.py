"""peak-memory and host-ram size offloaded model state from one estimate, in every model-state convention."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from fixture_support import load_fixture

from rules.evaluate import evaluate
from rules.policy import default_policy, parse_policy

HERE = Path(__file__).parent
ZERO2_OFFLOAD = HERE / "host_ram" / "pass_dgx_h100_llama2_7b_zero2_optimizer_offload_gradients_on_the_host.json"
ZERO3_OFFLOAD = HERE / "host_ram" / "fail_hgx_h100_1tb_llama3_70b_zero3_offload.json"
LLAMA2_7B = 6_738_415_616
GIB = 2**30


def _checks(submission: dict, convention: str = "zero-paper") -> dict[str, dict]:
    document = copy.deepcopy(default_policy().document)
    document["conventions"]["model_state_bytes"] = convention
    policy = parse_policy(json.dumps(document).encode(), origin="test")
    return {check["id"]: check for check in evaluate(submission, policy)["checks"]}


@pytest.mark.parametrize("fixture", [ZERO2_OFFLOAD, ZERO3_OFFLOAD], ids=["zero2-optimizer", "zero3-parameters"])
def test_host_ram_holds_what_peak_memory_offloads_from_each_gpu(fixture: Path) -> None:
    checks = _checks(load_fixture(fixture))

    offloaded_per_rank_gib = checks["peak-memory"]["evidence"]["host_offload_gib"]
    host = checks["host-ram"]["evidence"]
    assert host["offload_state_gib"] == pytest.approx(offloaded_per_rank_gib * host["gpus_on_node"], rel=1e-12)
    assert host["offload_gib"] == pytest.approx(1.5 * host["offload_state_gib"], rel=1e-12)


def test_zero2_offload_under_the_deepspeed_convention_gives_deepspeeds_per_gpu_and_per_cpu_figures() -> None:
    # Given Llama-2-7B under ZeRO-2 with the optimizer offloaded on one node of 8 GPUs, DeepSpeed's convention,
    checks = _checks(load_fixture(ZERO2_OFFLOAD), convention="deepspeed")

    # then stage_1_and_2.py estimate_zero2_model_states_mem_needs(6,738,415,616, 8, 1, cpu_offload=True):
    # per GPU 2Ψ = 13,476,831,232 B; per CPU Ψ × max(4 × 8, 16) × 1.5 = 323,443,949,568 B.
    gpu = checks["peak-memory"]["evidence"]
    assert (gpu["weights_gib"] + gpu["gradients_gib"] + gpu["optimizer_gib"]) * GIB == pytest.approx(13_476_831_232)
    host = checks["host-ram"]["evidence"]
    assert host["offload_gib"] * GIB == pytest.approx(323_443_949_568)
    assert "estimate_zero2_model_states_mem_needs" in checks["host-ram"]["message"]


def test_zero3_without_offload_under_the_deepspeed_convention_counts_deepspeeds_start_up_host_memory() -> None:
    # Given the same job under ZeRO-3 with nothing offloaded (zero.Init, DeepSpeed's default),
    submission = load_fixture(ZERO2_OFFLOAD)
    submission["workload"]["training"]["parallelism"].update(sharding="zero3", offload="none")

    checks = _checks(submission, convention="deepspeed")

    # then stage3.py estimate_zero3_model_states_mem_needs(Ψ, 131,072,000, 8, 1, False, False, True): per GPU
    # 4 × 131,072,000 + 18Ψ/8 = 15,685,723,136 B; per CPU 131,072,000 × 4 × 8 × 1.5 = 6,291,456,000 B.
    gpu = checks["peak-memory"]["evidence"]
    state_gib = gpu["weights_gib"] + gpu["gradients_gib"] + gpu["optimizer_gib"] + gpu["gathered_parameters_gib"]
    assert state_gib * GIB == pytest.approx(15_685_723_136)
    assert checks["host-ram"]["evidence"]["offload_gib"] * GIB == pytest.approx(6_291_456_000)
    # The zero-paper convention counts no host state when nothing is offloaded.
    assert _checks(submission)["host-ram"]["evidence"]["offload_gib"] == 0

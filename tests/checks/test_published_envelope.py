"""time-to-result holds a modelled rate against the highest published MFU of its size class, GPU and precision.

The job is the beyond-published-envelope fixture: Llama-3-8B at 8,192 tokens, ZeRO-1 without recompute, on 4 ×
DGX-H200, modelled at 54.5 % MFU (51.7 % as Megatron-LM counts FLOPs) against the 47 % Megatron-LM's 7.1B reached
on H100 (docs/mfu-envelope-sources.md §2).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rules.evaluate import evaluate
from rules.policy import default_policy, parse_policy
from tests.checks.fixture_support import load_fixture

BEYOND = Path(__file__).parent / "time_to_result" / (
    "warn_4x_dgx_h200_llama3_8b_zero1_no_recompute_beyond_published_envelope.json")
ENVELOPE_NUMBERS = ("published_envelope_mfu", "published_envelope_tflops_per_gpu",
                    "modelled_mfu_in_envelope_convention", "mfu_beyond_published_envelope",
                    "days_at_published_envelope")


def _time_to_result(submission: dict[str, Any], policy=None) -> dict[str, Any]:
    return next(c for c in evaluate(submission, policy)["checks"] if c["id"] == "time-to-result")


def _job(**training: Any) -> dict[str, Any]:
    submission = copy.deepcopy(load_fixture(BEYOND))
    submission["workload"]["training"].update(training)
    return submission


def test_the_envelope_row_its_source_and_the_days_at_it_are_in_the_evidence() -> None:
    result = _time_to_result(_job())
    evidence = result["evidence"]

    assert result["rule"] == "beyond-published-envelope"
    assert evidence["published_envelope"]["convention"] == evidence["published_envelope_convention"] == "A"
    assert "github.com/NVIDIA/Megatron-LM/blob/f2e5db40" in evidence["published_envelope_source"]
    assert "96 × H100 SXM5" in evidence["published_envelope_run"]
    # The run's days scale as the modelled rate over the published one: 51.7 % / 47 %
    assert evidence["days_at_published_envelope"] / evidence["days"] == pytest.approx(
        evidence["modelled_mfu_in_envelope_convention"] / evidence["published_envelope_mfu"])
    assert "18.0 days at 47.0% MFU" in result["remediation"]


def test_no_published_row_for_b200_bf16_gives_no_envelope_and_says_why() -> None:
    # docs/mfu-envelope-sources.md §2: "< 10B | H200 / B200 / GB200 | — | none published" (bf16)
    submission = _job()
    submission["quote"]["node_groups"][0]["server_model"] = "DGX-B200"
    result = _time_to_result(submission)
    evidence = result["evidence"]

    assert result["rule"] != "beyond-published-envelope"
    assert evidence["published_envelope"] is None
    assert "no published, measured bf16 training MFU for the under-10b size class on blackwell GPUs" in evidence[
        "published_envelope_reason"]
    assert all(evidence[name] is None for name in ENVELOPE_NUMBERS)


def test_a_stated_rate_is_not_held_against_the_envelope() -> None:
    result = _time_to_result(_job(throughput={"tokens_per_s_per_gpu": 8834}))

    assert result["rule"] != "beyond-published-envelope"
    assert result["evidence"]["published_envelope"] is None
    assert "stated (tokens_per_s_per_gpu), not modelled" in result["evidence"]["published_envelope_reason"]


def test_an_adapter_fine_tune_is_not_held_against_full_training_runs() -> None:
    submission = _job(objective="adapter")
    submission["workload"]["training"]["model"]["trainable_parameters"] = 40_000_000
    result = _time_to_result(submission)

    assert result["rule"] != "beyond-published-envelope"
    assert "adapter fine-tune" in result["evidence"]["published_envelope_reason"]


def test_the_policy_tolerance_lets_a_rate_within_it_pass() -> None:
    # Given a policy that tolerates 5 MFU points above the envelope (the job is 4.7 above it)
    document = copy.deepcopy(default_policy().document)
    document["time_to_result"]["envelope_tolerance"] = 0.05
    tolerant = parse_policy(json.dumps(document).encode(), origin="test")

    result = _time_to_result(_job(), tolerant)

    assert result["status"] == "pass"
    assert result["thresholds"]["envelope_tolerance"] == 0.05
    assert 0.04 < result["evidence"]["mfu_beyond_published_envelope"] < 0.05

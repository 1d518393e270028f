"""The policy's activation convention: the record names it, and peak-memory counts and names it."""

from __future__ import annotations

import copy
import json

import pytest

from rules.evaluate import evaluate
from rules.policy import default_policy, parse_policy
from tests.checks.fixture_support import load_base

GIB = 2**30


def _peak_memory(record: dict) -> dict:
    return next(c for c in record["checks"] if c["id"] == "peak-memory")


def test_default_policy_counts_physical_activations_and_the_record_says_so() -> None:
    record = evaluate(load_base("8x-dgx-h100-7_5b-zero3-pretraining"))
    assert record["policy"]["conventions"] == {"model_state_bytes": "zero-paper", "activations": "physical"}
    peak = _peak_memory(record)
    assert peak["evidence"]["activation_convention"] == "physical"
    assert "activations under the physical convention at 2 B per element" in peak["message"]


def test_megatron_policy_sizes_activations_by_megatron_lm_formula() -> None:
    # Given the 7.5B base (32 layers, h = 4096, ffn 11,008, V = 32,000; s = 4096, b = 1, t = 1, p = 1,
    # selective recompute) under a policy choosing conventions.activations = megatron,
    document = copy.deepcopy(default_policy().document)
    document["conventions"]["activations"] = "megatron"
    policy = parse_policy(json.dumps(document).encode(), "megatron-activations")

    record = evaluate(load_base("8x-dgx-h100-7_5b-zero3-pretraining"), policy)

    # then Megatron-LM theoretical_memory_usage.py's compute_activation_memory_without_sp (t = 1) sizes them:
    # sbh(10 + 24) × 32 + 8sb + sbh + 2(sbV + sbh) = 18,566,119,424 B, × 1.05 = 19,494,425,395.2 B,
    peak = _peak_memory(record)
    assert peak["evidence"]["activations_gib"] == pytest.approx(19_494_425_395.2 / GIB, rel=1e-12)
    # and the record and the message name the convention.
    assert record["policy"]["conventions"]["activations"] == "megatron"
    assert peak["evidence"]["activation_convention"] == "megatron"
    assert "activations under the megatron convention" in peak["message"]

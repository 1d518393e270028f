"""The checks keep their promises: stable ids from DESIGN.md, one module per id, thresholds named
from the policy, and no magic numbers inside rule conditions."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from durable import lang

from rules.checks import CHECKS
from rules.policy import default_policy
from rules.status import Status

# DESIGN.md, "The acceptance checks (stable ids)": other systems read these names.
DESIGN_IDS = ("training-objective", "peak-memory", "sharding", "gradient-accumulation", "interconnect-scaling",
              "data-feed", "checkpoint-bandwidth", "host-ram", "gpu-nic-topology", "restart-behavior", "rack-power",
              "time-to-result", "inference-memory", "inference-capacity")
# Structural constants a condition may use: a count of zero, and 1 as 100 % of a limit.
STRUCTURAL = {0, 1}


def test_the_checks_are_exactly_the_design_ids_in_plan_order() -> None:
    assert tuple(check.id for check in CHECKS) == DESIGN_IDS


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_each_check_lives_in_the_module_named_after_its_id(check: Any) -> None:
    module = importlib.import_module(f"rules.checks.{check.id.replace('-', '_')}")

    assert getattr(module, check.__name__) is check
    assert check.title and check.plan_item and check.rules


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_thresholds_resolve_in_the_default_policy(check: Any) -> None:
    policy = default_policy()

    for name, path in check.thresholds.items():
        assert isinstance(policy.value(path), int | float | str), (name, path)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_rule_conditions_hold_no_magic_numbers(check: Any) -> None:
    for name, condition in _conditions(check):
        literals = _numbers(condition(lang.m).define())
        assert set(literals) <= STRUCTURAL, f"{check.id}/{name} compares with literals {literals}"


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_rules_have_unique_names_words_and_a_remedy_and_never_waive(check: Any) -> None:
    exemptions = [rule.unless for rule in check.rules if rule.unless]
    names = [check.passing.name, *(rule.name for rule in check.rules), *(e.name for e in exemptions)]

    assert len(names) == len(set(names))
    assert check.passing.message and all(outcome.message for outcome in (*check.rules, *exemptions))
    assert all(rule.remediation for rule in check.rules)
    assert {rule.status for rule in check.rules} <= {Status.FAIL, Status.WARN}
    assert Status.FAIL in {rule.status for rule in check.rules}
    assert all(check.outcome(name).name == name for name in names)


def _conditions(check: Any) -> list[tuple[str, Any]]:
    """Returns (name, condition) of every rule of ``check`` and of every rule's exemption."""
    return [(rule.name, rule.when) for rule in check.rules] + [
        (rule.unless.name, rule.unless.when) for rule in check.rules if rule.unless]


def _numbers(node: Any) -> list[float]:
    if isinstance(node, dict):
        return [n for value in node.values() for n in _numbers(value)]
    if isinstance(node, list):
        return [n for value in node for n in _numbers(value)]
    if isinstance(node, int | float) and not isinstance(node, bool):
        return [node]
    return []

"""Every rule of a check states its own condition: no comparison appears in two rules of one check.

The rules of a check are independent findings (conftest's deny and warn): the engine lets the most severe
one decide, so no rule needs to restate another's condition, or its negation, to stay out of its way. A
comparison is identified by the two things it compares, in either order: ``m.a > m.b``, its negation
``m.a <= m.b`` and its mirror ``m.b < m.a`` are one comparison, and so are ``m.n > 0`` and ``m.n == 0``.
The comparisons are read by evaluating each condition over a probe fact (rules.checks.base.comparisons),
checked here against the condition durable_rules itself builds from the same lambda.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from durable import lang

from rules.checks import CHECKS
from rules.checks.base import Comparison, Fact, comparisons, facts_named

Condition = Callable[[Any], Any]


def comparison_key(comparison: Comparison) -> tuple[str, str]:
    """Returns what a comparison compares, in a fixed order: the same for its negation and its mirror."""
    left, right = (repr(side) for side in (comparison.left, comparison.right))
    return (left, right) if left <= right else (right, left)


def repeated_comparisons(conditions: dict[str, Condition]) -> dict[tuple[str, str], list[str]]:
    """Returns each comparison that appears in more than one of ``conditions`` (name → condition), with their names."""
    named: dict[tuple[str, str], list[str]] = defaultdict(list)
    for name, condition in conditions.items():
        for key in dict.fromkeys(comparison_key(c) for c in comparisons(condition)):
            named[key].append(name)
    return {key: names for key, names in named.items() if len(names) > 1}


def conditions_of(check: Any) -> dict[str, Condition]:
    """Returns name → condition of each rule of ``check`` and of each rule's exemption."""
    conditions = {rule.name: rule.when for rule in check.rules}
    conditions.update({rule.unless.name: rule.unless.when for rule in check.rules if rule.unless})
    return conditions


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_no_comparison_appears_in_two_rules_of_a_check(check: Any) -> None:
    repeated = repeated_comparisons(conditions_of(check))

    assert not repeated, "\n".join(f"{check.id}: {' vs '.join(key)} in {', '.join(names)}"
                                   for key, names in repeated.items())


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_the_probe_fact_sees_the_facts_durable_rules_compares(check: Any) -> None:
    for name, condition in conditions_of(check).items():
        assert facts_named(condition) == _durable_names(condition(lang.m).define()), f"{check.id}/{name}"


# The rules of rack-power as they were written when the engine required exactly one rule to match: each
# restates the negation of the rules before it, and the pass rule spells out "none of the above".
EXACTLY_ONE_RULE_RACK_POWER: dict[str, Condition] = {
    "nodes-not-placed": lambda m: m.unplaced_nodes != 0,
    "redundancy-unmet": lambda m: (m.unplaced_nodes == 0) & (m.redundancy_unmet > 0),
    "over-limit": lambda m: (m.unplaced_nodes == 0) & (m.redundancy_unmet == 0) & (m.worst_utilisation > 1),
    "near-limit": lambda m: ((m.unplaced_nodes == 0) & (m.redundancy_unmet == 0) & (m.worst_utilisation <= 1)
                             & (m.worst_utilisation > m.warn_fraction)),
    "within-limits": lambda m: ((m.unplaced_nodes == 0) & (m.redundancy_unmet == 0)
                                & (m.worst_utilisation <= m.warn_fraction)),
}


def test_the_inspector_finds_the_restated_negations_of_exactly_one_rule_conditions() -> None:
    repeated = repeated_comparisons(EXACTLY_ONE_RULE_RACK_POWER)

    assert repeated == {
        comparison_key(Comparison(Fact("unplaced_nodes"), "==", 0)): list(EXACTLY_ONE_RULE_RACK_POWER),
        comparison_key(Comparison(Fact("redundancy_unmet"), "==", 0)):
            ["redundancy-unmet", "over-limit", "near-limit", "within-limits"],
        comparison_key(Comparison(Fact("worst_utilisation"), ">", 1)): ["over-limit", "near-limit"],
        comparison_key(Comparison(Fact("worst_utilisation"), ">", Fact("warn_fraction"))):
            ["near-limit", "within-limits"],
    }


def test_a_negated_or_mirrored_comparison_is_the_same_comparison() -> None:
    assert repeated_comparisons({"over": lambda m: m.a > m.b, "not-over": lambda m: m.a <= m.b})
    assert repeated_comparisons({"over": lambda m: m.a > m.b, "mirrored": lambda m: m.b < m.a})
    assert repeated_comparisons({"any": lambda m: m.n > 0, "none": lambda m: m.n == 0})
    assert not repeated_comparisons({"over": lambda m: m.a > m.b, "far-over": lambda m: m.a > m.c})


def test_a_comparison_repeated_inside_one_rule_is_not_a_repetition_between_rules() -> None:
    assert not repeated_comparisons({"either": lambda m: (m.a > m.b) | ((m.a <= m.b) & (m.c > m.d))})


@pytest.mark.parametrize("condition", [
    lambda m: m.a + 1 > m.b,  # arithmetic: the figure belongs in the evidence, from an estimator
    lambda m: (m.a > m.b) and (m.c > m.d),  # Python's and would hide its left side from durable_rules
    lambda m: m.a,  # a bare fact is not a comparison
    lambda m: m.rack.count > m.b,  # nested facts are not posted
], ids=["arithmetic", "python-and", "bare-fact", "nested"])
def test_the_inspector_refuses_what_it_cannot_see(condition: Condition) -> None:
    with pytest.raises(TypeError):
        comparisons(condition)


def _durable_names(node: Any) -> frozenset[str]:
    """Returns the fact names in a durable_rules condition definition ({"$gt": {"a": {"$m": "b"}}} → {a, b})."""
    if isinstance(node, list):
        return frozenset().union(*(_durable_names(item) for item in node))
    if not isinstance(node, dict):
        return frozenset()
    names: set[str] = set()
    for key, value in node.items():
        if key == "$m":
            names.add(value)
        elif key.startswith("$"):
            names |= _durable_names(value)
        else:
            names.add(key)
            names |= _durable_names(value)
    return frozenset(names)

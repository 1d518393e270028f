"""Comparing configurations without the service: RFC 7396 merge patches, variant problems, the comparison rows."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rules.advice.compare import comparison_key, gpus_quoted, merge_patch, variant_documents
from rules.errors import InvalidSubmission
from rules.evaluate import evaluate
from workers.tasks import compare_configurations

EXAMPLE = Path(__file__).parents[1] / "examples" / "dgx-h100-70b-finetune.json"


@pytest.mark.parametrize(("target", "patch", "result"), [
    # RFC 7396, Appendix A (Example Test Cases), every row.
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_merge_patch_matches_rfc_7396_appendix_a(target: Any, patch: Any, result: Any) -> None:
    before = copy.deepcopy(target)
    assert merge_patch(target, patch) == result
    assert target == before  # the target is not changed in place


def test_a_variant_problem_names_the_variant_and_where_the_value_came_from() -> None:
    submission = json.loads(EXAMPLE.read_text())
    variants = [{"name": "no nodes", "patch": {"quote": {"node_groups": [{"name": "gpu", "count": 0}]}}},
                {"name": "no vendor", "patch": {"quote": {"vendor": None}}}]

    with pytest.raises(InvalidSubmission) as raised:
        variant_documents(submission, variants)

    problems = {p.pointer: p.message for p in raised.value.problems}
    assert "/variants/0/patch/quote/node_groups/0/count" in problems
    assert problems["/variants/0/patch/quote/node_groups/0/count"].startswith(
        "variant 'no nodes', at /quote/node_groups/0/count of the patched submission:")
    assert problems["/variants/1/patch/quote/vendor"].startswith("variant 'no vendor', at /quote/vendor")


def test_a_problem_the_patch_did_not_cause_points_into_the_submission() -> None:
    submission = json.loads(EXAMPLE.read_text())
    submission["quote"]["node_groups"][0]["count"] = 0

    with pytest.raises(InvalidSubmission) as raised:
        variant_documents(submission, [{"name": "as quoted", "patch": {"quote": {"currency": "USD"}}}])

    assert [p.pointer for p in raised.value.problems] == ["/submission/quote/node_groups/0/count"]


def test_gpus_quoted_counts_catalogue_filled_gpus_per_node() -> None:
    submission = json.loads(EXAMPLE.read_text())
    del submission["quote"]["node_groups"][0]["gpu"]["count"]  # DGX-H100: 8 per node, from the catalogue

    assert gpus_quoted(submission) == 16 * 8


def test_the_plain_function_compares_without_celery() -> None:
    submission = json.loads(EXAMPLE.read_text())
    variants = [{"name": "as quoted", "patch": {}},
                {"name": "zero3", "patch": {"workload": {"training": {"parallelism": {"sharding": "zero3"}}}}}]
    calls: list[tuple[int, int]] = []

    comparison = compare_configurations(json.dumps(submission), variants,
                                        on_progress=lambda done, total: calls.append((done, total)))

    assert calls == [(1, 2), (2, 2)]
    assert [row["name"] for row in comparison["variants"]] == ["as quoted", "zero3"]
    direct = evaluate(merge_patch(submission, variants[1]["patch"]))
    assert comparison["variants"][1]["verdict"] == direct["verdict"]
    assert comparison["key"] == comparison_key(submission, variants, comparison["engine_version"],
                                               comparison["policy"]["digest"])

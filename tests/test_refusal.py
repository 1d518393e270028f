"""Refusing a submission costs little: count limits before deep validation, a bounded list of problems, and each
document validated once wherever it enters (the command line, a comparison)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import schemas
from rules.advice.compare import compare
from rules.errors import InvalidSubmission
from rules.evaluate import parse_submission, validate_submission
from schemas.json_reader import MAX_LISTED_PROBLEMS
from service.cli import main

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dgx-h100-70b-finetune.json"


def _example() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text())


def _node_groups(count: int) -> dict[str, Any]:
    document = _example()
    group = document["quote"]["node_groups"][0]
    document["quote"]["node_groups"] = [{**copy.deepcopy(group), "name": f"g{i}"} for i in range(count)]
    return document


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Returns the list of documents schemas.validate is called with for the submission schema, as it fills."""
    seen: list[Any] = []
    real = schemas.validate

    def counting(name: str, document: Any, **options: Any) -> Any:
        if name == "submission":
            seen.append(document)
        return real(name, document, **options)

    monkeypatch.setattr(schemas, "validate", counting)
    return seen


def test_1024_node_groups_are_refused_for_the_count_alone_in_the_words_of_the_full_validation(validations):
    document = _node_groups(1024)
    full = schemas.validate("submission", document)
    validations.clear()

    with pytest.raises(InvalidSubmission) as refused:
        parse_submission(json.dumps(document))

    assert [p.as_dict() for p in refused.value.problems] == [
        {"pointer": "/quote/node_groups", "message": "must have at most 64 items, found 1024"}]
    assert refused.value.problems[0] in full
    assert "count limits (1 problem)" in refused.value.detail
    assert validations == []  # the 1,024 groups were never validated one by one


def test_a_dict_beyond_a_count_limit_is_refused_the_same_way_in_process(validations):
    with pytest.raises(InvalidSubmission) as refused:
        validate_submission(_node_groups(65))
    assert refused.value.problems[0].pointer == "/quote/node_groups"
    assert validations == []


def test_a_refusal_lists_at_most_the_bound_and_says_that_more_were_not_listed():
    # Given a document with 300 problems (a negative quantity on each of 300 line items)
    document = _example()
    document["quote"]["line_items"] = [{"sku": f"s{i}", "quantity": -1} for i in range(300)]

    with pytest.raises(InvalidSubmission) as refused:
        validate_submission(document)

    # Then the first problems found are listed, worded and located as the full validation has them
    problems = refused.value.problems
    assert len(problems) == MAX_LISTED_PROBLEMS
    assert set(problems) <= set(schemas.validate("submission", document))
    assert f"more than {MAX_LISTED_PROBLEMS} problems; the first {MAX_LISTED_PROBLEMS} found are listed" \
        in refused.value.detail


def test_a_refusal_within_the_bound_lists_every_problem_and_counts_them():
    document = _example()
    document["quote"]["line_items"] = [{"sku": f"s{i}", "quantity": -1} for i in range(3)]
    with pytest.raises(InvalidSubmission) as refused:
        validate_submission(document)
    assert refused.value.detail.endswith("(3 problems)")
    assert [p.pointer for p in refused.value.problems] == [f"/quote/line_items/{i}/quantity" for i in range(3)]


def test_the_command_line_validates_the_file_once(validations, tmp_path):
    result = CliRunner().invoke(main, ["evaluate", str(EXAMPLE), "--no-search", "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    assert validations == [_example()]


def test_a_comparison_validates_each_variant_once(validations):
    variants = [{"name": "as quoted", "patch": {}},
                {"name": "fewer nodes", "patch": {"quote": {"node_groups": [{**_example()["quote"]["node_groups"][0],
                                                                              "count": 2}]}}}]
    result = compare(_example(), variants)
    assert [row["name"] for row in result["variants"]] == ["as quoted", "fewer nodes"]
    assert len(validations) == 2

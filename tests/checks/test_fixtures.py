"""Runs every check fixture: tests/checks/<check>/<status>_<description>.json, expectations in expected.json.

A fixture is ``{"base": "<name>", "patch": {...}}``: a whole submission from tests/checks/bases/ with an
RFC 7396 merge patch applied (objects merge, ``null`` removes a member, arrays are replaced whole); a plain
whole submission is accepted too (see fixture_support.py). Its file name starts with the status the check
must reach, and expected.json names the deciding figures (evidence key → [value, absolute tolerance]) and,
optionally, words the message must contain. Every rule a check declares is decided by at least one fixture
of that check.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from fixture_support import base_paths, check_directories, expand, fixture_paths, load_fixture, load_fixture_policy

import schemas
from rules.checks import CHECK_IDS, CHECKS
from rules.evaluate import evaluate

STATUSES = ("pass", "warn", "fail", "insufficient-data", "not-applicable")


def _cases() -> list[tuple[str, Path, dict]]:
    expectations = {d: json.loads((d / "expected.json").read_text()) for d in check_directories()}
    return [(path.parent.name.replace("_", "-"), path, expectations[path.parent].get(path.name, {}))
            for path in fixture_paths()]


CASES = _cases()


@cache
def _result(fixture: Path, check_id: str) -> dict[str, Any]:
    """Returns the result of ``check_id`` in the record of ``fixture`` under its policy (each fixture is evaluated
    once)."""
    record = evaluate(load_fixture(fixture), load_fixture_policy(fixture))
    return next(c for c in record["checks"] if c["id"] == check_id)


@pytest.mark.parametrize(("check_id", "fixture", "expected"), CASES,
                         ids=[f"{c}/{f.stem}" for c, f, _ in CASES])
def test_fixture_reaches_its_status_and_deciding_figure(check_id: str, fixture: Path, expected: dict) -> None:
    status = next(s for s in sorted(STATUSES, key=len, reverse=True) if fixture.stem.startswith(s.replace("-", "_")))
    result = _result(fixture, check_id)

    assert result["status"] == status, result["message"]
    for key, (value, tolerance) in expected.get("evidence", {}).items():
        assert result["evidence"][key] == pytest.approx(value, abs=tolerance), key
    for words in expected.get("message_contains", []):
        assert words in result["message"]
    if "basis" in expected:
        assert result["basis"] == expected["basis"]


def test_every_check_has_a_pass_and_a_fail_fixture() -> None:
    covered = {(check_id, f.stem.split("_")[0]) for check_id, f, _ in CASES}
    lacking = [c for c in CHECK_IDS for s in ("pass", "fail") if (c, s) not in covered]
    assert not lacking, f"checks without a pass or fail fixture: {lacking}"


def test_every_rule_of_every_check_is_decided_by_one_of_its_fixtures() -> None:
    # The rules are read from the check classes, so a rule added to a check needs a fixture to go with it.
    decided = {(check_id, _result(fixture, check_id)["rule"]) for check_id, fixture, _ in CASES}
    lacking = [f"{check.id}: {rule.name}" for check in CHECKS for rule in check.rules
               if (check.id, rule.name) not in decided]
    assert not lacking, "rules that no fixture of their check decides:\n" + "\n".join(lacking)


def test_every_fixture_has_expectations() -> None:
    assert all(expected for _, _, expected in CASES), [str(f) for _, f, e in CASES if not e]


def test_every_fixture_directory_is_a_check() -> None:
    assert {d.name.replace("_", "-") for d in check_directories()} <= set(CHECK_IDS)


@pytest.mark.parametrize("base", base_paths(), ids=lambda p: p.stem)
def test_every_base_is_a_valid_submission_that_a_fixture_uses(base: Path) -> None:
    document = json.loads(base.read_text())

    assert schemas.validate("submission", document) == []
    assert any(json.loads(f.read_text()).get("base") == base.stem for f in fixture_paths()), "unused base"


def test_a_fixture_is_its_base_with_the_merge_patch_applied() -> None:
    base = json.loads(base_paths()[0].read_text())
    patch = {"quote": {"quote_id": "FX-PATCHED", "node_groups": [{"name": "gpu", "count": 1}]},
             "schema_version": None}

    expanded = expand({"base": base_paths()[0].stem, "patch": patch})

    assert expanded["quote"]["quote_id"] == "FX-PATCHED"
    assert expanded["quote"]["node_groups"] == [{"name": "gpu", "count": 1}]  # an array is replaced whole
    assert "schema_version" not in expanded  # null removes the member
    assert expanded["workload"] == base["workload"]  # the rest is the base's
    assert expand(base) == base  # a whole submission is its own fixture


@pytest.mark.parametrize("fixture", [{"base": "no-such-base", "patch": {}}, {"base": "../bases/x", "patch": {}},
                                     {"base": "x", "patch": {}, "schema_version": "1"}, {"base": "x", "patch": []},
                                     {"base": "x", "patch": {}, "policy": []}],
                         ids=["unknown base", "path as base", "extra member", "patch not an object",
                              "policy not an object"])
def test_a_malformed_fixture_is_refused(fixture: dict) -> None:
    with pytest.raises(ValueError, match="fixture"):
        expand(fixture)

"""Runs every check fixture: tests/checks/<check>/<status>_<description>.json, expectations in expected.json.

A fixture is a whole submission. Its file name starts with the status the check must reach, and
expected.json names the deciding figures (evidence key → [value, absolute tolerance]) and, optionally,
words the message must contain.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rules.checks import CHECK_IDS
from rules.evaluate import evaluate

HERE = Path(__file__).parent
STATUSES = ("pass", "warn", "fail", "insufficient-data", "not-applicable")


def _cases() -> list[tuple[str, Path, dict]]:
    cases = []
    for directory in sorted(p for p in HERE.iterdir() if p.is_dir() and (p / "expected.json").exists()):
        expected = json.loads((directory / "expected.json").read_text())
        for fixture in sorted(directory.glob("*.json")):
            if fixture.name != "expected.json":
                cases.append((directory.name.replace("_", "-"), fixture, expected.get(fixture.name, {})))
    return cases


CASES = _cases()


@pytest.mark.parametrize(("check_id", "fixture", "expected"), CASES,
                         ids=[f"{c}/{f.stem}" for c, f, _ in CASES])
def test_fixture_reaches_its_status_and_deciding_figure(check_id: str, fixture: Path, expected: dict) -> None:
    status = next(s for s in sorted(STATUSES, key=len, reverse=True) if fixture.stem.startswith(s.replace("-", "_")))
    record = evaluate(json.loads(fixture.read_text()))
    result = next(c for c in record["checks"] if c["id"] == check_id)

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


def test_every_fixture_has_expectations() -> None:
    assert all(expected for _, _, expected in CASES), [str(f) for _, f, e in CASES if not e]

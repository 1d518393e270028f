"""`quotecheck remedies` and the record's remedies: the search as JSON, text with a progress bar, the exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

import schemas
from rules.advice.compare import merge_patch
from rules.advice.remedies import search_remedies
from rules.evaluate import evaluate
from service.cli import main

ROOT = Path(__file__).parent.parent
FAILING = ROOT / "examples" / "fail-70b-ddp-one-rack.json"
PASSING = ROOT / "examples" / "dgx-h100-70b-finetune.json"


def _run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _record(*args: str) -> dict[str, Any]:
    result = _run("evaluate", *args, "--format", "json")
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_json_lists_the_remedies_best_first_each_passing_when_applied():
    # Given the failing one-rack example
    document = json.loads(FAILING.read_text())

    # When its remedies are searched from the command line
    result = _run("remedies", str(FAILING), "--format", "json")

    # Then it exits 0 (remedies found) with the search's result, a progress bar on stderr
    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["remedies"] == search_remedies(document)["remedies"]
    assert "evaluating remedies" in result.stderr
    for remedy in printed["remedies"]:
        assert {"patch", "verdict", "added_cost", "days", "changes"} <= set(remedy)
        assert evaluate(merge_patch(document, remedy["patch"]))["verdict"] == remedy["verdict"] == "pass"


def test_text_shows_each_remedy_with_its_changes_and_what_the_workload_alone_leaves():
    result = _run("remedies", str(FAILING))

    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("verdict FAIL; failing or warning: peak-memory fail")
    assert lines[2].startswith("1. r-") and ": PASS, " in lines[2]
    assert any("racks like legacy-rack-7" in line for line in lines)
    assert any(line.startswith("partial (workload only)") for line in lines)
    assert "    still: rack-power fail" in lines


def test_a_passing_submission_has_nothing_to_remedy_and_exits_0():
    result = _run("remedies", str(PASSING), "--format", "json")

    assert result.exit_code == 0
    assert json.loads(result.stdout)["remedies"] == []


def test_an_invalid_file_exits_2(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"schema_version": "1", "quote": ')

    result = _run("remedies", str(path))

    assert result.exit_code == 2 and result.stderr.startswith("error: ")


def test_no_remedy_found_exits_1(tmp_path):
    # A policy that allows a single evaluation finds no set of changes that makes the example pass.
    policy = json.loads((ROOT / "rules" / "data" / "policy.default.json").read_text())
    policy["remedies"]["max_evaluations"] = 1
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(policy))

    result = _run("remedies", str(FAILING), "--policy", str(path), "--format", "json")

    assert result.exit_code == 1
    assert json.loads(result.stdout)["remedies"] == []


def test_evaluate_attaches_the_remedies_to_a_failing_record_valid_against_the_record_schema():
    record = _record(str(FAILING))

    assert schemas.validate("record", record) == []
    assert record["remedies"]["remedies"] == search_remedies(json.loads(FAILING.read_text()))["remedies"]
    # the checks are the evaluation's, as without the remedies
    assert record["checks"] == _record(str(FAILING), "--no-remedies")["checks"]
    assert "remedies" not in _record(str(FAILING), "--no-remedies")
    assert "remedies" not in _record(str(PASSING))
    table = _run("evaluate", str(FAILING)).stdout
    assert "remedies: " in table and "  1. r-" in table

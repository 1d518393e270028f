"""`quotecheck evaluate --format sarif|junit|csv`: read back the way their tools read them.

SARIF is validated against the OASIS SARIF 2.1.0 schema (tests/data/sarif, with its source); JUnit XML is
read with junitparser, a JUnit XML reader, and with the standard library's XML parser; CSV with the
standard library's csv reader.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner

from service.cli import main
from service.exports.comparisons import comparison_csv
from service.exports.positions import Positions, resolve
from service.exports.tables import cell, csv_text
from tests.checks.fixture_support import load_fixture
from tests.sarif_support import sarif_problems

ROOT = Path(__file__).parent.parent
FAILING_EXAMPLE = ROOT / "examples" / "fail-70b-ddp-one-rack.json"
INSUFFICIENT = ROOT / "tests" / "checks" / "inference_memory" / "insufficient_data_8b_without_architecture.json"


def _evaluate(path: Path | str, fmt: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["evaluate", str(path), "--format", fmt, "--no-search"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def _record(path: Path | str) -> dict:
    return json.loads(_evaluate(path, "json")[1])


@pytest.fixture(scope="module")
def insufficient_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("exports") / "insufficient.json"
    path.write_text(json.dumps(load_fixture(INSUFFICIENT), indent=2))
    return path


# --- SARIF ------------------------------------------------------------------------------------------------

def test_sarif_of_the_failing_example_validates_against_the_sarif_2_1_0_schema():
    code, output = _evaluate(FAILING_EXAMPLE, "sarif")

    log = json.loads(output)
    assert code == 1  # the verdict decides the exit code, whatever the format
    assert sarif_problems(log) == []
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1


def test_sarif_has_one_result_per_check_with_kind_and_level_by_status():
    record = _record(FAILING_EXAMPLE)
    run = json.loads(_evaluate(FAILING_EXAMPLE, "sarif")[1])["runs"][0]

    by_check = {r["properties"]["check_id"]: r for r in run["results"]}
    assert list(by_check) == [c["id"] for c in record["checks"]]
    expected = {"fail": ("fail", "error"), "warn": ("fail", "warning"), "pass": ("pass", "none"),
                "not-applicable": ("notApplicable", "none")}
    for check in record["checks"]:
        result = by_check[check["id"]]
        assert (result["kind"], result["level"]) == expected[check["status"]], check["id"]
        assert result["message"]["text"] == check["message"]
        assert result["ruleId"] == f"{check['id']}/{check['rule']}"
        rule = run["tool"]["driver"]["rules"][result["ruleIndex"]]
        assert rule["id"] == result["ruleId"] and rule["shortDescription"]["text"].startswith(check["title"])
    assert run["tool"]["driver"]["name"] == "quotecheck"
    assert run["properties"]["verdict"] == "fail"


def test_sarif_locates_each_input_by_json_pointer_and_by_line_in_the_file():
    # Given the failing example, whose first node group sits on line 10 of the file
    lines = FAILING_EXAMPLE.read_text().splitlines()
    run = json.loads(_evaluate(FAILING_EXAMPLE, "sarif")[1])["runs"][0]
    peak = next(r for r in run["results"] if r["properties"]["check_id"] == "peak-memory")

    by_pointer = {loc["logicalLocations"][0]["fullyQualifiedName"]: loc for loc in peak["locations"]}
    count = by_pointer["/quote/node_groups/0/count"]
    region = count["physicalLocation"]["region"]
    assert count["physicalLocation"]["artifactLocation"]["uri"] == FAILING_EXAMPLE.as_uri()  # an absolute path
    assert count["logicalLocations"][0] == {"fullyQualifiedName": "/quote/node_groups/0/count", "kind": "property",
                                            "name": "count"}
    line = lines[region["startLine"] - 1]
    assert line[region["startColumn"] - 1:region["endColumn"] - 1] == '"count": 4'
    # An input the catalogue filled (the GPU count of a DGX-H100) points at the node group it belongs to.
    filled = by_pointer["/quote/node_groups/0/gpu/count"]
    assert "the catalogue fills it: 8" in filled["message"]["text"]
    group = filled["physicalLocation"]["region"]
    assert lines[group["startLine"] - 1][group["startColumn"] - 1:].startswith('{"name": "gpu"')
    assert run["artifacts"][0]["hashes"]["sha-256"] == __import__("hashlib").sha256(
        FAILING_EXAMPLE.read_bytes()).hexdigest()


def test_sarif_marks_insufficient_data_open_and_locates_the_missing_inputs(insufficient_file):
    record = _record(insufficient_file)
    log = json.loads(_evaluate(insufficient_file, "sarif")[1])

    assert sarif_problems(log) == []
    lacking = [c for c in record["checks"] if c["status"] == "insufficient-data"]
    assert lacking, "the fixture must leave a check without its inputs"
    results = {r["properties"]["check_id"]: r for r in log["runs"][0]["results"]}
    for check in lacking:
        result = results[check["id"]]
        assert (result["kind"], result["level"]) == ("open", "none")
        located = [loc["logicalLocations"][0]["fullyQualifiedName"] for loc in result["locations"]]
        assert located[:len(check["evidence"]["missing"])] == check["evidence"]["missing"]


# --- JUnit ------------------------------------------------------------------------------------------------

def test_junit_parses_with_a_junit_xml_reader_one_case_per_check(tmp_path):
    junitparser = pytest.importorskip("junitparser", reason="junitparser is a dev dependency (pyproject)")
    record = _record(FAILING_EXAMPLE)
    code, output = _evaluate(FAILING_EXAMPLE, "junit")
    report = tmp_path / "quotecheck.xml"
    report.write_text(output, encoding="utf-8")  # as CI stores it, then reads the file

    xml = junitparser.JUnitXml.fromfile(str(report))
    suites = list(xml)
    assert code == 1 and len(suites) == 1
    cases = {case.name: case for case in suites[0]}
    assert list(cases) == [c["id"] for c in record["checks"]]
    for check in record["checks"]:
        kinds = [type(r).__name__ for r in cases[check["id"]].result]
        assert kinds == {"fail": ["Failure"], "not-applicable": ["Skipped"]}.get(check["status"], []), check["id"]
    failed = sum(c["status"] == "fail" for c in record["checks"])
    assert (suites[0].tests, suites[0].failures, suites[0].errors) == (len(record["checks"]), failed, 0)


def test_junit_reports_insufficient_data_as_an_error_and_parses_as_plain_xml(insufficient_file):
    record = _record(insufficient_file)
    root = ElementTree.fromstring(_evaluate(insufficient_file, "junit")[1])

    suite = root.find("testsuite")
    assert root.tag == "testsuites" and suite is not None
    lacking = {c["id"] for c in record["checks"] if c["status"] == "insufficient-data"}
    errored = {case.get("name") for case in suite.iter("testcase") if case.find("error") is not None}
    assert errored == lacking and suite.get("errors") == str(len(lacking))
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["verdict"] == record["verdict"]


# --- CSV --------------------------------------------------------------------------------------------------

def test_csv_has_one_row_per_check_with_its_deciding_figure():
    record = _record(FAILING_EXAMPLE)
    rows = list(csv.DictReader(io.StringIO(_evaluate(FAILING_EXAMPLE, "csv")[1], newline="")))

    assert [r["id"] for r in rows] == [c["id"] for c in record["checks"]]
    peak = next(r for r in rows if r["id"] == "peak-memory")
    assert peak["status"] == "fail" and peak["rule"] == "exceeds-usable-memory"
    assert peak["deciding_figure"].endswith("GiB usable per GPU")
    assert "/quote/node_groups/0/count" in peak["inputs"].split()


def test_a_cell_a_spreadsheet_would_run_as_a_formula_is_written_as_text():
    text = csv_text(("vendor", "count"), [{"vendor": '=HYPERLINK("http://x","y")', "count": -3}])

    assert list(csv.reader(io.StringIO(text))) == [["vendor", "count"], ["'=HYPERLINK(\"http://x\",\"y\")", "-3"]]
    assert [cell(v) for v in ("+1", "@a", "-b", "plain", None, True)] == ["'+1", "'@a", "'-b", "plain", "", "true"]


def test_a_relative_file_is_named_by_a_relative_uri(monkeypatch):
    monkeypatch.chdir(ROOT)
    log = json.loads(_evaluate("examples/fail-70b-ddp-one-rack.json", "sarif")[1])

    assert log["runs"][0]["artifacts"][0]["location"]["uri"] == "examples/fail-70b-ddp-one-rack.json"


# --- positions ----------------------------------------------------------------------------------------------

def test_positions_cover_members_elements_and_escaped_names():
    text = '\ufeff{\n  "a/b": [1, {"x~y": "é\\n"}],\n  "n": null\n}'
    positions = Positions(text)

    assert positions.region("/a~1b/1/x~0y").as_sarif() == {"startLine": 2, "startColumn": 15, "endLine": 2,
                                                           "endColumn": 27}
    assert positions.region("/a~1b/0").as_sarif()["startColumn"] == 11
    assert positions.region("/n").as_sarif() == {"startLine": 3, "startColumn": 3, "endLine": 3, "endColumn": 12}
    assert positions.region("/missing") is None
    assert resolve(json.loads(text[1:]), "/a~1b/1/x~0y") == (True, "é\n")
    assert resolve({"a": [1]}, "/a/²") == (False, None)
    assert Positions("not json").region("") is None


def test_comparison_csv_numbers_are_plain_decimals_and_text_cannot_run_as_a_formula():
    # Given a decided comparison whose figures need an exponent in Python's repr, and a vendor written as a formula
    row = {"name": "q1", "vendor": "@SUM(A1)", "quote_id": "-1", "rank": 1, "passes": True, "stopped_by": [],
           "assumed_layout": {"tensor": 8, "pipeline": 2, "context": 1, "data": 4, "sharding": "zero1",
                              "micro_batch": 1},
           "days_p50": 1.5e-05, "days_p90": 2.0, "days": 1e20, "days_range": None, "currency": "USD",
           "quote_total": 1234567.0, "cost_per_run": 0.1, "cost_per_million_tokens": None}
    stopped = {**row, "name": "q2", "rank": None, "passes": False, "vendor": "Plain",
               "stopped_by": [{"id": "peak-memory", "status": "fail", "message": "=needs 90 GiB"}]}
    result = {"passing": [row], "not_ranked": [stopped], "soonest": {"name": "q1"}, "cheapest": None}

    # When it is written as CSV and read back
    table = list(csv.DictReader(io.StringIO(comparison_csv(result))))

    # Then numbers are plain decimals, unknown figures empty, and formula-like text quoted with an apostrophe
    assert table[0]["days_p50"] == "0.000015" and table[0]["days_expected"] == "100000000000000000000"
    assert table[0]["quote_total_in_currency"] == "1234567" and table[0]["cost_per_million_tokens_in_currency"] == ""
    assert table[0]["vendor"] == "'@SUM(A1)" and table[0]["quote_id"] == "'-1"
    assert table[0]["soonest_that_passes"] == "true" and table[0]["cheapest_that_passes"] == "false"
    assert table[1]["rank"] == "" and table[1]["stopped_by"] == "peak-memory: =needs 90 GiB"
    assert [table[0][c] for c in ("tensor_parallel", "pipeline_parallel", "data_parallel")] == ["8", "2", "4"]

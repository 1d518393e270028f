"""GET /api/v1/submissions/{id}/checks in JSON, SARIF, JUnit and CSV; the submissions list and audit trail as CSV.

Each export is read back over HTTP the way its tool reads it: SARIF against the SARIF 2.1.0 schema, JUnit
XML with a JUnit XML reader (and the standard XML parser), CSV with the csv module.
"""

from __future__ import annotations

import csv
import io
import json
import re
from xml.etree import ElementTree

import pytest
from api_support import JUSTIFICATION, token_for, url

from tests.sarif_support import sarif_problems


def _rows(response) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(response.get_data(as_text=True), newline="")))


def _waived(as_role, submitted) -> tuple[dict, str]:
    """Returns the submission after a reviewer waived its failed training-objective check, and that check's id."""
    _, view = submitted
    response = as_role("reviewer", "rhea").post(url(view["id"], "checks", "training-objective", "waivers"),
                                                json={"justification": JUSTIFICATION}, if_match=view["etag"])
    assert response.status_code == 201, response.get_json()
    return response.get_json(), "training-objective"


def test_checks_are_json_by_default_with_their_status_after_waivers(as_role, submitted):
    view, waived = _waived(as_role, submitted)

    response = as_role("reviewer").get(url(view["id"], "checks"))

    body = response.get_json()
    assert response.status_code == 200 and response.mimetype == "application/json"
    assert [c["id"] for c in body["checks"]] == [c["id"] for c in view["evaluation"]["checks"]]
    assert next(c for c in body["checks"] if c["id"] == waived)["effective_status"] == "waived"
    assert (body["verdict"], body["revision"], body["record_id"]) == (
        view["verdict"], 1, view["evaluation"]["record_id"])


def test_sarif_over_http_validates_and_suppresses_the_waived_result(as_role, submitted):
    # Given a submission whose failed check was waived
    view, waived = _waived(as_role, submitted)

    # When a reader asks for SARIF
    response = as_role("approver").get(url(view["id"], "checks") + "?format=sarif")

    # Then the log validates, and the waived result keeps its level with an accepted suppression
    assert response.status_code == 200 and response.mimetype == "application/sarif+json"
    assert response.headers["Content-Disposition"] == f'attachment; filename="quotecheck-{view["id"]}-r1.sarif"'
    log = json.loads(response.get_data(as_text=True))
    assert sarif_problems(log) == []
    run = log["runs"][0]
    result = next(r for r in run["results"] if r["properties"]["check_id"] == waived)
    assert (result["kind"], result["level"]) == ("fail", "error")
    assert result["suppressions"][0]["status"] == "accepted"
    assert result["suppressions"][0]["justification"] == JUSTIFICATION
    assert result["suppressions"][0]["properties"]["author"] == "rhea"
    unwaived = [r for r in run["results"] if r["properties"]["check_id"] != waived]
    assert all("suppressions" not in r for r in unwaived)
    assert run["properties"]["submission"]["id"] == view["id"]
    assert run["properties"]["verdict_after_waivers"] == view["effective_verdict"]
    artifact = run["artifacts"][0]
    assert artifact["location"]["uri"] == "submission.json"
    assert "sha256:" + artifact["hashes"]["sha-256"] == view["evaluation"]["submission_digest"]
    pointers = [loc["logicalLocations"][0]["fullyQualifiedName"] for loc in result["locations"]]
    check = next(c for c in view["evaluation"]["checks"] if c["id"] == waived)
    assert pointers == check["evidence"]["inputs"]


def test_the_accept_header_chooses_the_format_when_the_query_does_not(as_role, submitted):
    _, view = submitted
    reader = as_role("reviewer")

    assert reader.get(url(view["id"], "checks"), headers={"Accept": "application/sarif+json"}).mimetype == \
        "application/sarif+json"
    assert reader.get(url(view["id"], "checks"), headers={"Accept": "text/csv"}).mimetype == "text/csv"
    assert reader.get(url(view["id"], "checks"), headers={"Accept": "*/*"}).mimetype == "application/json"
    assert reader.get(url(view["id"], "checks") + "?format=json",
                      headers={"Accept": "text/csv"}).mimetype == "application/json"
    bad = reader.get(url(view["id"], "checks") + "?format=pdf")
    assert bad.status_code == 422 and bad.get_json()["errors"][0]["parameter"] == "format"


def test_junit_over_http_parses_with_a_junit_reader_and_skips_the_waived_check(as_role, submitted, tmp_path):
    junitparser = pytest.importorskip("junitparser", reason="junitparser is a dev dependency (pyproject)")
    view, waived = _waived(as_role, submitted)

    response = as_role("reviewer").get(url(view["id"], "checks") + "?format=junit")

    assert response.status_code == 200 and response.mimetype == "application/xml"
    report = tmp_path / "report.xml"
    report.write_bytes(response.get_data())
    suite = next(iter(junitparser.JUnitXml.fromfile(str(report))))
    cases = {case.name: case for case in suite}
    assert [type(r).__name__ for r in cases[waived].result] == ["Skipped"]
    assert JUSTIFICATION in cases[waived].result[0].message
    failed = [c["id"] for c in view["evaluation"]["checks"] if c["effective_status"] == "fail"]
    assert sorted(name for name, case in cases.items()
                  if any(type(r).__name__ == "Failure" for r in case.result)) == sorted(failed)


def test_junit_of_an_unwaived_submission_is_plain_xml_with_one_case_per_check(as_role, submitted):
    _, view = submitted

    root = ElementTree.fromstring(as_role("reviewer").get(url(view["id"], "checks") + "?format=junit").get_data())

    cases = [case.get("name") for case in root.iter("testcase")]
    assert cases == [c["id"] for c in view["evaluation"]["checks"]]


def test_checks_as_csv_one_row_per_check(as_role, submitted):
    view, waived = _waived(as_role, submitted)

    rows = _rows(as_role("reviewer").get(url(view["id"], "checks") + "?format=csv"))

    assert [r["id"] for r in rows] == [c["id"] for c in view["evaluation"]["checks"]]
    row = next(r for r in rows if r["id"] == waived)
    assert (row["status"], row["effective_status"]) == ("fail", "waived")


def test_checks_of_another_users_submission_are_not_found_for_a_scoped_token(app, submitted):
    _, view = submitted
    vendor = token_for(app, "other-vendor", "submitter", scope="own")

    assert vendor.get(url(view["id"], "checks") + "?format=sarif").status_code == 404
    assert vendor.get(url("no-such-id", "checks")).status_code == 404


def test_the_submissions_list_as_csv_neutralises_formulas_and_links_the_next_page(as_role, submission_document):
    submitter, reader = as_role("submitter"), as_role("reviewer")
    for vendor in ("=HYPERLINK(\"http://evil\",\"x\")", "Northwind Compute"):
        submission_document["quote"]["vendor"] = vendor
        assert submitter.post("/api/v1/submissions", json=submission_document).status_code == 201

    page = reader.get("/api/v1/submissions?format=csv&per_page=1")
    by_accept = reader.get("/api/v1/submissions", headers={"Accept": "text/csv"})

    assert page.status_code == 200 and page.mimetype == "text/csv"
    assert [r["vendor"] for r in _rows(page)] == ["Northwind Compute"]
    links = {rel: href for href, rel in re.findall(r'<([^>]+)>; rel="(\w+)"', page.headers["Link"])}
    following = reader.get(links["next"])
    assert "format=csv" in links["next"]
    assert [r["vendor"] for r in _rows(following)] == ["'=HYPERLINK(\"http://evil\",\"x\")"]
    assert {r["vendor"] for r in _rows(by_accept)} == {"Northwind Compute", "'=HYPERLINK(\"http://evil\",\"x\")"}
    assert reader.get("/api/v1/submissions").mimetype == "application/json"


def test_the_audit_trail_as_csv_one_row_per_event(as_role, submitted):
    _, view = submitted
    reader = as_role("reviewer")
    events = reader.get(url(view["id"], "audit")).get_json()["events"]

    rows = _rows(reader.get(url(view["id"], "audit") + "?format=csv"))

    assert [r["action"] for r in rows] == [e["action"] for e in events]
    assert [r["hash"] for r in rows] == [e["hash"] for e in events]
    assert json.loads(rows[0]["detail"]) == events[0]["detail"]
    assert reader.get(url(view["id"], "audit"), headers={"Accept": "text/csv"}).mimetype == "text/csv"

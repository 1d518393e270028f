"""One verdict, everywhere: the verdict as evaluated and after waivers, in the list, the detail and the PDF cover.

Read over HTTP, as a client reads them. The verdict after waivers depends on the day (waivers expire), so
the list computes it as the detail does, and its filter pages over what it computes.
"""

from __future__ import annotations

import shutil
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from api_support import JUSTIFICATION, url, waive_all

LIST = "/api/v1/submissions"


def pdftotext(pdf: bytes, tmp_path: Path) -> str:
    tool = shutil.which("pdftotext")
    if tool is None:
        pytest.skip("pdftotext is not installed (apt-get install -y poppler-utils)")
    source = tmp_path / "record.pdf"
    source.write_bytes(pdf)
    return subprocess.run([tool, str(source), "-"], capture_output=True, text=True, check=True, timeout=60).stdout


@pytest.fixture
def three(as_role, clock, submission_document) -> dict[str, Any]:
    """Three copies of the failing quote: one unwaived, one waived for good, one whose waivers have expired."""
    submitter, reviewer = as_role("submitter"), as_role("reviewer")
    views = {}
    for name in ("unwaived", "waived", "expired"):
        submission_document["quote"]["quote_id"] = name
        response = submitter.post(LIST, json=submission_document)
        assert response.status_code == 201, response.get_json()
        views[name] = response.get_json()
    views["waived"] = waive_all(reviewer, views["waived"])
    tomorrow = (clock() + timedelta(days=1)).date().isoformat()
    views["expired"] = waive_all(reviewer, views["expired"], expires=tomorrow)
    assert views["expired"]["effective_verdict"] == views["waived"]["effective_verdict"] != "fail"
    clock.advance(days=3)
    return {"caller": submitter, "views": views, "after_waivers": views["waived"]["effective_verdict"]}


def _ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.get_json()
    return [item["quote_id"] for item in response.get_json()["items"]]


def test_the_list_and_the_detail_give_both_verdicts_alike(three):
    caller = three["caller"]

    items = {item["quote_id"]: item for item in caller.get(LIST).get_json()["items"]}

    assert {name: (i["verdict"], i["effective_verdict"]) for name, i in items.items()} == {
        "unwaived": ("fail", "fail"), "waived": ("fail", three["after_waivers"]), "expired": ("fail", "fail")}
    for item in items.values():
        detail = caller.get(item["links"]["self"]).get_json()
        assert (detail["verdict"], detail["effective_verdict"]) == (item["verdict"], item["effective_verdict"])


def test_the_list_filters_by_the_verdict_after_waivers_and_by_the_verdict_as_evaluated(three):
    caller, after = three["caller"], three["after_waivers"]

    assert sorted(_ids(caller.get(f"{LIST}?effective_verdict=fail"))) == ["expired", "unwaived"]
    assert _ids(caller.get(f"{LIST}?effective_verdict={after}")) == ["waived"]
    assert sorted(_ids(caller.get(f"{LIST}?verdict=fail"))) == ["expired", "unwaived", "waived"]
    assert _ids(caller.get(f"{LIST}?verdict=fail&effective_verdict={after}&state=evaluated")) == ["waived"]
    assert _ids(caller.get(f"{LIST}?effective_verdict=pass&verdict=pass")) == []


def test_pages_under_the_filter_count_and_link_only_what_matches(three):
    caller = three["caller"]

    first = caller.get(f"{LIST}?effective_verdict=fail&per_page=1").get_json()
    second = caller.get(first["links"]["next"]).get_json()

    assert first["total"] == second["total"] == 2
    assert "effective_verdict=fail" in first["links"]["next"] and "next" not in second["links"]
    assert "effective_verdict=fail" in second["links"]["prev"]
    seen = [item["quote_id"] for page in (first, second) for item in page["items"]]
    assert seen == ["expired", "unwaived"]  # newest first, each once; "waived" is skipped
    assert all(item["effective_verdict"] == "fail" for page in (first, second) for item in page["items"])
    assert caller.get(f"{LIST}?effective_verdict=fail&per_page=1&page=3").get_json()["items"] == []


def test_a_revision_that_changes_a_waived_result_reopens_the_check_in_the_list(three, submission_document):
    # The waiver binds to the digest of the result: a revision that changes the evidence makes it stale.
    caller, view = three["caller"], three["views"]["waived"]
    submission_document["quote"]["quote_id"] = "waived"
    submission_document["quote"]["node_groups"][0]["count"] = 3
    submission_document["workload"]["training"]["gpus"] = 24
    submission_document["workload"]["training"]["global_batch"] = 72

    revised = caller.post(url(view["id"], "revisions"), json=submission_document, if_match=view["etag"])

    assert revised.status_code == 201, revised.get_json()
    assert revised.get_json()["effective_verdict"] == "fail"
    assert sorted(_ids(caller.get(f"{LIST}?effective_verdict=fail"))) == ["expired", "unwaived", "waived"]


def test_an_unknown_verdict_filter_is_a_422_naming_the_parameter(as_role):
    response = as_role("reviewer").get(f"{LIST}?effective_verdict=waived")

    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    assert response.get_json()["errors"][0]["parameter"] == "effective_verdict"


def test_the_pdf_cover_states_both_verdicts_and_the_waivers_with_their_justification(as_role, submitted, clock,
                                                                                      tmp_path):
    # Given the failing quote with every blocking check waived (until a date) by a reviewer, and approved
    _, view = submitted
    reviewer = as_role("reviewer", "rita.reviewer")
    expires = (clock() + timedelta(days=90)).date().isoformat()
    view = waive_all(reviewer, view, expires=expires)
    waived = [w["check_id"] for w in view["waivers"]]
    approval = as_role("approver").post(url(view["id"], "decisions"), json={"action": "approve"},
                                        if_match=view["etag"])
    assert approval.status_code == 201, approval.get_json()
    final = approval.get_json()

    # When the signed PDF of the approved record is read over HTTP
    response = as_role("reviewer").get(f"/api/v1/records/{final['final_record_id']}.pdf")

    # Then its cover states the verdict as evaluated, the verdict after waivers, and each waiver in full
    assert response.status_code == 200 and response.headers["Record-Status"] == "signed"
    text = " ".join(pdftotext(response.data, tmp_path).split())
    assert "Verdict as evaluated FAIL" in text
    assert f"Verdict after waivers {final['effective_verdict'].upper()}" in text
    assert f"({len(waived)} waived check" in text
    assert text.count(JUSTIFICATION) >= len(waived)
    assert "rita.reviewer" in text and expires in text
    for check_id in waived:
        assert check_id in text

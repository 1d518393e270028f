"""Remedies over HTTP: the search as a task (run in-process: no broker), and a revision made from one remedy.

Results are checked against rules.advice.remedies.search_remedies of the stored document, and a revision against
merge_patch of the remedy's patch, never against literals.
"""

from __future__ import annotations

import json
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from api_support import token_for, url, waive_all
from jsonschema import Draft202012Validator
from sqlmodel import select

import schemas
from rules.advice.compare import merge_patch
from rules.advice.remedies import search_remedies
from rules.evaluate import evaluate
from service.app import tasks
from service.persistence import audit
from service.persistence.db import get_db
from service.persistence.models import AuditEvent, Revision
from service.record import TrustedKeys, verify_record

EXAMPLES = Path(__file__).parents[2] / "examples"
FAILING = EXAMPLES / "fail-70b-ddp-one-rack.json"
PASSING = EXAMPLES / "dgx-h100-70b-finetune.json"


def _document(path: Path = FAILING) -> dict[str, Any]:
    return json.loads(path.read_text())


@cache
def _expected() -> dict[str, Any]:
    return search_remedies(_document())


def _submit(caller: Any, document: dict[str, Any]) -> dict[str, Any]:
    response = caller.post("/api/v1/submissions", json=document)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def _events(app: Any, action: str) -> list[AuditEvent]:
    with get_db(app).session() as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.action == action)).all())


def _components(client: Any) -> dict[str, Any]:
    return client.get("/api/v1/openapi.json").get_json()["components"]


def test_the_remedies_of_a_failing_submission_are_the_search_of_its_document(app, client, as_role):
    # Given the one-rack example, submitted
    submission_id = _submit(as_role("submitter"), _document())["id"]
    reader = as_role("reviewer")

    # When a reader asks for its remedies (the task runs in-process, so it has finished when answered)
    response = reader.get(url(submission_id, "remedies"))

    # Then the answer is the remediation search of the stored document, in the documented shape
    assert response.status_code == 200, response.get_json()
    result = response.get_json()
    assert result["remedies"] == _expected()["remedies"] and result["remedies"]
    Draft202012Validator({"$ref": "#/components/schemas/Remedies", "components": _components(client)}).validate(result)
    for remedy in result["remedies"]:
        assert evaluate(merge_patch(_document(), remedy["patch"]))["verdict"] == remedy["verdict"] == "pass"
    # and asking again reads the finished task: searched once, audited once on the submission
    assert reader.get(url(submission_id, "remedies")).get_json() == result
    events = _events(app, "remedies.requested")
    assert [(e.submission_id, e.detail["sent"]) for e in events] == [(submission_id, True)]
    with get_db(app).session() as session:
        assert audit.verify(session).ok


def test_while_the_search_runs_the_answer_is_202_with_the_task(app, as_role, monkeypatch):
    # Given a queue that holds the task without running it
    monkeypatch.setattr(tasks, "send", lambda row: None)
    submission_id = _submit(as_role("submitter"), _document())["id"]
    reader = as_role("reviewer")

    first, again = reader.get(url(submission_id, "remedies")), reader.get(url(submission_id, "remedies"))

    assert first.status_code == again.status_code == 202
    task = first.get_json()
    assert task["kind"] == "remedies" and task["state"] == "PENDING"
    assert first.headers["Location"] == again.headers["Location"] == f"/api/v1/tasks/{task['id']}"
    assert reader.get(first.headers["Location"]).get_json()["progress"]["total"] == _expected()["max_evaluations"]


def test_a_passing_submission_has_no_remedies(as_role):
    submission_id = _submit(as_role("submitter"), _document(PASSING))["id"]

    result = as_role("reviewer").get(url(submission_id, "remedies")).get_json()

    assert result["remedies"] == [] and result["verdict"] == "pass"


def test_a_revision_is_made_from_a_remedy_in_one_request(app, as_role):
    # Given the one-rack example, submitted, and its remedies read
    submitter = as_role("submitter")
    view = _submit(submitter, _document())
    listed = submitter.get(url(view["id"], "remedies")).get_json()["remedies"]

    # When its submitter revises it by the best remedy
    response = submitter.post(url(view["id"], "remedies", "0", "revision"), if_match=view["etag"])

    # Then the new revision is the current document with the remedy's patch applied, and it passes
    assert response.status_code == 201, response.get_json()
    revised = response.get_json()
    assert revised["revision"] == 2 and revised["remedy"] == {"id": listed[0]["id"], "changes": listed[0]["changes"]}
    assert revised["evaluation"]["verdict"] == listed[0]["verdict"] == "pass"
    assert revised["diff"]["verdict"] == {"from": "fail", "to": "pass"}
    assert response.headers["ETag"] == revised["etag"] != view["etag"]
    with get_db(app).session() as session:
        document = session.exec(select(Revision.document).where(Revision.submission_id == view["id"],
                                                                Revision.number == 2)).one()
    assert document == merge_patch(_document(), listed[0]["patch"])
    # ... recorded in the audit trail with the remedy it came from
    created = [e for e in _events(app, "revision.created") if e.submission_id == view["id"]]
    assert created[-1].detail == {"revision": 2, "remedy": listed[0]["id"], "changes": listed[0]["changes"]}


def test_a_remedy_is_named_by_its_id_too_and_an_unknown_one_is_404(as_role):
    submitter = as_role("submitter")
    view = _submit(submitter, _document())
    listed = submitter.get(url(view["id"], "remedies")).get_json()["remedies"]

    unknown = submitter.post(url(view["id"], "remedies", "r-000000000000", "revision"), if_match=view["etag"])
    beyond = submitter.post(url(view["id"], "remedies", str(len(listed)), "revision"), if_match=view["etag"])
    by_id = submitter.post(url(view["id"], "remedies", listed[-1]["id"], "revision"), if_match=view["etag"])

    assert unknown.status_code == beyond.status_code == 404
    assert unknown.mimetype == "application/problem+json" and listed[0]["id"] in unknown.get_json()["detail"]
    assert by_id.status_code == 201 and by_id.get_json()["remedy"]["id"] == listed[-1]["id"]


@pytest.mark.parametrize(("role", "if_match", "status"), [("reviewer", True, 403), ("submitter", False, 428)])
def test_a_revision_from_a_remedy_needs_the_submitter_and_if_match(as_role, role, if_match, status):
    view = _submit(as_role("submitter"), _document())
    caller = as_role(role)

    response = caller.post(url(view["id"], "remedies", "0", "revision"), if_match=view["etag"] if if_match else None)

    assert response.status_code == status


def test_another_vendor_sees_neither_the_remedies_nor_the_submission(app):
    acme, globex = token_for(app, "acme", "submitter", scope="own"), token_for(app, "globex", "submitter", scope="own")
    submission_id = _submit(acme, _document())["id"]

    assert globex.get(url(submission_id, "remedies")).status_code == 404
    assert acme.get(url(submission_id, "remedies")).status_code == 200


def test_the_approved_record_carries_the_remedies_signed(client, as_role):
    # Given the one-rack example approved over HTTP with every blocking check waived
    submitter, approver = as_role("submitter"), as_role("approver")
    created = _submit(submitter, _document())
    view = waive_all(as_role("reviewer"), created)
    decided = approver.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])
    assert decided.status_code == 201, decided.get_json()

    # When its signed record is downloaded and read back as JSON
    envelope = json.loads(approver.get(f"/api/v1/records/{decided.get_json()['final_record_id']}.json").data)
    pem = "".join(key["certificate_pem"] for key in client.get("/api/v1/keys").get_json()["keys"])

    # Then it verifies, and holds the remedies of the evaluation (by the checks' original statuses)
    assert verify_record(envelope, TrustedKeys.from_pem(pem.encode(), "GET /api/v1/keys")).ok
    record = envelope["record"]
    assert schemas.validate("record", record) == []
    assert record["remedies"]["remedies"] == _expected()["remedies"]
    assert record["remedies"]["verdict"] == "fail"
    assert "remedies" not in json.loads(approver.get(
        f"/api/v1/records/{created['evaluation']['record_id']}.json").data)


def test_the_openapi_document_describes_the_remedies(client):
    paths = client.get("/api/v1/openapi.json").get_json()["paths"]
    read = paths["/api/v1/submissions/{submission_id}/remedies"]["get"]
    revise = paths["/api/v1/submissions/{submission_id}/remedies/{remedy}/revision"]["post"]

    def schema(status: str) -> dict[str, Any]:
        return read["responses"][status]["content"]["application/json"]["schema"]

    assert schema("200") == {"$ref": "#/components/schemas/Remedies"}
    assert schema("202") == {"$ref": "#/components/schemas/Task"}
    assert revise["x-roles"] == ["admin", "submitter"]
    assert {"401", "403", "404", "412", "428"} <= set(revise["responses"])
    task = _components(client)["schemas"]["Task"]
    assert {"$ref": "#/components/schemas/Remedies"} in task["properties"]["result"]["anyOf"]


def test_the_signed_pdf_shows_the_remedies(as_role, tmp_path):
    submitter, approver = as_role("submitter"), as_role("approver")
    view = waive_all(as_role("reviewer"), _submit(submitter, _document()))
    decided = approver.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])
    pdf = tmp_path / "record.pdf"
    pdf.write_bytes(approver.get(f"/api/v1/records/{decided.get_json()['final_record_id']}.pdf").data)

    text = " ".join(subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                                   check=True).stdout.split())

    # (table cells wrap, so only words that fit one line are looked for)
    assert "Remedies" in text and _expected()["remedies"][0]["id"] in text
    assert "legacy-rack-7" in text and "unpriced" in text and "rack-power" in text


def test_a_revision_from_a_remedy_searches_them_when_no_search_has_finished(app, as_role):
    # Given a submission whose remedies nobody has asked for yet
    submitter = as_role("submitter")
    view = _submit(submitter, _document())

    # When its submitter revises it by the best remedy straight away
    response = submitter.post(url(view["id"], "remedies", "0", "revision"), if_match=view["etag"])

    # Then the remedies are searched in the request, and the best one is applied
    assert response.status_code == 201, response.get_json()
    assert response.get_json()["remedy"]["id"] == _expected()["remedies"][0]["id"]
    assert _events(app, "remedies.requested") == []

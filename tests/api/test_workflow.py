"""The approval workflow through the API, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from api_support import JUSTIFICATION, Caller, new_token, url, waive_all
from sqlmodel import func, select

import schemas
from rules.policy import default_policy
from service.persistence.db import get_db
from service.persistence.models import AuditEvent, Waiver
from service.signals import before_compare_and_set


def _count(app: Any, model: type) -> int:
    with get_db(app).session() as session:
        return session.exec(select(func.count()).select_from(model)).one()


def test_create_evaluates_at_once_and_returns_location_and_etag(app, submitted):
    # Given a submitter posted the failing submission (fixture)
    submitter, view = submitted

    assert view["state"] == "evaluated"
    assert view["etag"] == '"v1"' and view["version"] == 1
    checks = {c["id"]: c for c in view["evaluation"]["checks"]}
    assert checks["training-objective"]["status"] == "fail"
    assert checks["training-objective"]["digest"].startswith("sha256:")
    assert view["verdict"] == "fail" and view["submitter"] == submitter.name

    # The stored record is the engine's record, reachable by its link, and satisfies the record schema
    record = submitter.get(view["links"]["record"])
    assert record.status_code == 200
    assert record.get_json()["record_id"] == view["evaluation"]["record_id"]
    assert schemas.validate("record", record.get_json()) == []
    assert submitter.get(view["links"]["self"]).headers["ETag"] == '"v1"'


def test_create_response_headers(as_role, submission_document):
    response = as_role("submitter").post("/api/v1/submissions", json=submission_document)
    assert response.status_code == 201
    assert response.headers["Location"] == f"/api/v1/submissions/{response.get_json()['id']}"
    assert response.headers["ETag"] == '"v1"'


def test_list_filters_and_paginates(as_role, submission_document):
    submitter, reader = as_role("submitter"), as_role("reviewer")
    for vendor in ("Acme GPU Systems", "Northwind Compute", "Acme Europe"):
        submission_document["quote"]["vendor"] = vendor
        assert submitter.post("/api/v1/submissions", json=submission_document).status_code == 201

    page = reader.get("/api/v1/submissions?vendor=acme&per_page=1").get_json()
    assert page["total"] == 2 and len(page["items"]) == 1 and "next" in page["links"]
    second = reader.get(page["links"]["next"]).get_json()
    assert {page["items"][0]["vendor"], second["items"][0]["vendor"]} == {"Acme GPU Systems", "Acme Europe"}
    assert reader.get("/api/v1/submissions?state=evaluated&verdict=fail").get_json()["total"] == 3
    assert reader.get("/api/v1/submissions?state=approved").get_json()["total"] == 0

    bad = reader.get("/api/v1/submissions?page=0&state=nope")
    assert bad.status_code == 422 and bad.mimetype == "application/problem+json"
    assert {e["parameter"] for e in bad.get_json()["errors"]} == {"page", "state"}


def test_submitter_cannot_approve_their_own_quote(as_role, submitted):
    submitter, view = submitted
    view = waive_all(as_role("reviewer"), view)

    response = submitter.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])

    assert response.status_code == 403
    assert response.get_json()["type"].endswith("/forbidden")


def test_admin_who_submitted_cannot_approve_four_eyes(as_role, submission_document):
    admin = as_role("admin")
    view = admin.post("/api/v1/submissions", json=submission_document).get_json()
    view = waive_all(as_role("reviewer"), view)

    response = admin.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])

    assert response.status_code == 403
    assert "four-eyes" in response.get_json()["detail"]


def test_waiver_author_cannot_approve_four_eyes(as_role, submitted):
    _, view = submitted
    admin = as_role("admin")
    view = waive_all(admin, view)

    response = admin.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])

    assert response.status_code == 403
    assert "waived" in response.get_json()["detail"]


def test_approval_blocked_until_every_failed_check_is_waived(app, as_role, submitted):
    _, view = submitted
    approver = as_role("approver")

    blocked = approver.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])
    assert blocked.status_code == 409
    problem = blocked.get_json()
    assert problem["type"].endswith("/approval-blocked")
    assert any("training-objective" in e["message"] for e in problem["errors"])

    view = waive_all(as_role("reviewer"), view)
    assert view["approval"]["ready"] is True and view["effective_verdict"] != "fail"
    approved = approver.post(url(view["id"], "decisions"), json={"action": "approve", "comment": "fine"},
                             if_match=view["etag"])

    assert approved.status_code == 201, approved.get_json()
    result = approved.get_json()
    assert result["state"] == "approved" and result["approval"]["approvers"] == [approver.name]
    # An approved record is served as its signed envelope (tests/api/test_records.py verifies it)
    final = approver.get(result["links"]["final_record"]).get_json()["record"]
    assert final["verdict"] != "fail"
    assert {w["check_id"] for w in final["waivers"]} == {w["check_id"] for w in view["waivers"]}
    assert all(c["status"] == "waived" for c in final["checks"] if c["id"] in {w["check_id"] for w in view["waivers"]})
    assert [d["action"] for d in final["decisions"]] == ["approve"]
    assert schemas.validate("record", final) == []


def test_approval_needs_the_policys_number_of_distinct_approvers(make_app, tmp_path, submission_document):
    # Given a policy that asks for two approvers
    document = json.loads(json.dumps(default_policy().document))
    document["approval"]["required_approvers"] = 2
    (tmp_path / "policy.json").write_text(json.dumps(document))
    app = make_app(POLICY_FILE=str(tmp_path / "policy.json"))

    def caller(role: str) -> Caller:
        name, token = new_token(app, role)
        return Caller(app, name, role, token)

    view = caller("submitter").post("/api/v1/submissions", json=submission_document).get_json()
    view = waive_all(caller("reviewer"), view)
    first, second = caller("approver"), caller("approver")

    after_one = first.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])
    assert after_one.status_code == 201
    assert after_one.get_json()["state"] == "evaluated"
    assert after_one.get_json()["approval"]["approvers"] == [first.name]
    assert after_one.get_json()["approval"]["required_approvers"] == 2
    again = first.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=after_one.headers["ETag"])
    assert again.status_code == 409

    after_two = second.post(url(view["id"], "decisions"), json={"action": "approve"},
                            if_match=after_one.headers["ETag"])
    assert after_two.status_code == 201
    assert after_two.get_json()["state"] == "approved"
    assert after_two.get_json()["approval"]["approvers"] == [first.name, second.name]


def test_approved_and_rejected_are_final(as_role, submitted, submission_document):
    submitter, view = submitted
    reviewer = as_role("reviewer")
    rejected = reviewer.post(url(view["id"], "decisions"), json={"action": "reject"}, if_match=view["etag"])
    assert rejected.status_code == 201 and rejected.get_json()["state"] == "rejected"
    etag = rejected.headers["ETag"]

    for caller, path, body in [
        (as_role("approver"), url(view["id"], "decisions"), {"action": "approve"}),
        (reviewer, url(view["id"], "decisions"), {"action": "request-changes"}),
        (reviewer, url(view["id"], "checks", "training-objective", "waivers"), {"justification": JUSTIFICATION}),
        (submitter, url(view["id"], "revisions"), submission_document),
    ]:
        response = caller.post(path, json=body, if_match=etag)
        assert response.status_code == 409, (path, response.get_json())
        assert response.get_json()["type"].endswith("/workflow-conflict")


def test_request_changes_then_revision_returns_to_evaluated(as_role, submitted, submission_document):
    submitter, view = submitted
    approver = as_role("approver")
    changes = approver.post(url(view["id"], "decisions"), json={"action": "request-changes", "comment": "optimizer?"},
                            if_match=view["etag"])
    assert changes.status_code == 201 and changes.get_json()["state"] == "changes_requested"
    again = approver.post(url(view["id"], "decisions"), json={"action": "request-changes"},
                          if_match=changes.headers["ETag"])
    assert again.status_code == 409

    submission_document["workload"]["training"]["optimizer"] = "adamw"
    revised = submitter.post(url(view["id"], "revisions"), json=submission_document, if_match=changes.headers["ETag"])

    assert revised.status_code == 201, revised.get_json()
    body = revised.get_json()
    assert body["state"] == "evaluated" and body["revision"] == 2
    changed = {c["check_id"]: c for c in body["diff"]["checks"]}
    assert changed["training-objective"]["status"]["from"] == "fail"
    assert changed["training-objective"]["status_changed"] is True
    assert changed["training-objective"]["evidence"]["optimizer"] == {"from": "?", "to": "adamw"}
    actions = [(e["action"], e["before_state"], e["after_state"])
               for e in submitter.get(url(view["id"], "audit")).get_json()["events"]]
    assert actions[-2:] == [("revision.created", "changes_requested", "revised"),
                            ("evaluation.completed", "revised", "evaluated")]


def test_only_the_original_submitter_or_an_admin_may_revise(as_role, submitted, submission_document):
    _, view = submitted
    other = as_role("submitter")
    assert other.post(url(view["id"], "revisions"), json=submission_document,
                      if_match=view["etag"]).status_code == 403
    assert as_role("reviewer").post(url(view["id"], "revisions"), json=submission_document,
                                    if_match=view["etag"]).status_code == 403
    assert as_role("admin").post(url(view["id"], "revisions"), json=submission_document,
                                 if_match=view["etag"]).status_code == 201


def test_waiver_without_justification_is_422_and_stores_nothing(app, as_role, submitted):
    _, view = submitted
    reviewer = as_role("reviewer")
    waivers, events = _count(app, Waiver), _count(app, AuditEvent)

    response = reviewer.post(url(view["id"], "checks", "training-objective", "waivers"), json={"expires": None},
                             if_match=view["etag"])

    assert response.status_code == 422
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["errors"][0]["pointer"] == "/justification"
    assert (_count(app, Waiver), _count(app, AuditEvent)) == (waivers, events)
    assert reviewer.get(url(view["id"])).headers["ETag"] == view["etag"]


@pytest.mark.parametrize(("body", "pointer"), [
    ({"justification": "too short"}, "/justification"),
    ({"justification": " " * 30}, "/justification"),
    ({"justification": JUSTIFICATION, "expires": "2001-01-01"}, "/expires"),
    ({"justification": JUSTIFICATION, "expires": "next tuesday"}, "/expires"),
    ({"justification": JUSTIFICATION, "reason": "x"}, "/reason"),
])
def test_waiver_validation(as_role, submitted, body, pointer):
    _, view = submitted
    response = as_role("reviewer").post(url(view["id"], "checks", "training-objective", "waivers"), json=body,
                                        if_match=view["etag"])
    assert response.status_code == 422
    assert [e["pointer"] for e in response.get_json()["errors"]] == [pointer]


def test_waiver_rules_on_checks(as_role, submitted):
    _, view = submitted
    reviewer = as_role("reviewer")
    passing = next((c["id"] for c in view["evaluation"]["checks"] if c["status"] in ("pass", "not-applicable")), None)
    unknown = reviewer.post(url(view["id"], "checks", "no-such-check", "waivers"),
                            json={"justification": JUSTIFICATION}, if_match=view["etag"])
    assert unknown.status_code == 404
    if passing:
        response = reviewer.post(url(view["id"], "checks", passing, "waivers"), json={"justification": JUSTIFICATION},
                                 if_match=view["etag"])
        assert response.status_code == 409
    as_approver = as_role("approver").post(url(view["id"], "checks", "training-objective", "waivers"),
                                           json={"justification": JUSTIFICATION}, if_match=view["etag"])
    assert as_approver.status_code == 403
    first = reviewer.post(url(view["id"], "checks", "training-objective", "waivers"),
                          json={"justification": JUSTIFICATION}, if_match=view["etag"])
    assert first.status_code == 201 and first.get_json()["waiver"]["state"] == "active"
    second = reviewer.post(url(view["id"], "checks", "training-objective", "waivers"),
                           json={"justification": JUSTIFICATION}, if_match=first.headers["ETag"])
    assert second.status_code == 409


def test_expired_waiver_blocks_approval(as_role, submitted, clock):
    _, view = submitted
    tomorrow = (clock() + timedelta(days=1)).date().isoformat()
    view = waive_all(as_role("reviewer"), view, expires=tomorrow)
    assert view["approval"]["ready"] is True

    clock.advance(days=3)
    approver = as_role("approver")
    response = approver.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])

    assert response.status_code == 409
    assert response.get_json()["type"].endswith("/approval-blocked")
    states = {w["state"] for w in approver.get(url(view["id"])).get_json()["waivers"]}
    assert states == {"expired"}


def test_waiver_counts_on_its_expiry_day(as_role, submitted, clock):
    _, view = submitted
    view = waive_all(as_role("reviewer"), view, expires=(clock() + timedelta(days=2)).date().isoformat())
    clock.advance(days=2)
    response = as_role("approver").post(url(view["id"], "decisions"), json={"action": "approve"},
                                        if_match=view["etag"])
    assert response.status_code == 201


def test_revision_changing_a_waived_checks_evidence_reopens_it(as_role, submitted, submission_document):
    submitter, view = submitted
    view = waive_all(as_role("reviewer"), view)
    waiver_id = next(w["id"] for w in view["waivers"] if w["check_id"] == "training-objective")

    # the vendor's revision still misses the optimizer, and now also the completion window
    del submission_document["workload"]["training"]["completion_window_days"]
    revised = submitter.post(url(view["id"], "revisions"), json=submission_document, if_match=view["etag"])

    assert revised.status_code == 201, revised.get_json()
    body = revised.get_json()
    assert {"waiver_id": waiver_id, "check_id": "training-objective"} in body["diff"]["reopened_waivers"]
    changed = {c["check_id"]: c for c in body["diff"]["checks"]}
    assert changed["training-objective"]["evidence_changed"] is True
    waiver = next(w for w in body["waivers"] if w["id"] == waiver_id)
    assert waiver["state"] == "stale"
    check = next(c for c in body["evaluation"]["checks"] if c["id"] == "training-objective")
    assert check["effective_status"] == check["status"] == "fail"
    assert check["waiver"] == {"id": waiver_id, "state": "stale"}
    response = as_role("approver").post(url(view["id"], "decisions"), json={"action": "approve"},
                                        if_match=body["etag"])
    assert response.status_code == 409
    assert any("training-objective" in e["message"] for e in response.get_json()["errors"])


def test_revision_with_unchanged_evidence_keeps_the_waiver(as_role, submitted, submission_document):
    submitter, view = submitted
    view = waive_all(as_role("reviewer"), view)
    submission_document["quote"]["quote_id"] = "ACME-2026-001-rev2"

    body = submitter.post(url(view["id"], "revisions"), json=submission_document, if_match=view["etag"]).get_json()

    waiver = next(w for w in body["waivers"] if w["check_id"] == "training-objective")
    assert waiver["state"] == "active" and body["diff"]["reopened_waivers"] == []
    assert body["quote_id"] == "ACME-2026-001-rev2"


@pytest.mark.parametrize("transition", ["decision", "waiver", "revision"])
def test_transitions_need_a_current_if_match(as_role, submitted, submission_document, transition):
    submitter, view = submitted
    caller, path, body = {
        "decision": (as_role("reviewer"), url(view["id"], "decisions"), {"action": "request-changes"}),
        "waiver": (as_role("reviewer"), url(view["id"], "checks", "training-objective", "waivers"),
                   {"justification": JUSTIFICATION}),
        "revision": (submitter, url(view["id"], "revisions"), submission_document),
    }[transition]

    missing = caller.post(path, json=body)
    assert missing.status_code == 428 and missing.mimetype == "application/problem+json"
    assert caller.post(path, json=body, if_match="*").status_code == 428
    stale = caller.post(path, json=body, if_match='"v0"')
    assert stale.status_code == 412 and stale.get_json()["type"].endswith("/precondition-failed")
    assert caller.post(path, json=body, if_match='W/"v1"').status_code == 412
    assert caller.post(path, json=body, if_match='"v1"').status_code == 201


def test_two_racing_approvals_with_the_same_etag_one_wins(app, as_role, submitted):
    _, view = submitted
    view = waive_all(as_role("reviewer"), view)
    approvers = [as_role("approver"), as_role("approver")]
    # Both requests must have read version N before either writes, so the database decides.
    barrier = threading.Barrier(2, timeout=20)

    def wait_for_the_other(_sender: Any, **_: Any) -> None:
        barrier.wait()

    statuses: list[int] = []

    def approve(caller: Any) -> None:
        response = caller.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])
        statuses.append(response.status_code)

    before_compare_and_set.connect(wait_for_the_other, weak=False)
    try:
        threads = [threading.Thread(target=approve, args=(caller,)) for caller in approvers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        before_compare_and_set.disconnect(wait_for_the_other)

    assert sorted(statuses) == [201, 412]
    final = approvers[0].get(url(view["id"])).get_json()
    assert final["state"] == "approved" and len(final["decisions"]) == 1
    assert final["version"] == view["version"] + 1


def test_audit_events_record_actor_input_and_versions(as_role, submitted):
    submitter, view = submitted
    view = waive_all(as_role("reviewer"), view)
    events = submitter.get(url(view["id"], "audit")).get_json()["events"]

    created, evaluated, waived = events[0], events[1], events[2]
    assert (created["action"], created["actor"], created["actor_role"]) == ("submission.created", submitter.name,
                                                                            "submitter")
    assert created["input_digest"] == view["evaluation"]["submission_digest"]
    assert evaluated["engine_version"] == view["evaluation"]["engine"]["version"]
    assert evaluated["policy_version"] == view["evaluation"]["policy"]["version"]
    assert waived["action"] == "waiver.created" and waived["actor_role"] == "reviewer"
    assert waived["input_digest"].startswith("sha256:") and waived["token_prefix"]
    assert all(b["prev_hash"] == a["hash"] for a, b in zip(events, events[1:], strict=False) if b["id"] == a["id"] + 1)


def test_unknown_submission_is_404(as_role):
    response = as_role("reviewer").get(url("00000000-0000-0000-0000-000000000000"))
    assert response.status_code == 404 and response.get_json()["type"].endswith("/not-found")

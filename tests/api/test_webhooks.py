"""Webhooks end to end: a receiver on 127.0.0.1 gets each workflow event once, signed, even after being down.

The outbox is drained after each commit (in-process: no broker in these tests) and then by driving the drain
directly with the app's clock moved past each backoff, as Celery beat would run it; nothing sleeps.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from api_support import Caller, token_for, url, waive_all
from sqlmodel import select
from webhook_support import signature_is_valid

from service.accounts.actors import Actor
from service.persistence.audit import append
from service.persistence.db import get_db
from service.persistence.webhook_models import WebhookDelivery
from service.webhooks.delivery import Outbox
from service.webhooks.subscriptions import EVENT_TYPES

HOOKS = "/api/v1/webhooks"
PO = {"po_number": "PO-2026/0042", "system": "SAP S/4HANA"}


@pytest.fixture
def make_app(make_app: Any) -> Any:
    """The receivers of these tests listen on 127.0.0.1: their apps admit loopback (and nothing off the machine)."""
    return lambda **config: make_app(**{"WEBHOOK_ALLOWED_NETWORKS": ["127.0.0.0/8"], **config})


def _subscribe(admin: Caller, target: str, events: list[str] | None = None) -> dict[str, Any]:
    response = admin.post(HOOKS, json={"url": target, "events": events or list(EVENT_TYPES),
                                       "description": "procurement chat bridge"})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def _drain(app: Any) -> dict[str, int]:
    with app.app_context():
        return Outbox(get_db(app), app.config).drain().as_dict()


def _log(admin: Caller, hook: dict[str, Any]) -> list[dict[str, Any]]:
    page = admin.get(hook["links"]["deliveries"] + "?per_page=100").get_json()
    assert page["total"] == len(page["items"])
    return page["items"]


def _run_every_event(as_role: Any, submission_document: dict[str, Any]) -> dict[str, int]:
    """Drives one quote to approval with a purchase order, and another through changes to rejection.

    Returns how many events of each type that makes: every type at least once.
    """
    submitter, reviewer, approver = as_role("submitter"), as_role("reviewer"), as_role("approver")
    first = submitter.post("/api/v1/submissions", json=submission_document).get_json()
    waived = waive_all(reviewer, first)
    approved = approver.post(url(first["id"], "decisions"), json={"action": "approve"}, if_match=waived["etag"])
    assert approved.status_code == 201 and approved.get_json()["state"] == "approved"
    linked = approver.post(f"/api/v1/records/{approved.get_json()['final_record_id']}/purchase-orders", json=PO)
    assert linked.status_code == 201, linked.get_json()

    second = submitter.post("/api/v1/submissions", json=submission_document).get_json()
    changes = reviewer.post(url(second["id"], "decisions"), json={"action": "request-changes"},
                            if_match=second["etag"])
    assert changes.status_code == 201
    revised = submitter.post(url(second["id"], "revisions"), json=submission_document,
                             if_match=changes.get_json()["etag"])
    assert revised.status_code == 201
    rejected = reviewer.post(url(second["id"], "decisions"), json={"action": "reject"},
                             if_match=revised.get_json()["etag"])
    assert rejected.status_code == 201
    waivers = len([c for c in first["evaluation"]["checks"] if c["status"] in ("fail", "insufficient-data")])
    return {"submission.submitted": 2, "waiver.added": waivers, "submission.approved": 1,
            "purchase_order.linked": 1, "submission.changes_requested": 1, "submission.revised": 1,
            "submission.rejected": 1}


def test_a_receiver_gets_each_event_once_signed_after_it_was_down_and_the_log_says_so(
        app, as_role, clock, receiver, submission_document):
    # Given an admin's webhook for every event, whose receiver is down while the workflow runs
    admin = as_role("admin")
    hook = _subscribe(admin, receiver.url)
    receiver.stop()
    expected = _run_every_event(as_role, submission_document)

    # Then every event is in the outbox, its first attempt (right after its commit) refused
    log = _log(admin, hook)
    assert Counter(d["event_type"] for d in log) == expected
    assert {(d["state"], d["attempts"]) for d in log} == {("pending", 1)}
    assert all(d["log"][0]["status_code"] is None and d["log"][0]["error"] for d in log)
    assert receiver.received == []

    # When the drain runs before the backoff has passed, nothing is sent
    assert _drain(app)["attempted"] == 0

    # When the backoff (30 s) has passed and the receiver is still down, a second attempt fails
    clock.advance(seconds=31)
    assert _drain(app) == {"attempted": len(log), "delivered": 0, "failed": 0, "cancelled": 0}

    # When the receiver is back and the next backoff (60 s) has passed, everything is delivered
    receiver.start()
    clock.advance(seconds=61)
    assert _drain(app) == {"attempted": len(log), "delivered": len(log), "failed": 0, "cancelled": 0}
    clock.advance(hours=2)
    assert _drain(app)["attempted"] == 0

    # Then the receiver got each event exactly once, each with a valid signature over the body it got
    got = receiver.received
    assert len(got) == len(log) == sum(expected.values())
    assert Counter(r.event["type"] for r in got) == expected
    assert len({r.headers["webhook-id"] for r in got}) == len(got)
    assert {r.headers["webhook-id"] for r in got} == {d["id"] for d in log}
    assert all(signature_is_valid(hook["secret"], r) for r in got)
    assert all(r.headers["x-quotecheck-event"] == r.event["type"] for r in got)
    assert not signature_is_valid(hook["secret"].replace(hook["secret"][6:10], "AAAA"), got[0])
    # and the delivery log says so: refused twice, then the receiver's 204
    log = _log(admin, hook)
    assert {d["state"] for d in log} == {"delivered"}
    assert all([a["status_code"] for a in d["log"]] == [None, None, 204] for d in log)
    assert all("refused" in d["log"][0]["error"].lower() for d in log)
    listed = admin.get(HOOKS).get_json()["items"]
    assert listed[0]["deliveries"] == {"pending": 0, "delivered": len(log), "failed": 0, "cancelled": 0}


def test_the_event_body_names_the_submission_its_verdict_and_the_audit_event(app, as_role, receiver,
                                                                            submission_document):
    admin = as_role("admin")
    _subscribe(admin, receiver.url, ["submission.submitted"])

    view = as_role("submitter").post("/api/v1/submissions", json=submission_document).get_json()

    (event,) = [r.event for r in receiver.received]
    assert event["type"] == "submission.submitted"
    assert event["submission"] == {"id": view["id"], "state": "evaluated", "revision": 1,
                                   "vendor": "Acme GPU Systems", "quote_id": "ACME-2026-001", "verdict": "fail",
                                   "path": f"/api/v1/submissions/{view['id']}"}
    trail = admin.get(url(view["id"], "audit")).get_json()["events"]
    evaluated = next(e for e in trail if e["action"] == "evaluation.completed")
    assert event["audit_event"] == {"id": evaluated["id"], "action": "evaluation.completed",
                                    "hash": evaluated["hash"]}
    assert event["detail"]["verdict"] == "fail" and event["actor"]["role"] == "submitter"


def test_an_error_status_is_retried_until_the_last_attempt_then_failed(make_app, clock, receiver,
                                                                       submission_document):
    app = make_app(WEBHOOK_MAX_ATTEMPTS=2)
    admin, submitter = token_for(app, "ada", "admin"), token_for(app, "sam", "submitter")
    receiver.status = 500
    hook = _subscribe(admin, receiver.url, ["submission.submitted"])

    submitter.post("/api/v1/submissions", json=submission_document)
    clock.advance(seconds=31)
    report = _drain(app)

    (delivery,) = _log(admin, hook)
    assert report == {"attempted": 1, "delivered": 0, "failed": 1, "cancelled": 0}
    assert delivery["state"] == "failed" and delivery["next_attempt_at"] is None
    assert [a["status_code"] for a in delivery["log"]] == [500, 500]
    assert delivery["last_error"].startswith("HTTP 500")


def test_a_redirect_is_not_followed(app, as_role, receiver, submission_document):
    admin = as_role("admin")
    receiver.answers = [302]
    hook = _subscribe(admin, receiver.url, ["submission.submitted"])

    as_role("submitter").post("/api/v1/submissions", json=submission_document)

    (delivery,) = _log(admin, hook)
    assert len(receiver.received) == 1 and delivery["state"] == "pending"
    assert delivery["log"][0]["status_code"] == 302 and "redirects are not followed" in delivery["last_error"]


def test_a_deleted_webhook_gets_nothing_more_and_its_pending_deliveries_are_cancelled(
        app, as_role, clock, receiver, submission_document):
    admin = as_role("admin")
    hook = _subscribe(admin, receiver.url)
    receiver.stop()
    as_role("submitter").post("/api/v1/submissions", json=submission_document)

    deleted = app.test_client().delete(hook["links"]["self"], headers={"Authorization": f"Bearer {admin.token}"})
    receiver.start()
    clock.advance(hours=1)

    assert deleted.status_code == 204
    assert _drain(app)["attempted"] == 0 and receiver.received == []
    assert admin.get(hook["links"]["self"]).status_code == 404
    assert admin.get(HOOKS).get_json()["items"] == []
    with get_db(app).session() as session:
        assert {d.state for d in session.exec(select(WebhookDelivery))} == {"cancelled"}


def test_outbox_rows_commit_or_roll_back_with_their_audit_event(app, as_role, clock, receiver, submitted):
    # Given a webhook for rejections and a submission
    admin = as_role("admin")
    _subscribe(admin, receiver.url, ["submission.rejected"])
    _, view = submitted
    actor = Actor(name="rita", role="reviewer")

    with app.app_context(), get_db(app).session() as session:
        # When a transaction appends a rejection but rolls back, no delivery remains
        append(session, action="decision.reject", actor=actor, occurred_at=clock(),
               submission_id=view["id"], after_state="rejected")
        assert len(session.exec(select(WebhookDelivery)).all()) == 1
        session.rollback()
        assert session.exec(select(WebhookDelivery)).all() == []

    # Then nothing was sent for it
    assert receiver.received == []


def test_only_admins_manage_webhooks_and_the_secret_is_shown_once(app, as_role, receiver):
    admin, reviewer = as_role("admin"), as_role("reviewer")
    created = _subscribe(admin, receiver.url, ["submission.approved"])

    assert reviewer.post(HOOKS, json={"url": receiver.url, "events": ["submission.approved"]}).status_code == 403
    assert reviewer.get(HOOKS).status_code == 403
    assert created["secret"].startswith("whsec_")
    assert "secret" not in admin.get(created["links"]["self"]).get_json()
    assert all("secret" not in item for item in admin.get(HOOKS).get_json()["items"])
    assert admin.get(f"{HOOKS}/999999").status_code == 404


@pytest.mark.parametrize("body, pointer", [
    ({"url": "ftp://example.com/hook", "events": ["submission.approved"]}, "/url"),
    ({"url": "https://user:pw@example.com/hook", "events": ["submission.approved"]}, "/url"),
    ({"url": "https:///nohost", "events": ["submission.approved"]}, "/url"),
    ({"url": "https://example.com/hook#frag", "events": ["submission.approved"]}, "/url"),
    ({"url": "https://example.com/hook", "events": []}, "/events"),
    ({"url": "https://example.com/hook", "events": ["submission.deleted"]}, "/events/0"),
])
def test_webhook_urls_and_events_are_validated(as_role, body, pointer):
    response = as_role("admin").post(HOOKS, json=body)

    assert response.status_code == 422, response.get_json()
    assert pointer in [e["pointer"] for e in response.get_json()["errors"]]


def test_without_a_task_queue_quotecheck_webhook_deliver_sends_what_is_due(make_app, receiver, submission_document):
    # Given an app that runs no background tasks: deliveries wait in the outbox after their commit
    from click.testing import CliRunner

    from service.cli import main

    app = make_app(TASK_QUEUE=None)
    admin, submitter = token_for(app, "ada", "admin"), token_for(app, "sam", "submitter")
    hook = _subscribe(admin, receiver.url, ["submission.submitted"])
    submitter.post("/api/v1/submissions", json=submission_document)
    assert [(d["state"], d["attempts"]) for d in _log(admin, hook)] == [("pending", 0)]

    # When cron runs `quotecheck webhook deliver`
    result = CliRunner().invoke(main, ["webhook", "deliver"], obj={"app": app})

    # Then the event is delivered, once
    assert result.exit_code == 0, result.output
    assert "1 attempted, 1 delivered" in result.output
    assert [r.event["type"] for r in receiver.received] == ["submission.submitted"]
    assert [d["state"] for d in _log(admin, hook)] == ["delivered"]


def test_celery_beat_drains_the_outbox_every_interval():
    from service.config import DEFAULTS
    from workers.celery_app import celery_settings

    schedule = celery_settings({**DEFAULTS, "WEBHOOK_DRAIN_INTERVAL_S": 15})["beat_schedule"]

    assert schedule == {"quotecheck-deliver-webhooks": {"task": "quotecheck.deliver_webhooks", "schedule": 15}}


def test_a_receiver_that_drips_its_answer_is_cut_off_at_the_attempt_timeout():
    import socket
    import threading
    import time

    from service.webhooks.delivery import send

    # Given a receiver that reads the POST and then answers one byte every 0.3 s, forever
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip() -> None:
        connection, _ = server.accept()
        with connection:
            connection.recv(65536)
            while not stop.is_set():
                try:
                    connection.sendall(b"H")
                except OSError:
                    return
                time.sleep(0.3)

    threading.Thread(target=drip, daemon=True).start()
    try:
        # When a webhook is sent there with a 1 s timeout (each byte arrives well inside it)
        started = time.monotonic()
        outcome = send(f"http://127.0.0.1:{server.getsockname()[1]}/hooks", {}, b"{}", 1.0)
        took = time.monotonic() - started
    finally:
        stop.set()
        server.close()
    # Then the attempt ends at its timeout as a failure that says so, not when the receiver stops
    assert outcome.status_code is None and outcome.error == "TimeoutError: no complete answer within 1 s"
    assert 1.0 <= took < 2.5

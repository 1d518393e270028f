"""JSON representations of stored objects, as the API returns them."""

from __future__ import annotations

from datetime import date
from typing import Any

from flask import url_for

from rules.evaluate import verdict_of
from service.approval import workflow
from service.approval.store import Snapshot
from service.identifiers import etag_of
from service.persistence.audit import timestamp
from service.persistence.models import AuditEvent, Decision, Submission, Waiver


def _links(submission_id: str) -> dict[str, str]:
    return {"self": url_for("submissions.get_submission", submission_id=submission_id),
            "revisions": url_for("submissions.create_revision", submission_id=submission_id),
            "decisions": url_for("reviews.create_decision", submission_id=submission_id),
            "audit": url_for("submissions.get_audit", submission_id=submission_id)}


def submission_summary(submission: Submission, effective_verdict: str | None) -> dict[str, Any]:
    """Returns the list-item representation of a submission, with its verdict after waivers (see store)."""
    return {"id": submission.id, "state": submission.state, "version": submission.version,
            "etag": etag_of(submission.version), "revision": submission.revision, "verdict": submission.verdict,
            "effective_verdict": effective_verdict,
            "vendor": submission.vendor, "quote_id": submission.quote_id, "submitter": submission.submitter,
            "created_at": timestamp(submission.created_at), "updated_at": timestamp(submission.updated_at),
            "links": {"self": url_for("submissions.get_submission", submission_id=submission.id)}}


def waiver_view(snap: Snapshot, waiver: Waiver, today: date) -> dict[str, Any]:
    """Returns a waiver with its state against the current evaluation (active, expired or stale)."""
    return {"id": waiver.id, "check_id": waiver.check_id, "state": snap.waiver_state(waiver, today),
            "result_digest": waiver.result_digest, "justification": waiver.justification,
            "expires": waiver.expires.isoformat() if waiver.expires else None, "author": waiver.author,
            "revision": waiver.revision, "created_at": timestamp(waiver.created_at)}


def decision_view(decision: Decision) -> dict[str, Any]:
    """Returns a decision."""
    return {"id": decision.id, "action": decision.action, "comment": decision.comment, "actor": decision.actor,
            "role": decision.actor_role, "revision": decision.revision, "created_at": timestamp(decision.created_at)}


def submission_view(snap: Snapshot, today: date, required_approvers: int) -> dict[str, Any]:
    """Returns the full representation: state, current evaluation with each check, waivers, decisions."""
    submission, record = snap.submission, snap.record.document
    active = snap.active_waivers(today)
    newest = {w.check_id: w for w in snap.waivers}
    checks = []
    for check in snap.checks:
        waiver = active.get(check["id"]) or newest.get(check["id"])
        checks.append({
            "id": check["id"], "title": check.get("title"), "status": check["status"],
            "effective_status": workflow.effective_status(check["status"], check["id"] in active),
            "basis": check["basis"], "message": check.get("message"), "remediation": check.get("remediation"),
            "evidence": check["evidence"], "assumptions": check.get("assumptions", []),
            "digest": snap.digests[check["id"]],
            "waiver": {"id": waiver.id, "state": snap.waiver_state(waiver, today)} if waiver else None,
        })
    blocking = workflow.approval_blockers(snap.checks, set(active))
    record_link = url_for("records.get_record", record_id=snap.record.id)
    view = {
        **submission_summary(submission, verdict_of([c["effective_status"] for c in checks])),
        "verdict": snap.evaluation.verdict,
        "evaluation": {
            "id": snap.evaluation.id, "revision": snap.evaluation.revision, "verdict": snap.evaluation.verdict,
            "evaluated_at": record.get("evaluated_at"), "engine": record.get("engine"),
            "policy": {k: record["policy"].get(k) for k in ("id", "version", "digest")},
            "submission_digest": record["submission"]["digest"], "record_id": snap.record.id,
            "summary": record.get("summary"), "checks": checks,
        },
        "waivers": [waiver_view(snap, w, today) for w in snap.waivers],
        "decisions": [decision_view(d) for d in snap.decisions],
        "approval": {"required_approvers": required_approvers, "approvers": snap.approvers(),
                     "ready": not blocking, "blocking": [p.as_dict() for p in blocking]},
        "final_record_id": snap.final_record.id if snap.final_record else None,
    }
    view["links"] = {**_links(submission.id), "record": record_link}
    if snap.final_record:
        view["links"]["final_record"] = url_for("records.get_record", record_id=snap.final_record.id)
    return view


def audit_event_view(event: AuditEvent) -> dict[str, Any]:
    """Returns an audit event with its hash link."""
    return {"id": event.id, "occurred_at": timestamp(event.occurred_at), "submission_id": event.submission_id,
            "action": event.action, "actor": event.actor, "actor_role": event.actor_role,
            "token_prefix": event.token_prefix, "input_digest": event.input_digest,
            "engine_version": event.engine_version, "policy_version": event.policy_version,
            "before_state": event.before_state, "after_state": event.after_state, "detail": event.detail,
            "prev_hash": event.prev_hash, "hash": event.hash}

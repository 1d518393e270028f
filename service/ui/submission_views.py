"""The submission page (checks failed first, with their figures, evidence, inputs and charts; the forms the
signed-in user may use; revisions, waivers, decisions, downloads) and its audit trail and revision diff pages."""

from __future__ import annotations

from typing import Any

from flask import Response, request

from service.app import history
from service.app.evaluation import required_approvers
from service.app.review import forms_for
from service.approval import store
from service.approval.representations import audit_event_view, submission_view
from service.errors import InvalidRequest
from service.exports.model import headline
from service.http import now
from service.persistence import audit
from service.persistence.db import get_db
from service.record.charts import chart_for, chart_title
from service.record.cover import lead
from service.ui.blueprint import bp
from service.ui.present import estimate_pairs, evidence_rows, inputs_of, sorted_checks
from service.ui.render import current_visitor, page, signed_in

# What a form that succeeded says on the page it returns to (``?done=``); nothing of the request is echoed.
NOTICES = {
    "submitted": "The quote was submitted and evaluated.",
    "revised": "The revised quote was submitted and evaluated.",
    "remedy-applied": "The remedy was applied: the revised quote was submitted and evaluated.",
    "waived": "The waiver was saved: the check counts as passed while the waiver is active.",
    "approve": "Your approval was recorded.",
    "reject": "The quote was rejected; its final record was issued.",
    "request-changes": "Changes were requested from the vendor.",
    "purchase-order": "The purchase order was linked: a new signed version of the record lists it.",
    "purchase-order-known": "That purchase order was linked already; nothing changed.",
}


def _check_view(check: dict[str, Any], shown: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    evidence = check.get("evidence") or {}
    chart = chart_for(check)
    return {**check, "effective_status": shown["effective_status"], "waiver": shown["waiver"],
            "deciding_figure": headline(check), "evidence_rows": evidence_rows(evidence),
            "threshold_rows": evidence_rows(check.get("thresholds") or {}), "inputs": inputs_of(record, evidence),
            "pairs": estimate_pairs(evidence), "chart": chart, "chart_title": chart_title(chart) if chart else ""}


def submission_page(submission_id: str, status: int = 200, error: Any = None,
                    retry: dict[str, Any] | None = None) -> Response:
    """Returns the page of a submission as it is now, with ``error`` (a QuotecheckError, or a message) on top and
    ``retry`` (the values of the form that failed) filled in again."""
    actor = current_visitor().actor
    today = now().date()
    with get_db().session() as session:
        snap = store.load_visible(session, actor, submission_id)
        view = submission_view(snap, today, required_approvers())
        forms = forms_for(actor, snap, today)
        revisions = history.revisions(session, submission_id)
        final = snap.final_record
        record = snap.record.document
    shown = {c["id"]: c for c in view["evaluation"]["checks"]}
    checks = [_check_view(c, shown[c["id"]], record) for c in sorted_checks(snap.checks)]
    waivers = {w["id"]: w for w in view["waivers"]}
    # The record PDF's lead (service/record/cover.py), from the same evaluation record: the buyer's figures first.
    lead_block = lead(record["verdict"], record["checks"], {c["id"]: headline(c) for c in record["checks"]})
    return page("submission.html", status=status, view=view, submission=snap.submission, checks=checks, lead=lead_block,
                forms=forms, revisions=revisions, waivers=waivers, record_id=snap.record.id,
                final=final, purchase_orders=(final.document.get("purchase_orders") or []) if final else [],
                notice=NOTICES.get(request.args.get("done", "")), error=error, retry=retry or {})


@bp.get("/ui/submissions/<submission_id>")
@signed_in
def submission(submission_id: str) -> Response:
    """A submission: its verdicts, each check (failed and warned first), the forms the user may use, revisions."""
    return submission_page(submission_id)


@bp.get("/ui/submissions/<submission_id>/audit")
@signed_in
def audit_trail(submission_id: str) -> Response:
    """The audit trail of a submission: every event, oldest first, with who, when, the states and the hash chain."""
    actor = current_visitor().actor
    with get_db().session() as session:
        snap = store.load_visible(session, actor, submission_id)
        events = [audit_event_view(e) for e in audit.events_of(session, submission_id)]
    return page("audit.html", submission=snap.submission, events=events)


def _revision_number(name: str, default: int) -> int:
    raw = request.args.get(name, "")
    if not raw:
        return default
    if not raw.isdigit() or not 0 < int(raw) < 1_000_000:
        raise InvalidRequest(f"{name} must be a revision number; found {raw[:20]!r}")
    return int(raw)


@bp.get("/ui/submissions/<submission_id>/diff")
@signed_in
def revision_diff(submission_id: str) -> Response:
    """The checks whose status or evidence differs between two revisions (``from`` and ``to``, by number)."""
    actor = current_visitor().actor
    with get_db().session() as session:
        snap = store.load_visible(session, actor, submission_id)
        revisions = history.revisions(session, submission_id)
        latest = snap.submission.revision
        before = _revision_number("from", max(1, latest - 1))
        after = _revision_number("to", latest)
        diff = history.check_diff(session, submission_id, before, after)
    return page("diff.html", submission=snap.submission, revisions=revisions, diff=diff)

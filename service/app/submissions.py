"""Reading a submission for the tools and people that review it: its checks (JSON, or an export for SARIF,
JUnit XML or CSV) and its audit trail. The API and the reviewer pages' downloads both read them here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from sqlalchemy import or_
from sqlmodel import Session, col, func, select

from rules.evaluate import verdict_of
from service.accounts.actors import Actor
from service.accounts.visibility import ensure_visible, own_submissions
from service.app.evaluation import required_approvers
from service.approval import store, verdicts, workflow
from service.approval.representations import audit_event_view, submission_summary, submission_view
from service.approval.store import Snapshot
from service.errors import NotFound
from service.exports.model import Artifact, Export
from service.persistence import audit
from service.persistence.audit import timestamp
from service.persistence.db import get_db
from service.persistence.models import Submission, Waiver

# The document the checks point into: a stored submission has no file name of its own.
ARTIFACT_URI = "submission.json"
NEWEST_FIRST = (col(Submission.created_at).desc(), col(Submission.id))


@dataclass(frozen=True)
class Checks:
    """The checks of a submission's current evaluation: as JSON (``listing``) or as an export (``export``)."""

    submission_id: str
    revision: int
    listing: dict[str, Any] | None = None
    export: Export | None = None


def _waiver(waiver: Waiver) -> dict[str, Any]:
    return {"id": waiver.id, "justification": waiver.justification, "author": waiver.author,
            "expires": waiver.expires.isoformat() if waiver.expires else None,
            "created_at": timestamp(waiver.created_at)}


def submission_export(snap: Snapshot, document: dict[str, Any], today: date) -> Export:
    """Returns the export of a submission's current evaluation: its checks after the waivers valid ``today``."""
    active = snap.active_waivers(today)
    checks = []
    for check in snap.checks:
        waiver = active.get(check["id"])
        checks.append({**check, "effective_status": workflow.effective_status(check["status"], waiver is not None),
                       "digest": snap.digests[check["id"]], "waiver": _waiver(waiver) if waiver else None})
    submission, record = snap.submission, snap.record.document
    digest = record["submission"]["digest"]
    artifact = Artifact(
        uri=ARTIFACT_URI, document=document, sha256=digest.removeprefix("sha256:"),
        description=f"the submitted document of revision {submission.revision} of submission {submission.id}, as "
                    "RFC 8785 canonical JSON (its SHA-256 is the record's submission digest)")
    subject = {"id": submission.id, "revision": submission.revision, "state": submission.state,
               "vendor": submission.vendor, "quote_id": submission.quote_id}
    return Export(record=record, checks=checks, artifact=artifact,
                  verdict_after_waivers=verdict_of([c["effective_status"] for c in checks]), subject=subject)


def read_checks(actor: Actor, submission_id: str, as_json: bool, today: date) -> Checks:
    """Returns the checks of the current evaluation of a submission ``actor`` may see, after today's waivers."""
    with get_db().session() as session:
        snap = store.load_visible(session, actor, submission_id)
        if as_json:
            view = submission_view(snap, today, required_approvers())
            listing = {"submission_id": submission_id, "revision": snap.submission.revision,
                       "verdict": view["verdict"], "effective_verdict": view["effective_verdict"],
                       "record_id": snap.record.id, "checks": view["evaluation"]["checks"]}
            return Checks(submission_id, snap.submission.revision, listing=listing)
        export = submission_export(snap, store.current_document(session, submission_id), today)
        return Checks(submission_id, snap.submission.revision, export=export)


def audit_trail(actor: Actor, submission_id: str) -> list[dict[str, Any]]:
    """Returns the audit events of a submission ``actor`` may see, oldest first, as the API represents them."""
    with get_db().session() as session:
        if session.get(Submission, submission_id) is None:
            raise NotFound(f"there is no submission {submission_id!r}")
        ensure_visible(session, actor, submission_id)
        return [audit_event_view(e) for e in audit.events_of(session, submission_id)]


def read_submission(actor: Actor, submission_id: str, today: date) -> dict[str, Any]:
    """Returns the representation of a submission ``actor`` may see: state, current evaluation, waivers, decisions."""
    with get_db().session() as session:
        return submission_view(store.load_visible(session, actor, submission_id), today, required_approvers())


def list_submissions(actor: Actor, filters: dict[str, Any], today: date, page: int,
                     per_page: int) -> tuple[int, list[dict[str, Any]]]:
    """Returns how many submissions ``actor`` may see pass ``filters`` (``state``, ``verdict``,
    ``effective_verdict``, ``vendor``: None for any) and the summaries of page ``page`` of them, newest first."""
    state, verdict, vendor, effective = (filters.get(name) for name in ("state", "verdict", "vendor",
                                                                        "effective_verdict"))
    conditions = own_submissions(actor)
    if state:
        conditions.append(col(Submission.state) == state)
    if verdict:
        conditions.append(col(Submission.verdict) == verdict)
    if vendor:
        conditions.append(func.lower(col(Submission.vendor)).contains(vendor.lower(), autoescape=True))
    with get_db().session() as session:
        if effective is None:
            total = session.exec(select(func.count()).select_from(Submission).where(*conditions)).one()
            rows = session.exec(select(Submission).where(*conditions).order_by(*NEWEST_FIRST)
                                .offset((page - 1) * per_page).limit(per_page)).all()
        else:
            total, rows = _by_effective_verdict(session, conditions, effective, today, page, per_page)
        after_waivers = verdicts.effective_verdicts(session, [row.id for row in rows], today)
        return total, [submission_summary(row, after_waivers.get(row.id, row.verdict)) for row in rows]


def _by_effective_verdict(session: Session, conditions: list, effective: str, today: date, page: int,
                          per_page: int) -> tuple[int, list[Submission]]:
    """Returns the total and the page of submissions whose verdict after waivers is ``effective``.

    The verdict after waivers depends on today's date (waivers expire), so it is not stored: waivers only
    ever count checks as passed, so a submission without an unexpired waiver keeps its verdict, and only
    those with one are re-decided (verdicts.effective_verdicts). Candidates are read as ids, newest first.
    """
    waived = verdicts.unexpired_waivers(today)
    candidates = session.exec(select(Submission.id, Submission.verdict)
                              .where(*conditions, or_(col(Submission.verdict) == effective,
                                                      col(Submission.id).in_(waived)))
                              .order_by(*NEWEST_FIRST)).all()
    redecided = verdicts.effective_verdicts(session, select(Submission.id).where(*conditions,
                                                                              col(Submission.id).in_(waived)), today)
    matching = [submission_id for submission_id, raw in candidates if redecided.get(submission_id, raw) == effective]
    page_ids = matching[(page - 1) * per_page:page * per_page]
    rows = {row.id: row for row in session.exec(select(Submission).where(col(Submission.id).in_(page_ids)))}
    return len(matching), [rows[submission_id] for submission_id in page_ids]

"""Submissions: create (evaluated at once), list, read, revise, and read the audit trail."""

from __future__ import annotations

import re
from datetime import date
from functools import partial
from typing import Any

from flask import Blueprint, Response, request, url_for
from sqlalchemy import or_
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from rules.evaluate import check_counts, validate_submission
from service.accounts.auth import current_actor, require
from service.accounts.visibility import own_submissions
from service.app.evaluation import evaluate_submission, required_approvers
from service.app.responses import AUDIT_QUERY, LIST_FORMAT, LIST_FORMATS, audit_response
from service.app.submissions import audit_trail
from service.approval import store, verdicts
from service.approval.representations import submission_summary, submission_view
from service.approval.workflow import State
from service.errors import IdempotencyKeyReused, InvalidRequest, ParameterProblem
from service.exports import tables
from service.http import expected_version, json_response, negotiated_format, now, text_response
from service.identifiers import body_digest
from service.inputs import Body, Query, accepts
from service.openapi import operation
from service.persistence.db import get_db
from service.persistence.models import Submission

bp = Blueprint("submissions", __name__, url_prefix="/api/v1/submissions")

VERDICTS = ("pass", "warn", "incomplete", "fail")
_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
NEWEST_FIRST = (col(Submission.created_at).desc(), col(Submission.id))
# Pages are numbered from 1; beyond this the offset would not fit a database integer on every backend.
MAX_PAGE = 1_000_000
FILTERS = ("state", "verdict", "effective_verdict", "vendor")

# The body of a submission or a revision: the contract schema, checked as the engine checks it.
SUBMISSION_BODY = Body("SubmissionDocument", "submission", validator=partial(validate_submission, counted=True),
                       precheck=check_counts)

LIST_QUERY = Query({"type": "object", "properties": {
    "state": {"description": "only submissions in this state", "enum": list(State)},
    "verdict": {"description": "only submissions whose current evaluation has this verdict", "enum": list(VERDICTS)},
    "effective_verdict": {"description": "only submissions whose verdict after waivers is this: a waiver that binds "
                                         "to its check's current result and has not expired (today) counts the "
                                         "check as passed", "enum": list(VERDICTS)},
    "vendor": {"description": "only vendors whose name contains this text (case-insensitive)", "type": "string",
               "maxLength": 200},
    "page": {"description": "page number, from 1", "type": "integer", "minimum": 1, "maximum": MAX_PAGE,
             "default": 1},
    "per_page": {"description": "items per page", "type": "integer", "minimum": 1},
    "format": LIST_FORMAT,
}}, configured={"per_page": {"maximum": "MAX_PAGE_SIZE", "default": "DEFAULT_PAGE_SIZE"}})


def _created(view: dict, status: int, **extra_headers: str) -> Response:
    headers = {"Location": view["links"]["self"], "ETag": view["etag"], **extra_headers}
    return json_response(view, status, headers)


def _replay(key: str, digest: str, stored_digest: str, response: dict) -> Response:
    if stored_digest != digest:
        raise IdempotencyKeyReused(f"Idempotency-Key {key!r} was used for a different body ({stored_digest}); "
                                   "use a new key for a new submission")
    return _created(response, 200, **{"Idempotent-Replayed": "true"})


@bp.post("")
@operation(tag="submissions", idempotency_key=True,
           responses={201: ("Stored and evaluated", "Submission"),
                      200: ("A retry with the same Idempotency-Key and body: the first response", "Submission")},
           response_headers={201: ("Location", "ETag"), 200: ("Location", "ETag", "Idempotent-Replayed")})
@require("submit")
@accepts(SUBMISSION_BODY)
def create_submission(body: dict[str, Any]) -> Response:
    """Submit a quote with its workload and measurements; returns its evaluation.

    The body is a submission document (schemas/submission.schema.json). It is validated, evaluated at
    once, and stored with the evaluation record; the response carries every check with its evidence.
    """
    actor = current_actor()
    key = request.headers.get("Idempotency-Key")
    if key is not None and not _IDEMPOTENCY_KEY.match(key):
        raise InvalidRequest("Idempotency-Key must be 1-255 visible ASCII characters",
                             [ParameterProblem("", "1-255 visible ASCII characters", "Idempotency-Key")])
    db = get_db()
    # The body's digest is needed before the evaluation only to answer a retry; otherwise the evaluation's is used.
    digest = body_digest(body) if key is not None else None
    if key is not None:
        # One SELECT: it needs no transaction around it.
        with db.autocommit_session() as session:
            seen = store.find_idempotent(session, actor.token_id, key)
            if seen is not None:
                return _replay(key, digest, seen.request_digest, seen.response)
    # Evaluated outside any transaction: nothing is locked while the engine runs.
    moment = now()
    record = evaluate_submission(body, moment)
    views: list[dict[str, Any]] = []

    def respond(session: Session, snap: store.Snapshot) -> dict[str, Any]:
        # The response is built from the rows just written (not read back) and stored with the key before the
        # audit chain is locked: a concurrent retry with the same key fails on the key's unique row, not later.
        view = submission_view(snap, moment.date(), required_approvers())
        if key is not None:
            store.remember_idempotency_key(session, actor, key, record["submission"]["digest"], snap.submission.id,
                                           view, moment)
        return view

    try:
        with db.session() as session:
            store.create_submission(session, actor, body, record, moment,
                                    before_audit=lambda snap: views.append(respond(session, snap)))
            session.commit()
    except IntegrityError:
        if key is None:
            raise
        # Another request with the same key committed first: answer as its retry would be answered.
        with db.autocommit_session() as session:
            seen = store.find_idempotent(session, actor.token_id, key)
            if seen is None:
                raise
            return _replay(key, digest, seen.request_digest, seen.response)
    return _created(views[0], 201)


@bp.get("")
@operation(tag="submissions", responses={200: ("A page of submissions, newest first", "SubmissionPage")},
           alternatives={200: {"text/csv": "Csv"}}, response_headers={200: ("Link",)})
@require("read")
@accepts(LIST_QUERY)
def list_submissions(query: dict[str, Any]) -> Response:
    """List submissions, newest first, filtered by state, verdict, verdict after waivers or vendor.

    Each item carries `verdict` (the current evaluation's) and `effective_verdict` (after the waivers valid
    today, as in the submission's own representation). Filters combine; `total` and the page links count
    the submissions that pass all of them. A token of scope `own` lists only the submissions of its user.
    """
    state, verdict, vendor = query["state"], query["verdict"], query["vendor"]
    effective, page, per_page = query["effective_verdict"], query["page"], query["per_page"]
    conditions = own_submissions(current_actor())
    if state:
        conditions.append(col(Submission.state) == state)
    if verdict:
        conditions.append(col(Submission.verdict) == verdict)
    if vendor:
        conditions.append(func.lower(col(Submission.vendor)).contains(vendor.lower(), autoescape=True))
    today = now().date()
    with get_db().session() as session:
        if effective is None:
            total = session.exec(select(func.count()).select_from(Submission).where(*conditions)).one()
            rows = session.exec(select(Submission).where(*conditions).order_by(*NEWEST_FIRST)
                                .offset((page - 1) * per_page).limit(per_page)).all()
        else:
            total, rows = _by_effective_verdict(session, conditions, effective, today, page, per_page)
        after_waivers = verdicts.effective_verdicts(session, [row.id for row in rows], today)
        items = [submission_summary(row, after_waivers.get(row.id, row.verdict)) for row in rows]
    links = {"self": _page_url(query, page)}
    if page * per_page < total:
        links["next"] = _page_url(query, page + 1)
    if page > 1:
        links["prev"] = _page_url(query, page - 1)
    if negotiated_format(query["format"], LIST_FORMATS) == "csv":
        link = ", ".join(f'<{href}>; rel="{rel}"' for rel, href in links.items())
        return text_response(tables.submissions_csv(items), LIST_FORMATS["csv"], {"Link": link})
    return json_response({"items": items, "page": page, "per_page": per_page, "total": total, "links": links})


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


def _page_url(query: dict[str, Any], page: int) -> str:
    filters = {name: query[name] for name in (*FILTERS, "format") if query[name] is not None}
    return url_for("submissions.list_submissions", **filters, page=page, per_page=query["per_page"])


@bp.get("/<submission_id>")
@operation(tag="submissions", errors=(404,), responses={200: ("The submission", "Submission")},
           response_headers={200: ("ETag",)})
@require("read")
def get_submission(submission_id: str) -> Response:
    """Read a submission: state, current evaluation with every check, waivers, decisions and its ETag."""
    moment = now()
    with get_db().session() as session:
        view = submission_view(store.load_visible(session, current_actor(), submission_id), moment.date(),
                               required_approvers())
    return json_response(view, 200, {"ETag": view["etag"]})


@bp.post("/<submission_id>/revisions")
@operation(tag="submissions", if_match=True, errors=(404, 409),
           responses={201: ("Re-evaluated; `diff` lists the checks whose status or evidence changed", "Submission")},
           response_headers={201: ("Location", "ETag")})
@require("revise")
@accepts(SUBMISSION_BODY)
def create_revision(submission_id: str, body: dict[str, Any]) -> Response:
    """Submit the vendor's revised quote; it is re-evaluated and compared with the previous revision.

    A check whose evidence changes gets a new result digest, so a waiver of its old result no longer
    applies (it shows as stale and the check is open again).
    """
    actor = current_actor()
    with get_db().session() as session:
        snap = store.load_visible(session, actor, submission_id)
        expected_version(snap.submission.version)
        moment = now()
        record = evaluate_submission(body, moment)
        diff = store.revise(session, actor, snap, body, record, moment)
        view = submission_view(store.load(session, submission_id), moment.date(), required_approvers())
        session.commit()
    return _created({**view, "diff": diff}, 201)


@bp.get("/<submission_id>/audit")
@operation(tag="submissions", errors=(404,), responses={200: ("The submission's events, oldest first", "AuditLog")},
           alternatives={200: {"text/csv": "Csv"}})
@require("read")
@accepts(AUDIT_QUERY)
def get_audit(submission_id: str, query: dict[str, Any]) -> Response:
    """Read the audit trail of a submission: every event with its hash and its predecessor's.

    As CSV (`format=csv` or `Accept: text/csv`) one row per event, its `detail` as JSON text.
    """
    return audit_response(submission_id, audit_trail(current_actor(), submission_id), query["format"])

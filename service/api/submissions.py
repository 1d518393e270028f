"""Submissions: create (evaluated at once), list, read, revise, and read the audit trail."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from flask import Blueprint, Response, request, url_for

from rules.evaluate import check_counts, validate_submission
from service.accounts.auth import current_actor, require
from service.app import intake
from service.app import submissions as reading
from service.app.responses import AUDIT_QUERY, LIST_FORMAT, LIST_FORMATS, audit_response
from service.app.submissions import audit_trail, read_submission
from service.errors import IdempotencyKeyReused, InvalidRequest, ParameterProblem
from service.exports import tables
from service.http import expected_version, json_response, negotiated_format, now, text_response
from service.identifiers import body_digest
from service.inputs import Body, Query, accepts
from service.openapi import operation

bp = Blueprint("submissions", __name__, url_prefix="/api/v1/submissions")

VERDICTS = ("pass", "warn", "incomplete", "fail")
_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
# Pages are numbered from 1; beyond this the offset would not fit a database integer on every backend.
MAX_PAGE = 1_000_000
FILTERS = ("state", "verdict", "effective_verdict", "vendor")

# The body of a submission or a revision: the contract schema, checked as the engine checks it.
SUBMISSION_BODY = Body("SubmissionDocument", "submission", validator=partial(validate_submission, counted=True),
                       precheck=check_counts)

LIST_QUERY = Query({"type": "object", "properties": {
    "state": {"description": "only submissions in this state", "enum": list(intake.STATES)},
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


def _replay(key: str, digest: str | None, stored_digest: str, response: dict) -> Response:
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
    # The body's digest is needed before the evaluation only to answer a retry; otherwise the evaluation's is used.
    digest = body_digest(body) if key is not None else None
    if key is not None:
        seen = intake.remembered(actor, key)
        if seen is not None:
            return _replay(key, digest, seen.request_digest, seen.response)
    answered = intake.submit(actor, body, now(), key)
    if isinstance(answered, intake.Remembered):
        return _replay(key, digest, answered.request_digest, answered.response)
    return _created(answered, 201)


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
    page, per_page = query["page"], query["per_page"]
    filters = {name: query[name] for name in FILTERS}
    total, items = reading.list_submissions(current_actor(), filters, now().date(), page, per_page)
    links = {"self": _page_url(query, page)}
    if page * per_page < total:
        links["next"] = _page_url(query, page + 1)
    if page > 1:
        links["prev"] = _page_url(query, page - 1)
    if negotiated_format(query["format"], LIST_FORMATS) == "csv":
        link = ", ".join(f'<{href}>; rel="{rel}"' for rel, href in links.items())
        return text_response(tables.submissions_csv(items), LIST_FORMATS["csv"], {"Link": link})
    return json_response({"items": items, "page": page, "per_page": per_page, "total": total, "links": links})


def _page_url(query: dict[str, Any], page: int) -> str:
    filters = {name: query[name] for name in (*FILTERS, "format") if query[name] is not None}
    return url_for("submissions.list_submissions", **filters, page=page, per_page=query["per_page"])


@bp.get("/<submission_id>")
@operation(tag="submissions", errors=(404,), responses={200: ("The submission", "Submission")},
           response_headers={200: ("ETag",)})
@require("read")
def get_submission(submission_id: str) -> Response:
    """Read a submission: state, current evaluation with every check, waivers, decisions and its ETag."""
    view = read_submission(current_actor(), submission_id, now().date())
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
    view, diff = intake.revise(current_actor(), submission_id, body, now,
                               lambda snap: expected_version(snap.submission.version))
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

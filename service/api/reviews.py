"""Reviews: waivers of check results and the decisions approve, reject and request-changes."""

from __future__ import annotations

from datetime import date

from flask import Blueprint, Response

from rules.errors import Problem
from service import store
from service.api_schemas import DECISION_REQUEST, WAIVER_REQUEST
from service.auth import authorize, current_actor, require
from service.db import get_db
from service.errors import InvalidRequest
from service.evaluation import required_approvers
from service.http import canonical_digest, expected_version, json_body, json_response, now, validate_body
from service.openapi import operation
from service.record import signing_keys
from service.representations import decision_view, submission_view, waiver_view
from service.workflow import MIN_JUSTIFICATION

bp = Blueprint("reviews", __name__, url_prefix="/api/v1/submissions")


def _parse_waiver(body: dict, today: date) -> tuple[str, date | None]:
    validate_body(body, WAIVER_REQUEST, "waiver")
    problems = []
    justification = body["justification"].strip()
    if len(justification) < MIN_JUSTIFICATION:
        problems.append(Problem("/justification", f"must say why in at least {MIN_JUSTIFICATION} characters, "
                                                  f"found {len(justification)}"))
    expires = None
    if body.get("expires") is not None:
        try:
            expires = date.fromisoformat(body["expires"])
        except ValueError:
            problems.append(Problem("/expires", f"{body['expires']!r} is not an ISO date (YYYY-MM-DD)"))
        else:
            if len(body["expires"]) != 10:
                problems.append(Problem("/expires", f"{body['expires']!r} is not an ISO date (YYYY-MM-DD)"))
            elif expires < today:
                problems.append(Problem("/expires", f"{expires.isoformat()} is in the past (today is "
                                                    f"{today.isoformat()})"))
    if problems:
        raise InvalidRequest("the waiver is not acceptable", problems)
    return justification, expires


@bp.post("/<submission_id>/checks/<check_id>/waivers")
@operation(tag="reviews", request="WaiverRequest", if_match=True, errors=(404, 409),
           responses={201: ("Stored; the submission with the new waiver (`waiver`) and its new ETag", "Submission")},
           response_headers={201: ("Location", "ETag")})
@require("waive")
def create_waiver(submission_id: str, check_id: str) -> Response:
    """Waive the current result of a failed, warned or incomplete check, with a justification.

    The waiver binds to the digest of the result's status and evidence: when a revision changes that
    evidence the waiver goes stale and the check blocks approval again. An expired waiver counts for
    nothing.
    """
    actor = current_actor()
    moment = now()
    with get_db().session() as session:
        store.ensure_visible(session, actor, submission_id)
        snap = store.load(session, submission_id)
        expected_version(snap.submission.version)
        body = json_body()
        justification, expires = _parse_waiver(body, moment.date())
        waiver = store.waive(session, actor, snap, check_id, justification, expires, canonical_digest(body), moment)
        snap = store.load(session, submission_id)
        view = submission_view(snap, moment.date(), required_approvers())
        view["waiver"] = waiver_view(snap, waiver, moment.date())
        session.commit()
    return json_response(view, 201, {"Location": view["links"]["self"], "ETag": view["etag"]})


@bp.post("/<submission_id>/decisions")
@operation(tag="reviews", request="DecisionRequest", if_match=True, errors=(404, 409),
           responses={201: ("Recorded; the submission with the decision (`decision`) and its new ETag", "Submission")},
           response_headers={201: ("Location", "ETag")})
@require("decide")
def create_decision(submission_id: str) -> Response:
    """Approve, reject, or request changes to the current revision.

    approve needs the approver or admin role, every failed or incomplete check covered by a valid
    waiver, and an approver who neither submitted the quote nor waived a check it relies on (four
    eyes). The submission becomes approved once the policy's number of distinct approvers approved;
    its final record is then issued and signed (`final_record_id`, `GET /api/v1/records/{id}.json`).
    reject and request-changes need reviewer, approver or admin. Approved and rejected are final.
    """
    actor = current_actor()
    moment = now()
    with get_db().session() as session:
        store.ensure_visible(session, actor, submission_id)
        snap = store.load(session, submission_id)
        expected_version(snap.submission.version)
        body = json_body()
        validate_body(body, DECISION_REQUEST, "decision")
        authorize(actor, body["action"])
        decision = store.decide(session, actor, snap, body["action"], body.get("comment"), canonical_digest(body),
                                required_approvers(), moment, signing_keys())
        view = submission_view(store.load(session, submission_id), moment.date(), required_approvers())
        view["decision"] = decision_view(decision)
        session.commit()
    return json_response(view, 201, {"Location": view["links"]["self"], "ETag": view["etag"]})

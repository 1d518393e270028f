"""Reviews: waivers of check results and the decisions approve, reject and request-changes."""

from __future__ import annotations

from datetime import date
from typing import Any

from flask import Blueprint, Response
from sqlmodel import Session

from rules.errors import Problem
from service.accounts.auth import authorize, current_actor, require
from service.api_schemas.components import DECISION_REQUEST, WAIVER_REQUEST
from service.app import review
from service.app.evaluation import required_approvers
from service.approval import store
from service.approval.representations import decision_view, submission_view, waiver_view
from service.approval.store import Snapshot
from service.approval.workflow import MIN_JUSTIFICATION
from service.http import expected_version, json_response, now
from service.identifiers import body_digest
from service.inputs import Body, accepts, refuse
from service.openapi import operation
from service.persistence.db import get_db
from service.persistence.models import Decision
from service.record import signing_keys

bp = Blueprint("reviews", __name__, url_prefix="/api/v1/submissions")


def _check_waiver(body: dict[str, Any]) -> None:
    """Raises InvalidRequest for a justification too short to say why, or an expiry that is no date or is past."""
    problems = []
    justification = body["justification"].strip()
    if len(justification) < MIN_JUSTIFICATION:
        problems.append(Problem("/justification", f"must say why in at least {MIN_JUSTIFICATION} characters, "
                                                  f"found {len(justification)}"))
    expires = body.get("expires")
    if expires is not None:
        today = now().date()
        try:
            day = date.fromisoformat(expires)
        except ValueError:
            day = None
        if day is None or len(expires) != 10:
            problems.append(Problem("/expires", f"{expires!r} is not an ISO date (YYYY-MM-DD)"))
        elif day < today:
            problems.append(Problem("/expires", f"{day.isoformat()} is in the past (today is {today.isoformat()})"))
    refuse("waiver", problems)


WAIVER_BODY = Body("WaiverRequest", "waiver", WAIVER_REQUEST, check=_check_waiver)
DECISION_BODY = Body("DecisionRequest", "decision", DECISION_REQUEST)


@bp.post("/<submission_id>/checks/<check_id>/waivers")
@operation(tag="reviews", if_match=True, errors=(404, 409),
           responses={201: ("Stored; the submission with the new waiver (`waiver`) and its new ETag", "Submission")},
           response_headers={201: ("Location", "ETag")})
@require("waive")
@accepts(WAIVER_BODY)
def create_waiver(submission_id: str, check_id: str, body: dict[str, Any]) -> Response:
    """Waive the current result of a failed, warned or incomplete check, with a justification.

    The waiver binds to the digest of the result's status and evidence: when a revision changes that
    evidence the waiver goes stale and the check blocks approval again. An expired waiver counts for
    nothing.
    """
    actor = current_actor()
    moment = now()
    justification = body["justification"].strip()
    expires = date.fromisoformat(body["expires"]) if body.get("expires") is not None else None
    with get_db().session() as session:
        snap = store.load_visible(session, actor, submission_id)
        expected_version(snap.submission.version)
        waiver = store.waive(session, actor, snap, check_id, justification, expires, body_digest(body), moment)
        snap = store.load(session, submission_id)
        view = submission_view(snap, moment.date(), required_approvers())
        view["waiver"] = waiver_view(snap, waiver, moment.date())
        session.commit()
    return json_response(view, 201, {"Location": view["links"]["self"], "ETag": view["etag"]})


@bp.post("/<submission_id>/decisions")
@operation(tag="reviews", if_match=True, errors=(404, 409),
           responses={201: ("Recorded; the submission with the decision (`decision`) and its new ETag", "Submission")},
           response_headers={201: ("Location", "ETag")})
@require("decide")
@accepts(DECISION_BODY)
def create_decision(submission_id: str, body: dict[str, Any]) -> Response:
    """Approve, reject, or request changes to the current revision.

    approve needs the approver or admin role, every failed or incomplete check covered by a valid
    waiver, and an approver who neither submitted the quote nor waived a check it relies on (four
    eyes). The submission becomes approved once the policy's number of distinct approvers approved;
    its final record is then issued and signed (`final_record_id`, `GET /api/v1/records/{id}.json`).
    reject and request-changes need reviewer, approver or admin. Approved and rejected are final.
    """
    actor = current_actor()
    moment = now()

    def check(snap: Snapshot) -> None:
        expected_version(snap.submission.version)
        authorize(actor, body["action"])

    def respond(session: Session, decision: Decision) -> dict[str, Any]:
        view = submission_view(store.load(session, submission_id), moment.date(), required_approvers())
        view["decision"] = decision_view(decision)
        return view

    view = review.decide(actor, submission_id, body["action"], body.get("comment"), body_digest(body), moment,
                         signing_keys(), check, respond)
    return json_response(view, 201, {"Location": view["links"]["self"], "ETag": view["etag"]})

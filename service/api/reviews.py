"""Reviews: waivers of check results and the decisions approve, reject and request-changes."""

from __future__ import annotations

from datetime import date
from typing import Any

from flask import Blueprint, Response

from service.accounts.auth import authorize, current_actor, require
from service.api_schemas.bodies import DECISION_BODY, WAIVER_BODY
from service.app import review
from service.http import expected_version, json_response, now
from service.identifiers import body_digest
from service.inputs import accepts
from service.openapi import operation
from service.record import signing_keys

bp = Blueprint("reviews", __name__, url_prefix="/api/v1/submissions")


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

    view = review.waive(actor, submission_id, check_id, justification, expires, body_digest(body), moment,
                        lambda snap: expected_version(snap.submission.version),
                        review.with_waiver(submission_id, moment.date()))
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

    def check(snap: Any) -> None:
        expected_version(snap.submission.version)
        authorize(actor, body["action"])

    view = review.decide(actor, submission_id, body["action"], body.get("comment"), body_digest(body), moment,
                         signing_keys(), check, review.with_decision(submission_id, moment.date()))
    return json_response(view, 201, {"Location": view["links"]["self"], "ETag": view["etag"]})

"""Remedies of a submission: the remediation search in a background task, and a revision made from one remedy."""

from __future__ import annotations

from flask import Blueprint, Response

from service.accounts.auth import current_actor, require
from service.app import searches
from service.app.responses import accepted
from service.http import expected_version, json_response, now
from service.openapi import operation

bp = Blueprint("remedies", __name__, url_prefix="/api/v1/submissions")


@bp.get("/<submission_id>/remedies")
@operation(tag="submissions", errors=(404, 429, 503),
           responses={200: ("The remedies of the current revision, best first", "Remedies"),
                      202: ("Accepted: the task that searches them (`Location`); poll it, or this URL again", "Task")},
           response_headers={202: ("Location",)})
@require("read")
def get_remedies(submission_id: str) -> Response:
    """Read the remedies of a submission: the smallest changes that make every failing and warning check pass.

    Changes to the quote (node count, GPU or server model from the catalogue, racks and PDUs, storage
    bandwidth, compute NICs, host RAM) and to the workload (sharding, the layout search's best layout,
    micro-batch, recompute, checkpoint interval) are proposed from the evidence of the checks that fail or
    warn, combined, and each combination is evaluated in full, within the policy's budget
    (`remedies.max_evaluations`). Each remedy is an RFC 7396 merge patch of the current revision with its
    verdict, `added_cost` (null when the quote does not price a change; `unpriced` says what), expected
    `days` and its `changes` in words; they are ranked by added cost, then days (`ranked_by`).

    The search runs in a background task: while it runs the answer is 202 with the task (`Location`, one
    step per evaluation); once it has finished, 200 with the result. The same document, engine version and
    policy give the same task, so asking again is cheap. A submission whose checks all pass has no remedies
    (an empty list). A revision is made from a remedy with `POST .../remedies/{remedy}/revision`.
    """
    result, task_id = searches.request_remedies(current_actor(), submission_id, now())
    return json_response(result) if task_id is None else accepted(task_id)


@bp.post("/<submission_id>/remedies/<remedy>/revision")
@operation(tag="submissions", if_match=True, errors=(404, 409, 422),
           responses={201: ("The revision the remedy makes, evaluated; `diff` lists the checks that changed and "
                            "`remedy` names it", "Submission")},
           response_headers={201: ("Location", "ETag")})
@require("revise")
def revise_from_remedy(submission_id: str, remedy: str) -> Response:
    """Revise a submission by one of its remedies: the current document with the remedy's merge patch applied.

    `{remedy}` is a remedy's `id` (`r-…`) or its index in the `remedies` list of
    `GET .../remedies` (0 is the best). The remedies are those of the current revision (If-Match names
    it): the finished search's, or searched now when none has finished. The new revision is
    `merge_patch(current document, remedy.patch)` (RFC 7396), evaluated like any revision; the audit
    event that records it names the remedy and its changes. Only the original submitter (or an admin) may
    revise.
    """
    view, diff, chosen = searches.revise_from_remedy(current_actor(), submission_id, remedy, now,
                                                     lambda snap: expected_version(snap.submission.version))
    body = {**view, "diff": diff, "remedy": chosen}
    return json_response(body, 201, {"Location": view["links"]["self"], "ETag": view["etag"]})

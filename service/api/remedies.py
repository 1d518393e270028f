"""Remedies of a submission: the remediation search in a background task, and a revision made from one remedy."""

from __future__ import annotations

import json
import re
from typing import Any

from flask import Blueprint, Response
from sqlmodel import Session

from rules.compare import merge_patch
from rules.evaluate import engine_version, submission_digest, validate_submission
from rules.remedies import remedies_key
from service.accounts.auth import current_actor, require
from service.accounts.visibility import ensure_visible
from service.app import evaluation, tasks
from service.app.evaluation import evaluate_submission, policy, required_approvers
from service.app.responses import accepted
from service.approval import store
from service.approval.representations import submission_view
from service.errors import NotFound
from service.http import expected_version, json_response, now
from service.openapi import operation
from service.persistence.audit import Actor
from service.persistence.db import get_db
from service.tasks import task_runs

bp = Blueprint("remedies", __name__, url_prefix="/api/v1/submissions")

_INDEX = re.compile(r"^[0-9]{1,6}$")


def _key(actor: Actor, document: dict[str, Any]) -> tuple[str, bool]:
    return tasks.key_for(actor, remedies_key(document, engine_version(), policy().identity()["digest"]))


def _finished(session: Session, key: str) -> dict[str, Any] | None:
    row = task_runs.find_by_key(session, task_runs.REMEDIES, key)
    return row.result if row is not None and row.state == task_runs.SUCCESS and row.result is not None else None


@bp.get("/<submission_id>/remedies")
@operation(tag="submissions", errors=(404, 503),
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
    actor = current_actor()
    with get_db().session() as session:
        ensure_visible(session, actor, submission_id)
        document = store.current_document(session, submission_id)
    key, private = _key(actor, document)
    with get_db().session() as session:
        result = _finished(session, key)
    if result is not None:
        return json_response(result)
    identity = policy().identity()
    event = {"action": "remedies.requested", "submission_id": submission_id,
             "input_digest": submission_digest(document), "engine_version": engine_version(),
             "policy_version": identity["version"], "detail": {"key": key}}
    row, send = tasks.issue(actor, task_runs.REMEDIES, key, int(policy().value("remedies.max_evaluations")), now(),
                            [json.dumps(document)], event=event, submission_id=submission_id, private=private)
    if send:
        tasks.send(row)
    view = tasks.load_view(row.id)
    if view["state"] == task_runs.SUCCESS:  # the service runs tasks in-process: it has finished already
        return json_response(view["result"])
    return accepted(row.id)


def _chosen(found: dict[str, Any], remedy: str, submission_id: str, revision: int) -> dict[str, Any]:
    """Returns the remedy named ``remedy`` (its id, or its index in the list, 0 the best); NotFound otherwise."""
    listed = found["remedies"]
    if _INDEX.match(remedy) and int(remedy) < len(listed):
        return listed[int(remedy)]
    match = next((r for r in listed if r["id"] == remedy), None)
    if match is None:
        names = ", ".join(f"{i} ({r['id']})" for i, r in enumerate(listed)) or "none"
        raise NotFound(f"revision {revision} of submission {submission_id!r} has no remedy {remedy!r}; its "
                       f"remedies: {names}")
    return match


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
    actor = current_actor()
    with get_db().session() as session:
        snap = store.load_visible(session, actor, submission_id)
        expected_version(snap.submission.version)
        document = store.current_document(session, submission_id)
        found = _finished(session, _key(actor, document)[0]) or evaluation.find_remedies(
            session, document, snap.record.document)
        chosen = _chosen(found, remedy, submission_id, snap.submission.revision)
        revised = merge_patch(document, chosen["patch"])
        validate_submission(revised, f"the submission with remedy {chosen['id']}")
        moment = now()
        record = evaluate_submission(revised, moment)
        origin = {"remedy": chosen["id"], "changes": chosen["changes"]}
        diff = store.revise(session, actor, snap, revised, record, moment, origin=origin)
        view = submission_view(store.load(session, submission_id), moment.date(), required_approvers())
        session.commit()
    body = {**view, "diff": diff, "remedy": {"id": chosen["id"], "changes": chosen["changes"]}}
    return json_response(body, 201, {"Location": view["links"]["self"], "ETag": view["etag"]})

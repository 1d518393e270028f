"""Decisions: approve, reject and request-changes, and the final record a decision that ends the workflow issues.

A final record carries the layout search and the remedies, whose search may take seconds: the application layer
(service/app/review.py) makes the record first, from a snapshot, and ``decide`` then only writes, in the
transaction that checks the submission's version is still the one the record was made from. This module makes
the record's workflow part (``final_record_document``); the application layer adds the search and the remedies.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlmodel import Session

from service.accounts.actors import Actor
from service.approval import workflow
from service.approval.record_store import store_final_record
from service.approval.store import Snapshot, compare_and_set
from service.approval.workflow import Event, State
from service.errors import Forbidden, WorkflowConflict
from service.persistence import audit
from service.persistence.models import Decision, Record, Waiver
from service.record import SigningKeys


def plan_decision(actor: Actor, snap: Snapshot, action: str, required_approvers: int, now: datetime
                  ) -> tuple[State, int]:
    """Returns the state a decision moves the submission to and the approvals it then has; raises, as ``decide``
    does, when the decision is not allowed (a transition the state refuses, four eyes, a blocking check)."""
    submission = snap.submission
    event = Event(action)
    target = workflow.check_transition(submission.state, event)
    approvals = len(snap.approvers())
    if event is Event.APPROVE:
        active = snap.active_waivers(now.date())
        assert actor.user_id is not None  # every authenticated actor has a user
        reason = workflow.check_four_eyes(actor.user_id, actor.name, snap.author_users(), snap.waiver_users())
        if reason:
            raise Forbidden(f"four-eyes rule: {reason}")
        if actor.user_id in snap.approver_users():
            raise WorkflowConflict(f"{actor.name!r} has already approved revision {submission.revision}; "
                                   f"approval needs {required_approvers} distinct approvers")
        workflow.ensure_approvable(snap.checks, set(active))
        approvals += 1
        if approvals < required_approvers:
            target = State(submission.state)
    return target, approvals


def new_decision(actor: Actor, snap: Snapshot, action: str, comment: str | None, now: datetime) -> Decision:
    """Returns the decision ``action`` of ``actor`` on the snapshot's revision, not stored."""
    return Decision(submission_id=snap.submission.id, revision=snap.submission.revision, action=action,
                    comment=comment, actor=actor.name, actor_role=actor.role, actor_token_id=actor.token_id,
                    created_at=now)


def decide(session: Session, actor: Actor, snap: Snapshot, action: str, comment: str | None, request_digest: str,
           required_approvers: int, now: datetime, keys: SigningKeys | None,
           final_record: Callable[[list[Decision]], dict[str, Any]]) -> Decision:
    """Returns the stored decision after applying it to the submission's state.

    When the decision makes the submission final, the final record is issued: ``final_record(decisions)`` gives
    its content (``final_record_document`` and what the application layer adds) for the revision's decisions,
    this one last; an approved one is signed with ``keys`` in the same transaction (no keys: it is signed when
    first read, see ``signed_envelope``).
    """
    submission = snap.submission
    target, approvals = plan_decision(actor, snap, action, required_approvers, now)
    compare_and_set(session, submission.id, submission.version, state=target, updated_at=now)
    decision = new_decision(actor, snap, action, comment, now)
    session.add(decision)
    session.flush()
    detail: dict[str, Any] = {"decision_id": decision.id, "action": action, "revision": submission.revision,
                              "approvals": approvals, "required_approvers": required_approvers}
    if target in workflow.FINAL_STATES:
        final = _issue_final_record(session, snap, final_record([*snap.decisions, decision]), now, keys)
        detail.update(record_id=final.id, record_digest=final.digest)
    audit.append(session, action=f"decision.{action}", actor=actor, occurred_at=now, submission_id=submission.id,
                 input_digest=request_digest, before_state=submission.state, after_state=target,
                 engine_version=snap.evaluation.engine_version, policy_version=snap.evaluation.policy_version,
                 detail=detail)
    return decision


def waiver_document(waiver: Waiver) -> dict[str, Any]:
    """Returns a waiver in the record schema's shape."""
    return {"check_id": waiver.check_id, "justification": waiver.justification, "actor": waiver.author,
            "at": audit.timestamp(waiver.created_at), "expires": waiver.expires.isoformat() if waiver.expires else None,
            "result_digest": waiver.result_digest}


def decision_document(decision: Decision) -> dict[str, Any]:
    """Returns a decision in the record schema's shape."""
    document = {"action": decision.action, "actor": decision.actor, "role": decision.actor_role,
                "at": audit.timestamp(decision.created_at)}
    if decision.comment:
        document["comment"] = decision.comment
    return document


def final_record_document(snap: Snapshot, decisions: list[Decision], record_id: str, now: datetime) -> dict[str, Any]:
    """Returns the workflow part of the final record ``record_id`` of a decision that ends the workflow, without its
    issue number and audit anchor: the evaluation with the active waivers and the revision's ``decisions``."""
    revision = snap.submission.revision
    waivers = {check_id: waiver_document(w) for check_id, w in snap.active_waivers(now.date()).items()}
    return workflow.record_with_workflow(
        snap.record.document, record_id=record_id, submission_id=snap.submission.id, revision=revision,
        waivers=waivers, decisions=[decision_document(d) for d in decisions if d.revision == revision])


def _issue_final_record(session: Session, snap: Snapshot, document: dict[str, Any], now: datetime,
                        keys: SigningKeys | None) -> Record:
    """Returns the stored final record ``document`` (final_record_document) of a decision that ends the workflow.

    The record carries the audit chain's anchor (``audit.anchor``): the caller's next audit event, the
    decision that names this record, must be the very next one appended in this transaction.
    """
    document = {**document, "issue": 1}
    document["audit_anchor"] = audit.anchor(session).as_record_member()
    return store_final_record(session, snap.submission.id, snap.evaluation.id, document, now, keys)

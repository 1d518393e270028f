"""Reviews: waivers and the decisions approve, reject and request-changes, for the API and the reviewer pages alike.

A decision that ends the workflow issues the final record, which carries the layout search and the remedies.
Those are computed first, from a snapshot read in a transaction of its own that ends before they run; the
transaction that stores the decision only writes, after checking that the submission is still at the version
the record was made from (the caller's If-Match or form version, and the store's compare-and-set).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import Any, TypeVar

from sqlmodel import Session

from rules.advice.remedies import with_remedies
from service.accounts.actors import Actor
from service.accounts.auth import authorize
from service.app import evaluation
from service.app.audit_chain import timestamp_head_after_decision
from service.approval import decisions, store, workflow
from service.approval.representations import decision_view, submission_view, waiver_view
from service.approval.store import Snapshot
from service.approval.workflow import Event, State
from service.errors import Forbidden, WorkflowConflict
from service.identifiers import new_id
from service.persistence.db import get_db
from service.persistence.models import Decision, Waiver
from service.record import SigningKeys

T = TypeVar("T")


__all__ = ["Snapshot", "State", "allowed_in", "decide", "final_record", "forms_for", "may", "prepare_final_record",
           "waive", "with_decision", "with_waiver"]


def final_record(session: Session, snap: Snapshot, made: list[Decision], now: datetime) -> dict[str, Any]:
    """Returns the content of the final record of a decision that ends the workflow (``made``: the revision's
    decisions, that one last), without its issue number and audit anchor: the evaluation with the workflow, the
    layout search and the remedies. Only reads (the search and remedies may run here: call it outside the
    transaction that stores the decision)."""
    document = decisions.final_record_document(snap, made, new_id(), now)
    # The record procurement receives carries the layout search: the best layout of the quoted GPUs beside the
    # submitted one (advice; the check results and their digests are the evaluation's, unchanged).
    submitted = store.current_document(session, snap.submission.id)
    document = evaluation.with_search(session, submitted, document)
    # ... and, where a check failed or warned, the remedies: the changes that would make every check pass.
    return with_remedies(document, evaluation.remedies(session, submitted, document))


def prepare_final_record(session: Session, actor: Actor, snap: Snapshot, action: str, comment: str | None,
                         required: int, now: datetime) -> dict[str, Any] | None:
    """Returns the final record a decision would issue (``final_record``), or None when the decision does not end
    the workflow; raises as ``decisions.decide`` does for a decision not allowed."""
    target, _ = decisions.plan_decision(actor, snap, action, required, now)
    if target not in workflow.FINAL_STATES:
        return None
    return final_record(session, snap, [*snap.decisions, decisions.new_decision(actor, snap, action, comment, now)],
                        now)


def decide(actor: Actor, submission_id: str, action: str, comment: str | None, request_digest: str, now: datetime,
           keys: SigningKeys, check: Callable[[Snapshot], None],
           respond: Callable[[Session, Decision], T]) -> T:
    """Stores the decision ``action`` on a submission ``actor`` may see and returns what ``respond`` makes of it.

    ``check``: the caller's checks of the snapshot before the decision (the version it expects, the role's
    right to the action), run on each read. ``respond(session, decision)`` runs in the decision's transaction
    before its commit, so that what it reads is what the decision wrote. The final record is made from the
    first read; should the second find the decision now ends the workflow where the first did not (another
    approval came between), it is made in the decision's transaction.
    """
    required = evaluation.required_approvers()
    db = get_db()
    with db.session() as session:
        snap = store.load_visible(session, actor, submission_id)
        check(snap)
        prepared = prepare_final_record(session, actor, snap, action, comment, required, now)
    with db.session() as session:
        snap = store.load_visible(session, actor, submission_id)
        check(snap)

        def final(made: list[Decision]) -> dict[str, Any]:
            return prepared if prepared is not None else final_record(session, snap, made, now)

        decision = decisions.decide(session, actor, snap, action, comment, request_digest, required, now, keys,
                                    final_record=final)
        response = respond(session, decision)
        session.commit()
    timestamp_head_after_decision(keys, now)
    return response


def waive(actor: Actor, submission_id: str, check_id: str, justification: str, expires: date | None,
          request_digest: str, now: datetime, check: Callable[[Snapshot], None],
          respond: Callable[[Session, Waiver], T]) -> T:
    """Stores a waiver of the current result of ``check_id`` on a submission ``actor`` may see and returns what
    ``respond(session, waiver)`` makes of it, in the waiver's transaction before its commit; ``check``: the
    caller's checks of the snapshot first (the version it expects)."""
    with get_db().session() as session:
        snap = store.load_visible(session, actor, submission_id)
        check(snap)
        waiver = store.waive(session, actor, snap, check_id, justification, expires, request_digest, now)
        response = respond(session, waiver)
        session.commit()
    return response


def with_waiver(submission_id: str, today: date) -> Callable[[Session, Waiver], dict[str, Any]]:
    """Returns the ``respond`` of ``waive`` the API answers with: the submission read back, with ``waiver``."""
    def respond(session: Session, waiver: Waiver) -> dict[str, Any]:
        snap = store.load(session, submission_id)
        view = submission_view(snap, today, evaluation.required_approvers())
        view["waiver"] = waiver_view(snap, waiver, today)
        return view
    return respond


def with_decision(submission_id: str, today: date) -> Callable[[Session, Decision], dict[str, Any]]:
    """Returns the ``respond`` of ``decide`` the API answers with: the submission read back, with ``decision``."""
    def respond(session: Session, decision: Decision) -> dict[str, Any]:
        view = submission_view(store.load(session, submission_id), today, evaluation.required_approvers())
        view["decision"] = decision_view(decision)
        return view
    return respond


# --- What a user may do on a submission: roles, the workflow, four-eyes and what blocks approval -------------

def may(actor: Actor, action: str) -> bool:
    """Returns whether ``actor``'s role may perform ``action`` (service.accounts.auth.authorize)."""
    try:
        authorize(actor, action)
    except Forbidden:
        return False
    return True


def allowed_in(state: str, event: Event) -> bool:
    """Returns whether the workflow lets ``event`` happen to a submission in ``state``."""
    try:
        workflow.check_transition(state, event)
    except WorkflowConflict:
        return False
    return True


def forms_for(actor: Actor, snap: Snapshot, today: date) -> dict[str, Any]:
    """Returns which forms the page shows ``actor`` on this submission, and why one is held back where that helps.

    A form appears only when the role may use it (service.accounts.auth.PERMISSIONS), the state allows the event
    (service.approval.workflow), and the four-eyes rule lets this user act (service.approval.store applies the same
    rules again when the form is sent). The reviewer pages show what it returns.
    """
    state = snap.submission.state
    authors = snap.author_users()
    notes: list[str] = []
    waive = may(actor, "waive") and allowed_in(state, Event.WAIVE)
    if waive and actor.user_id in authors:
        waive = False
        notes.append("You submitted or revised this quote, so you may not waive its checks (four-eyes rule).")
    approve = may(actor, "approve") and allowed_in(state, Event.APPROVE)
    if approve:
        reason = workflow.check_four_eyes(actor.user_id or -1, actor.name, authors, snap.waiver_users())
        if reason:
            notes.append(f"You may not approve: {reason} (four-eyes rule).")
            approve = False
        elif actor.user_id in snap.approver_users():
            notes.append(f"You approved revision {snap.submission.revision} already; it needs further approvers.")
            approve = False
    blockers = workflow.approval_blockers(snap.checks, set(snap.active_waivers(today)))
    return {
        "waive": waive,
        "approve": approve,
        "request_changes": may(actor, "request-changes") and allowed_in(state, Event.REQUEST_CHANGES),
        "reject": may(actor, "reject") and allowed_in(state, Event.REJECT),
        "revise": (may(actor, "revise") and allowed_in(state, Event.REVISE)
                   and (actor.role == "admin" or actor.user_id == snap.submitter_user)),
        "link_purchase_order": may(actor, "link-purchase-order") and state == State.APPROVED,
        "notes": notes,
        "blockers": blockers,
    }

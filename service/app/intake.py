"""Submitting a quote and revising one: each evaluated at once and stored with its evaluation record.

The API (``POST /api/v1/submissions``, ``POST …/revisions``, a revision made from a remedy) and the reviewer
pages (the new-quote and revision forms) submit and revise here. The engine runs outside any transaction on
submission; a revision is evaluated in the transaction that read the snapshot it revises, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from service.accounts.actors import Actor
from service.app.evaluation import evaluate_submission, required_approvers
from service.approval import store
from service.approval.representations import submission_view
from service.approval.store import Snapshot
from service.approval.workflow import State
from service.persistence.db import get_db

# The states a submission can be in (service/approval/workflow.py), for the filters of a listing.
STATES = tuple(State)


@dataclass(frozen=True)
class Remembered:
    """The first response to a submission sent with an Idempotency-Key, and the digest of its body."""

    request_digest: str
    response: dict[str, Any]


def remembered(actor: Actor, key: str) -> Remembered | None:
    """Returns what the first submission with ``actor``'s token and key ``key`` answered, if one was."""
    # One SELECT: it needs no transaction around it.
    with get_db().autocommit_session() as session:
        seen = store.find_idempotent(session, actor.token_id, key)
        return None if seen is None else Remembered(seen.request_digest, seen.response)


def submit(actor: Actor, body: dict[str, Any], moment: datetime, key: str | None = None) -> dict[str, Any] | Remembered:
    """Evaluates and stores a new submission and returns its representation; with an Idempotency-Key ``key`` the
    representation is stored with the key, and should a concurrent request with the same key commit first,
    what that one answered (Remembered) is returned instead."""
    # Evaluated outside any transaction: nothing is locked while the engine runs.
    record = evaluate_submission(body, moment)
    views: list[dict[str, Any]] = []

    def respond(session: Session, snap: Snapshot) -> dict[str, Any]:
        # The response is built from the rows just written (not read back) and stored with the key before the
        # audit chain is locked: a concurrent retry with the same key fails on the key's unique row, not later.
        view = submission_view(snap, moment.date(), required_approvers())
        if key is not None:
            store.remember_idempotency_key(session, actor, key, record["submission"]["digest"], snap.submission.id,
                                           view, moment)
        return view

    try:
        with get_db().session() as session:
            store.create_submission(session, actor, body, record, moment,
                                    before_audit=lambda snap: views.append(respond(session, snap)))
            session.commit()
    except IntegrityError:
        if key is None:
            raise
        # Another request with the same key committed first: answer as its retry would be answered.
        seen = remembered(actor, key)
        if seen is None:
            raise
        return seen
    return views[0]


def revise(actor: Actor, submission_id: str, document: dict[str, Any], clock: Callable[[], datetime],
           check: Callable[[Snapshot], None], origin: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict]:
    """Evaluates and stores ``document`` as the next revision of a submission ``actor`` may see; returns the
    submission's representation and the diff of the checks against the previous revision.

    ``check``: the caller's checks of the snapshot first (the version it expects); ``clock`` is read after
    them; ``origin``: where the revision came from (a remedy), for its audit event.
    """
    with get_db().session() as session:
        snap = store.load_visible(session, actor, submission_id)
        check(snap)
        view, diff = revise_snapshot(session, actor, snap, document, clock(), origin)
        session.commit()
    return view, diff


def revise_snapshot(session: Session, actor: Actor, snap: Snapshot, document: dict[str, Any], moment: datetime,
                    origin: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict]:
    """Evaluates and stores ``document`` as the revision after ``snap`` in ``session`` (not committed); returns the
    submission's representation read back and the diff of the checks."""
    record = evaluate_submission(document, moment)
    diff = store.revise(session, actor, snap, document, record, moment, origin=origin)
    view = submission_view(store.load(session, snap.submission.id), moment.date(), required_approvers())
    return view, diff

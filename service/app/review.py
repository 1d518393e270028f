"""Reviews: the decisions approve, reject and request-changes, for the API and the reviewer pages alike.

A decision that ends the workflow issues the final record, which carries the layout search and the remedies.
Those are computed first, from a snapshot read in a transaction of its own that ends before they run; the
transaction that stores the decision only writes, after checking that the submission is still at the version
the record was made from (the caller's If-Match or form version, and the store's compare-and-set).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from sqlmodel import Session

from service.app.evaluation import required_approvers
from service.approval import decisions, store
from service.approval.store import Snapshot
from service.persistence.audit import Actor
from service.persistence.db import get_db
from service.persistence.models import Decision
from service.record import SigningKeys

T = TypeVar("T")


def decide(actor: Actor, submission_id: str, action: str, comment: str | None, request_digest: str, now: datetime,
           keys: SigningKeys, check: Callable[[Snapshot], None],
           respond: Callable[[Session, Decision], T]) -> T:
    """Stores the decision ``action`` on a submission ``actor`` may see and returns what ``respond`` makes of it.

    ``check``: the caller's checks of the snapshot before the decision (the version it expects, the role's
    right to the action), run on each read. ``respond(session, decision)`` runs in the decision's transaction
    before its commit, so that what it reads is what the decision wrote.
    """
    required = required_approvers()
    db = get_db()
    with db.session() as session:
        snap = store.load_visible(session, actor, submission_id)
        check(snap)
        final = decisions.prepare_final_record(session, actor, snap, action, comment, required, now)
    with db.session() as session:
        snap = store.load_visible(session, actor, submission_id)
        check(snap)
        decision = decisions.decide(session, actor, snap, action, comment, request_digest, required, now, keys,
                                    final_document=final)
        response = respond(session, decision)
        session.commit()
    return response

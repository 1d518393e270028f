"""The append-only audit log: every event carries the SHA-256 of its predecessor (a hash chain).

An event's hash is SHA-256 over the RFC 8785 canonical JSON of all its fields except ``hash``, so
editing any stored field, deleting an event or reordering events breaks the chain at that event.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import rfc8785
from sqlalchemy import update
from sqlmodel import Session, col, func, select

from service.models import AuditChainHead, AuditEvent

GENESIS_HASH = "0" * 64
HEAD_ID = 1
# Events are verified in pages of this many, so a long chain never sits in memory at once.
VERIFY_BATCH = 1000


@dataclass(frozen=True)
class Actor:
    """Who acts: the user's name, the token's role (and prefix, which identifies the token without its secret).

    ``user_id`` is what the four-eyes rule compares; ``scope`` is the token's (service.auth.Scope).
    """

    name: str
    role: str
    token_id: int | None = None
    token_prefix: str | None = None
    user_id: int | None = None
    scope: str = "all"


def timestamp(moment: datetime) -> str:
    """Returns ``moment`` as the ISO 8601 UTC text the chain hashes (microseconds, ``Z``)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def canonical_event(event: AuditEvent) -> dict[str, Any]:
    """Returns the fields of ``event`` that its hash covers, as JSON values."""
    return {
        "id": event.id,
        "occurred_at": timestamp(event.occurred_at),
        "submission_id": event.submission_id,
        "action": event.action,
        "actor": event.actor,
        "actor_role": event.actor_role,
        "token_prefix": event.token_prefix,
        "input_digest": event.input_digest,
        "engine_version": event.engine_version,
        "policy_version": event.policy_version,
        "before_state": event.before_state,
        "after_state": event.after_state,
        "detail": event.detail,
        "prev_hash": event.prev_hash,
    }


def event_hash(event: AuditEvent) -> str:
    """Returns the hex SHA-256 of the canonical serialisation of ``event``."""
    return hashlib.sha256(rfc8785.dumps(canonical_event(event))).hexdigest()


def append(session: Session, *, action: str, actor: Actor | None, occurred_at: datetime,
           submission_id: str | None = None, input_digest: str | None = None, engine_version: str | None = None,
           policy_version: str | None = None, before_state: str | None = None, after_state: str | None = None,
           detail: dict[str, Any] | None = None) -> AuditEvent:
    """Returns the event appended to the chain inside the caller's transaction (committed with it)."""
    # Bumping the head row first takes the chain's write lock: a concurrent appender waits here until
    # this transaction ends, and then sees this event as its predecessor.
    session.execute(update(AuditChainHead).where(col(AuditChainHead.id) == HEAD_ID)
                 .values(length=AuditChainHead.length + 1))
    head = session.exec(select(AuditChainHead).where(AuditChainHead.id == HEAD_ID)
                        .execution_options(populate_existing=True)).one()
    event = AuditEvent(id=head.length, occurred_at=occurred_at, submission_id=submission_id, action=action,
                       actor=actor.name if actor else None, actor_role=actor.role if actor else None,
                       token_prefix=actor.token_prefix if actor else None, input_digest=input_digest,
                       engine_version=engine_version, policy_version=policy_version, before_state=before_state,
                       after_state=after_state, detail=detail or {}, prev_hash=head.last_hash, hash="")
    event.hash = event_hash(event)
    head.last_hash = event.hash
    session.add(event)
    session.add(head)
    session.flush()
    return event


@dataclass(frozen=True)
class Verification:
    """The outcome of verifying the chain: ``broken_at`` is None when every link holds."""

    count: int
    head_hash: str
    broken_at: int | None = None
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.broken_at is None


def verify(session: Session) -> Verification:
    """Returns the verification of the whole chain: the first event whose link or content does not hold."""
    expected_prev, expected_id, count = GENESIS_HASH, 1, 0
    last_id = 0
    while True:
        events = session.exec(select(AuditEvent).where(col(AuditEvent.id) > last_id)
                              .order_by(col(AuditEvent.id)).limit(VERIFY_BATCH)).all()
        if not events:
            break
        for event in events:
            if event.id != expected_id:
                return Verification(count, expected_prev, expected_id,
                                    f"event {expected_id} is missing: the next stored event is {event.id}")
            if event.prev_hash != expected_prev:
                return Verification(count, expected_prev, event.id,
                                    f"prev_hash {event.prev_hash} does not match the hash of event "
                                    f"{event.id - 1}, {expected_prev}")
            recomputed = event_hash(event)
            if recomputed != event.hash:
                return Verification(count, expected_prev, event.id,
                                    f"stored hash {event.hash} does not match the recomputed {recomputed}: "
                                    f"the event was altered after it was written")
            expected_prev, expected_id, count = event.hash, expected_id + 1, count + 1
        last_id = events[-1].id
    head = session.get(AuditChainHead, HEAD_ID)
    if head is None:
        return Verification(count, expected_prev, count + 1, "the chain head row (audit_chain_head id 1) is missing")
    if head.length != count or head.last_hash != expected_prev:
        # The tail was cut off: the remaining events still link, but the head remembers more.
        return Verification(count, expected_prev, count + 1,
                            f"the chain head records {head.length} events ending in {head.last_hash}, "
                            f"but {count} events ending in {expected_prev} are stored")
    return Verification(count, expected_prev)


def events_of(session: Session, submission_id: str) -> list[AuditEvent]:
    """Returns the events of one submission, oldest first."""
    return list(session.exec(select(AuditEvent).where(AuditEvent.submission_id == submission_id)
                             .order_by(col(AuditEvent.id))).all())


def count(session: Session) -> int:
    """Returns the number of stored events."""
    return session.exec(select(func.count()).select_from(AuditEvent)).one()

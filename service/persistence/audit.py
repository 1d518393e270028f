"""The append-only audit log: every event carries the SHA-256 of its predecessor (a hash chain).

An event's hash is SHA-256 over the RFC 8785 canonical JSON of all its fields except ``hash``, so
editing any stored field, deleting an event or reordering events breaks the chain at that event.

The chain alone cannot show that its tail was cut off, or that everything after some event was rewritten
and re-hashed, by someone who also rewrites the head row. Each record the service issues signed therefore
carries an **anchor**: the chain's length N and head hash just before the event that issues it (``anchor``),
so that event is N + 1. ``check_anchor`` holds a stored chain against a record's anchor.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import TextClause, Update, bindparam, text, update
from sqlmodel import Session, col, func, select

from schemas.canonical_json import canonical_json
from service.accounts.actors import Actor
from service.persistence.models import AuditChainHead, AuditEvent, AuditHeadTimestamp
from service.signals import audit_anchored, audit_appended

GENESIS_HASH = "0" * 64
HEAD_ID = 1
# Events are verified in pages of this many, so a long chain never sits in memory at once.
VERIFY_BATCH = 1000


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
    return hashlib.sha256(canonical_json(canonical_event(event))).hexdigest()


def append(session: Session, *, action: str, actor: Actor | None, occurred_at: datetime,
           submission_id: str | None = None, input_digest: str | None = None, engine_version: str | None = None,
           policy_version: str | None = None, before_state: str | None = None, after_state: str | None = None,
           detail: dict[str, Any] | None = None) -> AuditEvent:
    """Returns the event appended to the chain inside the caller's transaction (committed with it)."""
    return append_all(session, [Entry(action, actor, occurred_at, submission_id, input_digest, engine_version,
                                      policy_version, before_state, after_state, detail)])[0]


@dataclass(frozen=True)
class Entry:
    """An event to append: the fields of ``append`` (its position and hashes are given under the chain's lock)."""

    action: str
    actor: Actor | None
    occurred_at: datetime
    submission_id: str | None = None
    input_digest: str | None = None
    engine_version: str | None = None
    policy_version: str | None = None
    before_state: str | None = None
    after_state: str | None = None
    detail: dict[str, Any] | None = None

    def event(self, position: int, prev_hash: str) -> AuditEvent:
        """Returns the event at ``position`` of the chain after the event whose hash is ``prev_hash``, hashed."""
        actor = self.actor
        event = AuditEvent(id=position, occurred_at=self.occurred_at, submission_id=self.submission_id,
                           action=self.action, actor=actor.name if actor else None,
                           actor_role=actor.role if actor else None, token_prefix=actor.token_prefix if actor else None,
                           input_digest=self.input_digest, engine_version=self.engine_version,
                           policy_version=self.policy_version, before_state=self.before_state,
                           after_state=self.after_state, detail=self.detail or {}, prev_hash=prev_hash, hash="")
        event.hash = event_hash(event)
        return event


_HEAD = AuditChainHead.__table__
_EVENTS = AuditEvent.__table__


@functools.cache
def _append_statements(count: int, postgresql: bool) -> tuple[Update | None, TextClause]:
    """Returns the statements that set the head's ``last_hash`` and insert ``count`` events (parameters
    ``e<index>_<column>``): on PostgreSQL none and an INSERT that does both, elsewhere an UPDATE and an INSERT.

    Text, built once per count: SQLAlchemy caches no compiled form of a many-row INSERT … VALUES.
    """
    set_head = update(_HEAD).where(_HEAD.c.id == HEAD_ID).values(last_hash=bindparam("last_hash"))
    names = [column.name for column in _EVENTS.columns]
    rows = ", ".join("(" + ", ".join(f":e{index}_{name}" for name in names) + ")" for index in range(count))
    # Plain rows: the events are not read back through the session, so they need no place in it.
    sql = f"INSERT INTO {_EVENTS.name} ({', '.join(names)}) VALUES {rows}"
    if postgresql:
        # One round trip: the head's UPDATE rides as a data-modifying WITH of the INSERT, which PostgreSQL runs
        # exactly once; the head row is this transaction's since append_all's first UPDATE, so the lock is as before.
        sql = f"WITH head AS (UPDATE {_HEAD.name} SET last_hash = :last_hash WHERE id = {HEAD_ID}) {sql}"
    add_events = text(sql).bindparams(*[bindparam(f"e{index}_{column.name}", type_=column.type)
                                        for index in range(count) for column in _EVENTS.columns])
    if postgresql:
        return None, add_events.bindparams(bindparam("last_hash", type_=_HEAD.c.last_hash.type))
    return set_head, add_events  # SQLite has no UPDATE in WITH; its round trips are calls within the process


@functools.cache
def _bump_head(count: int) -> Update:
    """Returns the UPDATE that adds ``count`` to the head's length and returns the new length and the last hash.

    On the table (not the model): the session holds no head object to synchronise, and the ORM's bulk UPDATE
    path costs more than the statement.
    """
    return (update(_HEAD).where(_HEAD.c.id == HEAD_ID).values(length=_HEAD.c.length + count)
            .returning(_HEAD.c.length, _HEAD.c.last_hash))


def append_all(session: Session, entries: list[Entry]) -> list[AuditEvent]:
    """Returns the events of ``entries`` appended to the chain in order, inside the caller's transaction.

    The chain's write lock (its head row) is taken here, so a caller writes everything else of its
    transaction first and appends last: a concurrent appender waits only for the append and the commit.
    """
    # Bumping the head row takes the chain's write lock, and RETURNING reads the head in the same statement: a
    # concurrent appender waits here until this transaction ends, and then sees these events as predecessors.
    session.flush()  # what the caller added goes first, before the lock (as an ORM statement would autoflush)
    length, prev_hash = session.connection().execute(_bump_head(len(entries))).one()
    events = []
    for position, entry in enumerate(entries, start=length - len(entries) + 1):
        events.append(entry.event(position, prev_hash))
        prev_hash = events[-1].hash
    rows = {f"e{index}_{column.name}": getattr(event, column.name) for index, event in enumerate(events)
            for column in _EVENTS.columns}
    set_head, add_events = _append_statements(len(events), session.get_bind().dialect.name == "postgresql")
    if set_head is not None:
        session.execute(set_head, {"last_hash": prev_hash})
    session.execute(add_events, {"last_hash": prev_hash, **rows} if set_head is None else rows)
    for event in events:
        audit_appended.send(session, event=event)
    return events


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


@dataclass(frozen=True)
class Anchor:
    """The chain's length and head hash at one moment, as a record carries it (``audit_anchor``)."""

    events: int
    head_hash: str  # ``sha256:<hex>``; the genesis hash for an empty chain

    def as_record_member(self) -> dict[str, Any]:
        """Returns the anchor in the record schema's shape: ``{"events": N, "head_hash": "sha256:<hex>"}``."""
        return {"events": self.events, "head_hash": self.head_hash}

    @classmethod
    def of_record(cls, record: dict[str, Any]) -> Anchor | None:
        """Returns the anchor a record carries, None when it carries none; ValueError when it is malformed."""
        member = record.get("audit_anchor")
        if member is None:
            return None
        events = member.get("events") if isinstance(member, dict) else None
        head_hash = member.get("head_hash") if isinstance(member, dict) else None
        if isinstance(events, float) and events.is_integer():
            events = int(events)  # a reader that takes every JSON number as a double (I-JSON) gives 41.0
        # bool is an int in Python; JSON true is no count.
        if not isinstance(events, int) or isinstance(events, bool) or events < 0 \
                or not isinstance(head_hash, str) or not ANCHOR_HASH.fullmatch(head_hash):
            raise ValueError(f"audit_anchor is {member!r}; expected {{\"events\": a count >= 0, "
                             "\"head_hash\": \"sha256:<64 hex digits>\"}")
        return cls(events, head_hash)


ANCHOR_PREFIX = "sha256:"
ANCHOR_HASH = re.compile(r"sha256:[0-9a-f]{64}")


def anchor(session: Session) -> Anchor:
    """Returns the chain's length and head hash, and holds the chain's write lock until the transaction ends.

    The next event this transaction appends is therefore event ``events + 1`` with ``prev_hash`` equal to
    the anchor's head: no concurrent appender can slip in between (see ``append``).
    """
    # The same no-op bump of the head row as ``append`` takes: the row lock on PostgreSQL, the database
    # write lock on SQLite.
    session.execute(update(AuditChainHead).where(col(AuditChainHead.id) == HEAD_ID)
                    .values(length=AuditChainHead.length))
    head = session.exec(select(AuditChainHead).where(AuditChainHead.id == HEAD_ID)
                        .execution_options(populate_existing=True)).one()
    taken = Anchor(head.length, ANCHOR_PREFIX + head.last_hash)
    audit_anchored.send(None, anchor=taken)
    return taken


def head(session: Session) -> Anchor:
    """Returns the chain's length and head hash as the head row records them now (no lock: a read)."""
    row = session.exec(select(AuditChainHead).where(AuditChainHead.id == HEAD_ID)
                       .execution_options(populate_existing=True)).one()
    return Anchor(row.length, ANCHOR_PREFIX + row.last_hash)


def head_timestamps(session: Session) -> list[AuditHeadTimestamp]:
    """Returns the stored TSA timestamps of the chain's head, oldest first."""
    return list(session.exec(select(AuditHeadTimestamp).order_by(col(AuditHeadTimestamp.id))).all())


def event_at(session: Session, event_id: int) -> AuditEvent | None:
    """Returns the event with id ``event_id`` (its position in the chain), if stored."""
    return session.get(AuditEvent, event_id, populate_existing=True)


ISSUING_ACTIONS = ("decision.approve", "decision.reject", "purchase_order.linked", "addendum.issued")
# The detail members that name the document an issuing event issued, and its digest: an addendum's own id.
_ISSUED_ID = {"addendum.issued": ("addendum_id", "addendum_digest")}


@dataclass(frozen=True)
class AnchorCheck:
    """The outcome of holding the stored chain against a record's anchor: ``problems`` empty when it holds."""

    findings: list[str]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def check_anchor(session: Session, expected: Anchor, record_id: str, record_digest: str | None) -> AnchorCheck:
    """Returns whether the stored chain still holds what the record anchored.

    It holds when the chain has event N (``expected.events``) with the anchored hash, and event N + 1 is
    the event that issued the record (``record_id``, and ``record_digest`` when given). A chain cut at or
    before N + 1, or rewritten at or before N and re-hashed from there, fails; events appended after N + 1
    change nothing. Each problem says what was found and what was expected.
    """
    findings: list[str] = []
    problems: list[str] = []
    stored = count(session)
    n = expected.events
    if n == 0:
        found_hash = ANCHOR_PREFIX + GENESIS_HASH
    else:
        event = event_at(session, n)
        if event is None:
            problems.append(f"the chain has {stored} events, but record {record_id} was signed when it had {n}: "
                            f"event {n} is missing, so the tail of the chain was deleted")
            return AnchorCheck(findings, problems)
        found_hash = ANCHOR_PREFIX + event.hash
    if found_hash != expected.head_hash:
        problems.append(f"event {n} has hash {found_hash}, but record {record_id} anchors {expected.head_hash}: "
                        f"events up to {n} were rewritten (or the chain was replaced) after the record was signed")
    else:
        findings.append(f"event {n} has the anchored hash {expected.head_hash}")
    issuing = event_at(session, n + 1)
    if issuing is None:
        problems.append(f"the chain has {stored} events, but event {n + 1}, which issued record {record_id}, is "
                        "missing: the tail of the chain was deleted")
        return AnchorCheck(findings, problems)
    id_member, digest_member = _ISSUED_ID.get(issuing.action, ("record_id", "record_digest"))
    named = (issuing.detail or {}).get(id_member)
    if issuing.action not in ISSUING_ACTIONS or named != record_id:
        problems.append(f"event {n + 1} is {issuing.action} naming record {named}, expected the event that issued "
                        f"record {record_id} ({' or '.join(ISSUING_ACTIONS)})")
        return AnchorCheck(findings, problems)
    digest = (issuing.detail or {}).get(digest_member)
    if record_digest is not None and digest != record_digest:
        problems.append(f"event {n + 1} records digest {digest} for record {record_id}, but the record's digest is "
                        f"{record_digest}")
        return AnchorCheck(findings, problems)
    findings.append(f"event {n + 1} ({issuing.action}, {timestamp(issuing.occurred_at)}) issued record {record_id}")
    return AnchorCheck(findings, problems)


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

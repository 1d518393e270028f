"""The audit log's hash chain as `quotecheck audit verify` checks it: every link, what a signed record anchored,
and the chain heads the TSA timestamped.

The chain itself and its anchors are kept by service/persistence/audit.py; this is the operation the command line
runs over them. A head timestamp (table ``audit_head_timestamp``) is the chain's length N and head hash with the
TSA's RFC 3161 token over their RFC 8785 bytes, ``{"events": N, "head_hash": "sha256:…"}``; one is taken after
every decision and whenever `quotecheck audit timestamp` runs (on a schedule). Someone who deletes the chain's
last events and rewrites the head row to match leaves a chain whose links all hold, but shorter than a head the
TSA timestamped: `audit verify` names the missing events.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, NamedTuple

from flask import Flask

from service.persistence import audit
from service.persistence.audit import Anchor, AnchorCheck, Verification
from service.persistence.db import get_db
from service.persistence.models import AuditHeadTimestamp
from service.record import SigningKeys, canonical_bytes
from service.record.errors import SigningError
from service.record.timestamps import check_token

__all__ = ["Anchor", "ChainCheck", "HeadCheck", "anchor_of", "check_head_timestamps", "timestamp_head",
           "verify_chain"]

logger = logging.getLogger(__name__)


class ChainCheck(NamedTuple):
    """The chain's verification and, when a record's anchor was given, whether the chain still holds it."""
    chain: Verification
    anchor: AnchorCheck | None


class HeadCheck(NamedTuple):
    """What the TSA-timestamped heads showed: the latest that holds, and every problem found."""
    checked: int
    latest: str | None  # the newest head timestamp that holds, in words
    problems: list[str]


def anchor_of(record: dict[str, Any]) -> Anchor | None:
    """Returns the audit anchor ``record`` carries, None when it carries none; ValueError when it is malformed."""
    return Anchor.of_record(record)


def verify_chain(app: Flask, anchor: Anchor | None = None, record_id: str | None = None,
                 record_digest: str | None = None) -> ChainCheck:
    """Returns the verification of ``app``'s audit chain and, with ``anchor``, its check against the record
    ``record_id`` (of digest ``record_digest``) that carries the anchor."""
    with get_db(app).session() as session:
        chain = audit.verify(session)
        held = audit.check_anchor(session, anchor, record_id or "", record_digest) if anchor is not None else None
    return ChainCheck(chain, held)


def head_bytes(head: Anchor) -> bytes:
    """Returns the bytes the TSA timestamps for a chain head: RFC 8785 of ``{"events", "head_hash"}``."""
    return canonical_bytes(head.as_record_member())


def timestamp_head(keys: SigningKeys, reason: str, now: datetime) -> AuditHeadTimestamp | None:
    """Returns the stored TSA timestamp of the chain's head as it is now; None without a TSA configured.

    The head is read, the TSA asked outside any transaction (the chain is not held while it answers), and the
    row stored. SigningError when the TSA gives no token.
    """
    if keys.tsa is None:
        return None
    db = get_db()
    with db.session() as session:
        head = audit.head(session)
    token = keys.tsa.token(head_bytes(head))
    with db.session() as session:
        row = AuditHeadTimestamp(events=head.events, head_hash=head.head_hash, reason=reason, token=token,
                                 created_at=now)
        session.add(row)
        session.commit()
        session.refresh(row)
    return row


def timestamp_head_after_decision(keys: SigningKeys, now: datetime) -> None:
    """Timestamps the chain's head after a decision committed; a TSA that fails is logged, not the decision's
    failure (the decision stands, and the next decision or scheduled run timestamps a head that covers it)."""
    try:
        timestamp_head(keys, "decision", now)
    except SigningError:
        logger.warning("the audit chain's head was not timestamped after a decision", exc_info=True)


def check_head_timestamps(app: Flask, trust_roots: list[Any]) -> HeadCheck:
    """Returns whether the stored chain still holds every head the TSA timestamped.

    Each token must be the TSA's (chaining to ``trust_roots``, asn1crypto certificates) over its row's
    events and head hash; the chain must still have that many events, the last with that hash. A chain
    shorter than a timestamped head lost the events between: they are named.
    """
    problems: list[str] = []
    latest = None
    with get_db(app).session() as session:
        rows = audit.head_timestamps(session)
        stored = audit.count(session)
        for row in rows:
            head = Anchor(row.events, row.head_hash)
            token = check_token(row.token, head_bytes(head), trust_roots)
            if token.reasons:
                problems.append(f"head timestamp {row.id} ({row.reason}, {row.events} events) does not verify: "
                                f"{'; '.join(token.reasons)}")
                continue
            when = token.time.isoformat(timespec="seconds") if token.time else "?"
            if stored < row.events:
                missing = f"event {row.events}" if stored + 1 == row.events else \
                    f"events {stored + 1}–{row.events}"
                problems.append(f"{missing} {'is' if stored + 1 == row.events else 'are'} missing: the TSA "
                                f"timestamped the chain's head at {when} ({row.reason}) when it had {row.events} "
                                f"events, and {stored} are stored; the tail of the chain was deleted")
                continue
            event = audit.event_at(session, row.events) if row.events else None
            found = audit.ANCHOR_PREFIX + (event.hash if event is not None else audit.GENESIS_HASH)
            if found != row.head_hash:
                problems.append(f"event {row.events} has hash {found}, but the TSA timestamped {row.head_hash} at "
                                f"{when} ({row.reason}): events up to {row.events} were rewritten")
                continue
            latest = f"the TSA timestamped the head at event {row.events} at {when} ({row.reason})"
    return HeadCheck(len(rows), latest, problems)

"""The canonical bytes of a record (RFC 8785, JSON Canonicalization Scheme) and their digest."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

from schemas.canonical_json import canonical_json
from schemas.json_reader import SAFE_INTEGER, as_doubles

__all__ = ["SAFE_INTEGER", "as_doubles", "canonical_bytes", "is_approved", "not_approved_reason", "record_digest",
           "sha256_digest"]


def canonical_bytes(document: Any) -> bytes:
    """Returns the RFC 8785 canonical UTF-8 bytes of a JSON document (the bytes that are hashed and signed).

    Numbers are canonicalised as the doubles they are in JSON (``as_doubles``), so a document signed here and
    one read back by any conforming reader (Python's ``json``, JavaScript's ``JSON.parse``) have the same bytes.
    Raises ValueError (or an ``rfc8785`` error, a ValueError too) for a value JSON cannot carry.
    """
    try:
        return canonical_json(document)
    except rfc8785.IntegerDomainError:  # the rare record that holds a reader's big integer: walk it once more
        # The double is the number the signature covered (RFC 8785 writes 9.11068987392e20 as
        # 911068987392000000000, which Python's json reads back as an int), so it is the one canonicalised.
        return canonical_json(as_doubles(document, "a member"))


def sha256_digest(data: bytes) -> str:
    """Returns ``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def record_digest(record: dict[str, Any]) -> str:
    """Returns ``sha256:<hex>`` of the canonical bytes of ``record``; the same digest the store keeps per record."""
    return sha256_digest(canonical_bytes(record))


def _latest_decision(record: Any) -> dict[str, Any] | None:
    # Records under verification come from anywhere: a decisions member of another shape decides nothing.
    decisions = record.get("decisions") if isinstance(record, dict) else None
    if not isinstance(decisions, list) or not decisions:
        return None
    return decisions[-1] if isinstance(decisions[-1], dict) else {}


def is_approved(record: dict[str, Any]) -> bool:
    """Returns True when the record's latest decision is an approval (only such a record is issued signed)."""
    latest = _latest_decision(record)
    return latest is not None and latest.get("action") == "approve"


def not_approved_reason(record: dict[str, Any]) -> str | None:
    """Returns why ``record`` is not an approval (None when its latest decision is ``approve``).

    This reads the record itself, so whatever signature covers the record covers this too: an evaluation
    record signed with ``quotecheck sign`` has no decisions and can never pass for an approved one.
    """
    if is_approved(record):
        return None
    latest = _latest_decision(record)
    if latest is None:
        return ("the record carries no approval decision (its decisions list is empty): it is an evaluation "
                "that nobody approved through the approval workflow")
    return (f"the record's latest decision is {latest.get('action')!r} by {latest.get('actor')!r}, "
            "not an approval")

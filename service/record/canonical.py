"""The canonical bytes of a record (RFC 8785, JSON Canonicalization Scheme) and their digest."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785


def canonical_bytes(document: Any) -> bytes:
    """Returns the RFC 8785 canonical UTF-8 bytes of a JSON document (the bytes that are hashed and signed)."""
    return rfc8785.dumps(document)


def sha256_digest(data: bytes) -> str:
    """Returns ``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def record_digest(record: dict[str, Any]) -> str:
    """Returns ``sha256:<hex>`` of the canonical bytes of ``record``; the same digest the store keeps per record."""
    return sha256_digest(canonical_bytes(record))


def is_approved(record: dict[str, Any]) -> bool:
    """Returns True when the record's latest decision is an approval (only such a record is issued signed)."""
    decisions = record.get("decisions") or []
    return bool(decisions) and decisions[-1].get("action") == "approve"


def not_approved_reason(record: dict[str, Any]) -> str | None:
    """Returns why ``record`` is not an approval (None when its latest decision is ``approve``).

    This reads the record itself, so whatever signature covers the record covers this too: an evaluation
    record signed with ``quotecheck sign`` has no decisions and can never pass for an approved one.
    """
    if is_approved(record):
        return None
    decisions = record.get("decisions") or []
    if not decisions:
        return ("the record carries no approval decision (its decisions list is empty): it is an evaluation "
                "that nobody approved through the approval workflow")
    latest = decisions[-1] if isinstance(decisions[-1], dict) else {}
    return (f"the record's latest decision is {latest.get('action')!r} by {latest.get('actor')!r}, "
            "not an approval")

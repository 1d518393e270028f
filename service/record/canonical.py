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

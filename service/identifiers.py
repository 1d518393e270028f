"""Identifiers and digests the service hands out: record and submission ids, body digests, ETags."""

from __future__ import annotations

import uuid
from typing import Any

from schemas.canonical_json import digest_of


def new_id() -> str:
    """Returns a fresh public identifier (a random UUID, so ids reveal nothing about volume)."""
    return str(uuid.uuid4())


def body_digest(document: Any) -> str:
    """Returns ``sha256:<hex>`` of the canonical JSON of a request body (what the audit log records)."""
    return digest_of(document)


def etag_of(version: int) -> str:
    """Returns the strong ETag (quoted) of a submission at ``version``."""
    return f'"v{version}"'

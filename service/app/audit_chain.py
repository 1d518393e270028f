"""The audit log's hash chain as `quotecheck audit verify` checks it: every link, and what a signed record anchored.

The chain itself and its anchors are kept by service/persistence/audit.py; this is the operation the command line
runs over them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from flask import Flask

from service.persistence import audit
from service.persistence.audit import Anchor, AnchorCheck, Verification
from service.persistence.db import get_db

__all__ = ["Anchor", "ChainCheck", "anchor_of", "verify_chain"]


class ChainCheck(NamedTuple):
    """The chain's verification and, when a record's anchor was given, whether the chain still holds it."""
    chain: Verification
    anchor: AnchorCheck | None


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

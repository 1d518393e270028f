"""DRAFT PDFs, rendered once per record digest and renderer and kept in the database (``draft_pdf``).

A record that is not signed (an evaluation, a rejected quote's final record) is served as a DRAFT PDF.
Its document never changes under its digest, so the draft is rendered on the first request and every
later request, in any API process, is served the stored bytes. The database, not a process's memory,
holds them, so gunicorn's workers and every API machine share one render.

Two first requests at once do not render twice: the first inserts the row as a claim (``pdf`` NULL) and
renders outside any transaction; the others find the claim and wait for the PDF (polling the row, at most
``DRAFT_PDF_WAIT_S``). A claim is a lease (service/persistence/leases.py): one older than
``DRAFT_PDF_CLAIM_STALE_S`` is taken over (its renderer died); a render that fails drops its claim, so the next
request renders again.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from flask import current_app
from sqlalchemy import delete, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from service.errors import ServiceUnavailable
from service.persistence import leases
from service.persistence.db import get_db
from service.persistence.models import DraftPdf, Record
from service.record.render import draft_pdf, renderer_digest

# Seconds between two looks at a draft another request is rendering: the first look soon, then less often.
POLL_FIRST_S = 0.05
POLL_MAX_S = 0.5


def _aware(moment: datetime) -> datetime:
    # SQLite keeps no zone: what it stored as UTC is read back naive.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _find(session: Any, key: tuple[str, str]) -> DraftPdf | None:
    return session.get(DraftPdf, key, populate_existing=True)


def _claim(key: tuple[str, str], now: datetime, stale_s: float) -> tuple[bytes | None, bool, datetime | None]:
    """Returns (the stored PDF, whether this request now holds the claim, when the standing claim was made).

    Inserts the claim when there is no row; takes over a claim older than ``stale_s``.
    """
    db = get_db()
    with db.session() as session:
        row = _find(session, key)
        if row is not None and row.pdf is not None:
            return row.pdf, False, None
        if row is None:
            session.add(DraftPdf(record_digest=key[0], renderer=key[1], claimed_at=now))
            try:
                session.commit()
            except IntegrityError:
                # Another request claimed it first: wait for its render.
                return None, False, now
            return None, True, None
        claimed_at = _aware(row.claimed_at)
        if not leases.is_stale(claimed_at, now, stale_s):
            return None, False, claimed_at
        taken = leases.take(session, DraftPdf, col(DraftPdf.record_digest) == key[0],
                            col(DraftPdf.renderer) == key[1], col(DraftPdf.pdf).is_(None),
                            leases.stale(col(DraftPdf.claimed_at), now, stale_s), claimed_at=now)
        session.commit()
        return None, taken, claimed_at


def _store(key: tuple[str, str], pdf: bytes, now: datetime) -> None:
    """Stores the rendered draft under ``key`` and drops the drafts other renderers made of the same record."""
    values = {"pdf": pdf, "pdf_digest": "sha256:" + hashlib.sha256(pdf).hexdigest(), "rendered_at": now}
    with get_db().session() as session:
        written = session.execute(update(DraftPdf).where(col(DraftPdf.record_digest) == key[0],
                                                         col(DraftPdf.renderer) == key[1])
                                  .values(**values).execution_options(synchronize_session=False))
        if written.rowcount == 0:  # the claim was dropped meanwhile: store the render all the same
            session.add(DraftPdf(record_digest=key[0], renderer=key[1], claimed_at=now, **values))
        session.execute(delete(DraftPdf).where(col(DraftPdf.record_digest) == key[0],
                                               col(DraftPdf.renderer) != key[1]))
        try:
            session.commit()
        except IntegrityError:  # stored by a request that took over a claim it thought stale: that one stands
            session.rollback()


def _release(key: tuple[str, str]) -> None:
    """Drops this request's claim after its render failed, so that the next request renders again."""
    with get_db().session() as session:
        session.execute(delete(DraftPdf).where(col(DraftPdf.record_digest) == key[0],
                                               col(DraftPdf.renderer) == key[1], col(DraftPdf.pdf).is_(None)))
        session.commit()


def cached_draft_pdf(record: Record, clock: Callable[[], datetime],
                     render: Callable[[dict[str, Any]], bytes] | None = None) -> bytes:
    """Returns the DRAFT PDF of ``record``: the stored one, else rendered now (once) and stored.

    Keyed by the record's digest and ``renderer_digest()``; ``render`` (default ``render.draft_pdf``) draws
    it. When another request is rendering the same draft, waits for it up to ``DRAFT_PDF_WAIT_S``;
    ServiceUnavailable after that (ask again).
    """
    key = (record.digest, renderer_digest())
    wait_s = float(current_app.config["DRAFT_PDF_WAIT_S"])
    stale_s = float(current_app.config["DRAFT_PDF_CLAIM_STALE_S"])
    deadline = time.monotonic() + wait_s
    pause = POLL_FIRST_S
    while True:
        pdf, claimed, claimed_at = _claim(key, clock(), stale_s)
        if pdf is not None:
            return pdf
        if claimed:
            break
        if time.monotonic() >= deadline:
            since = f" since {claimed_at.isoformat()}" if claimed_at else ""
            raise ServiceUnavailable(f"the DRAFT PDF of record {record.id} is being rendered by another request"
                                     f"{since}; ask again in a few seconds")
        time.sleep(pause)
        pause = min(pause * 2, POLL_MAX_S)
    try:
        # Outside any transaction: a render takes a second or two and needs no database.
        pdf = (render or draft_pdf)(record.document)
    except BaseException:
        _release(key)
        raise
    _store(key, pdf, clock())
    return pdf

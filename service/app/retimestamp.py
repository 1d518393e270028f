"""`quotecheck records retimestamp`: a new document timestamp on every stored signed PDF (records and addenda).

A B-LTA PDF stays verifiable as long as its latest document timestamp does: before that timestamp's TSA
certificate expires (or its algorithms weaken), the validation data of the TSA is added to the PDF's DSS and a new
document timestamp covers everything (service.record.pades.add_document_timestamp). The PDF grows by an
incremental update; the signed bytes, and the record they sign, do not change. The stored PDF is replaced only if
it is still the one that was read (two runs at once do not lose one's timestamp), and each replacement is audited
with both digests (``record.pdf_retimestamped``, ``addendum.pdf_retimestamped``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from flask import Flask
from sqlalchemy import update
from sqlmodel import col, select

from service.approval.workflow import State
from service.persistence import audit
from service.persistence.db import get_db
from service.persistence.models import Addendum, AddendumPdf, Record, RecordPdf
from service.record import SigningError, signing_keys
from service.record.pades import add_document_timestamp


@dataclass(frozen=True)
class Retimestamped:
    """One stored PDF: what it is, and what became of it (``error`` None when it was timestamped anew)."""

    kind: str  # record or addendum
    id: str
    previous_digest: str
    digest: str | None = None
    error: str | None = None


def _digest(pdf: bytes) -> str:
    return "sha256:" + hashlib.sha256(pdf).hexdigest()


def retimestamp_stored_pdfs(app: Flask, now: datetime) -> list[Retimestamped]:
    """Returns what became of each stored signed PDF after asking the TSA for a new document timestamp on it.

    SigningError when no TSA is configured. A PDF the TSA (or an OCSP responder or CRL) fails on keeps its bytes
    and is reported with the error; the others go on.
    """
    keys = signing_keys(app)
    if keys.tsa is None:
        raise SigningError("no TSA is configured: set TSA_URL and TSA_TRUST_ROOT_FILE")
    db = get_db(app)
    with db.session() as session:
        records = session.exec(select(RecordPdf.record_id).order_by(col(RecordPdf.created_at))).all()
        addenda = session.exec(select(AddendumPdf.addendum_id).order_by(col(AddendumPdf.created_at))).all()
    outcomes = []
    for kind, model, key, ids in (("record", RecordPdf, "record_id", records),
                                  ("addendum", AddendumPdf, "addendum_id", addenda)):
        for stored_id in ids:
            with db.session() as session:
                row = session.get(model, stored_id)
                pdf, previous = row.pdf, row.pdf_digest  # type: ignore[union-attr]
                owner = session.get(Record if kind == "record" else Addendum,
                                    row.record_id if kind == "record" else row.addendum_id)  # type: ignore[union-attr]
                submission_id = owner.submission_id if owner is not None else None
            try:
                renewed = add_document_timestamp(pdf, keys)
            except SigningError as error:
                outcomes.append(Retimestamped(kind, stored_id, previous, error=str(error)))
                continue
            digest = _digest(renewed)
            with db.session() as session:
                written = session.execute(update(model).where(getattr(model, key) == stored_id,
                                                              col(model.pdf_digest) == previous)
                                          .values(pdf=renewed, pdf_digest=digest))
                if written.rowcount != 1:
                    outcomes.append(Retimestamped(kind, stored_id, previous, error="the stored PDF changed meanwhile; "
                                                  "run again"))
                    continue
                audit.append(session, action=f"{kind}.pdf_retimestamped", actor=None, occurred_at=now,
                             submission_id=submission_id, before_state=State.APPROVED, after_state=State.APPROVED,
                             detail={f"{kind}_id": stored_id, "previous_pdf_digest": previous, "pdf_digest": digest,
                                     "bytes": len(renewed)})
                session.commit()
            outcomes.append(Retimestamped(kind, stored_id, previous, digest))
    return outcomes

"""Records and signing: the stored records, their signed envelopes, and their signed PDFs.

A final record is stored when a decision ends the workflow (service/approval/store.py) or a purchase order issues
its next version (service/approval/purchase_orders.py); an approved one is signed when it is issued. Its signed
PDF is issued once, by ``issue_signed_pdf``, whether the API renders it for a request or a worker does
(workers/tasks.py), and served unchanged from then on.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

import rfc8785
from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from service.accounts.actors import Actor
from service.accounts.visibility import may_see
from service.approval.workflow import State
from service.errors import NotFound, WorkflowConflict
from service.identifiers import body_digest
from service.persistence import audit
from service.persistence.db import get_db
from service.persistence.models import Record, RecordPdf
from service.record import SigningKeys, is_approved, sign_record
from service.record.render import signed_pdf


def record_pdf_key(record_id: str, record_digest: str) -> str:
    """Returns the idempotency key of rendering one issued record's signed PDF (its id and content digest)."""
    identity = {"record_id": record_id, "record_digest": record_digest}
    return "sha256:" + hashlib.sha256(rfc8785.dumps(identity)).hexdigest()


def engine_policy(record: dict[str, Any]) -> dict[str, str]:
    """Returns the engine and policy versions of a record, as audit.append takes them."""
    return {"engine_version": record["engine"]["version"], "policy_version": record["policy"]["version"]}


def store_final_record(session: Session, submission_id: str, evaluation_id: int, document: dict[str, Any],
                        now: datetime, keys: SigningKeys | None, supersedes: Record | None = None) -> Record:
    """Returns the stored final record, with its signed envelope when it is approved and ``keys`` are given."""
    envelope = sign_record(document, keys, now=now) if keys is not None and is_approved(document) else None
    record = Record(id=document["record_id"], submission_id=submission_id, evaluation_id=evaluation_id,
                    kind="final", document=document, digest=body_digest(document), created_at=now,
                    issue=document["issue"], supersedes_id=supersedes.id if supersedes else None, envelope=envelope)
    session.add(record)
    session.flush()
    return record


def get_record(session: Session, record_id: str) -> Record:
    """Returns the record with ``record_id``; NotFound when there is none."""
    record = session.get(Record, record_id, populate_existing=True)
    if record is None:
        raise NotFound(f"there is no record {record_id!r}")
    return record


def visible_record(session: Session, actor: Actor, record_id: str) -> Record:
    """Returns the record with ``record_id``; NotFound when there is none or ``actor`` may not see its submission."""
    record = get_record(session, record_id)
    if not may_see(session, actor, record.submission_id):
        raise NotFound(f"there is no record {record_id!r}")
    return record


def is_signed_record(record: Record) -> bool:
    """Returns True for a record that is issued signed: a final record whose latest decision is an approval."""
    return record.kind == "final" and is_approved(record.document)


def successor_of(session: Session, record: Record) -> Record | None:
    """Returns the issue that superseded ``record``, if any."""
    return session.exec(select(Record).where(col(Record.supersedes_id) == record.id)).first()


def latest_issue(session: Session, submission_id: str) -> Record | None:
    """Returns the newest issue of a submission's final record (None before approval or rejection)."""
    return session.exec(select(Record).where(Record.submission_id == submission_id, Record.kind == "final")
                        .order_by(col(Record.issue).desc()).limit(1)
                        .execution_options(populate_existing=True)).first()


def signed_envelope(session: Session, actor: Actor, record: Record, keys: SigningKeys, now: datetime) -> dict[str, Any]:
    """Returns the signed envelope of an approved final record, signing it now if it was issued unsigned.

    Records are signed when they are issued; one issued before signing existed (or without keys) is signed
    on first read, once: of two readers that sign at once, the first write wins and both return it. The
    caller commits.
    """
    if record.envelope is not None:
        return record.envelope
    if not is_signed_record(record):
        raise WorkflowConflict(f"record {record.id} is not an approved final record; only those are signed")
    envelope = sign_record(record.document, keys, now=now)
    written = session.execute(update(Record).where(col(Record.id) == record.id, col(Record.envelope).is_(None))
                              .values(envelope=envelope).execution_options(synchronize_session=False))
    if written.rowcount == 1:
        audit.append(session, action="record.signed", actor=actor, occurred_at=now, submission_id=record.submission_id,
                     input_digest=record.digest, before_state=State.APPROVED, after_state=State.APPROVED,
                     **engine_policy(record.document),
                     detail={"record_id": record.id, "record_digest": record.digest,
                             "key_id": envelope["signature"]["key_id"],
                             "signed_at": envelope["signature"]["signed_at"]})
        session.flush()
        return envelope
    return get_record(session, record.id).envelope or envelope


def stored_pdf(session: Session, record: Record) -> RecordPdf | None:
    """Returns the signed PDF issued for ``record``, if it was rendered before."""
    return session.get(RecordPdf, record.id, populate_existing=True)


def _store_pdf(session: Session, actor: Actor, record: Record, pdf: bytes, now: datetime) -> RecordPdf:
    """Returns the stored signed PDF of ``record``, audited with its digest. The caller commits.

    Raises IntegrityError (at flush or commit) when another request stored one first; that one stands.
    """
    digest = "sha256:" + hashlib.sha256(pdf).hexdigest()
    row = RecordPdf(record_id=record.id, record_digest=record.digest, pdf_digest=digest, pdf=pdf, created_at=now)
    session.add(row)
    session.flush()
    audit.append(session, action="record.pdf_issued", actor=actor, occurred_at=now, submission_id=record.submission_id,
                 input_digest=record.digest, before_state=State.APPROVED, after_state=State.APPROVED,
                 **engine_policy(record.document),
                 detail={"record_id": record.id, "record_digest": record.digest, "pdf_digest": digest,
                         "bytes": len(pdf)})
    return row


def issue_signed_pdf(actor: Actor, record: Record, keys: SigningKeys, now: datetime) -> RecordPdf:
    """Returns the stored signed PDF of approved final ``record``, rendering, signing and storing it first if needed.

    The one way a signed PDF comes to be, for a request (service/api/records.py) and a worker
    (workers/tasks.py) alike: the record's envelope is signed first if it was issued unsigned
    (``signed_envelope``) and attached as it is; the PDF is rendered outside any transaction (about a
    second), then stored and audited (``record.pdf_issued``). Of two renders at once the first stored
    stands and both return it. WorkflowConflict for any other record: a DRAFT is never signed: it is
    rendered once and kept apart (service/approval/draft_pdfs.py).
    """
    if not is_signed_record(record):
        raise WorkflowConflict(f"record {record.id} is not an approved final record: only an approved record's PDF "
                               "is signed and stored; GET its .pdf for the DRAFT")
    db = get_db()
    with db.session() as session:
        envelope = signed_envelope(session, actor, record, keys, now)
        session.commit()
        stored = stored_pdf(session, record)
    if stored is not None:
        return stored
    pdf = signed_pdf(record.document, keys, envelope=envelope)
    try:
        with db.session() as session:
            stored = _store_pdf(session, actor, record, pdf, now)
            session.commit()
            return stored
    except IntegrityError:
        # Another render stored this record's PDF first; that one stands, and this render is dropped.
        with db.session() as session:
            stored = stored_pdf(session, record)
        if stored is None:
            raise
        return stored

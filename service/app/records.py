"""Records: an approved record read as its signed envelope or signed PDF, any other as an unsigned draft, and a
purchase order linked to an approved one.

The API (``GET /api/v1/records/{id}.json|.pdf``) and the reviewer pages' downloads both read records here, for
the same actor rules (a token of scope ``own`` finds only its own records) and the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime

from flask import url_for
from sqlmodel import Session

from service.accounts.actors import Actor
from service.app import tasks
from service.approval import draft_pdfs, purchase_orders, record_store
from service.persistence.db import get_db
from service.persistence.models import Record
from service.record import SigningKeys, canonical_bytes, signing_keys
from service.tasks import task_runs, tasks_port


@dataclass(frozen=True)
class RecordRead:
    """What a read of a record gives: ``body`` (a JSON document or a PDF), whether it is signed, and the other
    versions of a final record as ``(record id, relation)``; ``task_id`` names the task rendering a signed PDF
    not rendered yet (``body`` is then empty)."""

    record: Record
    body: bytes
    signed: bool
    versions: list[tuple[str, str]]
    task_id: str | None = None


def versions(session: Session, record: Record) -> list[tuple[str, str]]:
    """Returns the RFC 5829 relations of a final record's other versions (none for an evaluation record)."""
    if record.kind != "final":
        return []
    links = []
    latest = record_store.latest_issue(session, record.submission_id)
    if latest is not None and latest.id != record.id:
        links.append((latest.id, "latest-version"))
    if record.supersedes_id:
        links.append((record.supersedes_id, "predecessor-version"))
    successor = record_store.successor_of(session, record)
    if successor is not None:
        links.append((successor.id, "successor-version"))
    return links


def read_record(actor: Actor, record_id: str, now: datetime) -> RecordRead:
    """Returns an approved record as its signed envelope, any other as the record itself (canonical JSON)."""
    with get_db().session() as session:
        record = record_store.visible_record(session, actor, record_id)
        signed = record_store.is_signed_record(record)
        if signed:
            envelope = record_store.signed_envelope(session, actor, record, signing_keys(), now)
            body = canonical_bytes(envelope)
            session.commit()  # only writes when a record issued before signing existed is signed now
        else:
            body = canonical_bytes(record.document)
        return RecordRead(record, body, signed, versions(session, record))


def read_record_pdf(actor: Actor, record_id: str, clock: Callable[[], datetime], respond_async: bool) -> RecordRead:
    """Returns a record's PDF: signed (PAdES) when approved, otherwise an unsigned DRAFT.

    A signed PDF not rendered yet is rendered by a worker when a broker is configured or ``respond_async``:
    the read then names the task (``task_id``); otherwise it is rendered now and stored.
    """
    with get_db().session() as session:
        record = record_store.visible_record(session, actor, record_id)
        signed = record_store.is_signed_record(record)
        stored = record_store.stored_pdf(session, record) if signed else None
        links = versions(session, record)
    if not signed:
        return RecordRead(record, draft_pdfs.cached_draft_pdf(record, clock), False, links)
    if stored is None and (tasks_port.runs_in_background() or respond_async):
        row, send = tasks.issue(actor, task_runs.RECORD_PDF, record_store.record_pdf_key(record.id, record.digest), 1,
                                clock(), [record.id, asdict(actor)], submission_id=record.submission_id)
        if send:
            tasks.send(row)
        return RecordRead(record, b"", True, links, task_id=row.id)
    if stored is None:
        stored = record_store.issue_signed_pdf(actor, record, signing_keys(), clock())
    return RecordRead(record, stored.pdf, True, links)


def submission_of(actor: Actor, record_id: str) -> str:
    """Returns the id of the submission whose record ``record_id`` is (NotFound when ``actor`` may not see it)."""
    with get_db().session() as session:
        return record_store.visible_record(session, actor, record_id).submission_id


def link_purchase_order(actor: Actor, record_id: str, po_number: str, system: str, request_digest: str,
                        keys: SigningKeys, now: datetime) -> tuple[Record, bool]:
    """Returns the newest version of an approved record, listing the order, and whether linking it issued that
    version now (False: the order was linked already, nothing changed)."""
    with get_db().session() as session:
        record, linked = purchase_orders.link_purchase_order(session, actor, record_id, po_number, system,
                                                             request_digest, keys, now)
        if linked:
            session.commit()
    return record, linked


def purchase_order_link(record: Record, po_number: str, system: str, linked: bool) -> dict:
    """Returns the answer to linking a purchase order: the order, the record version listing it, its links."""
    orders = record.document.get("purchase_orders") or []
    order = next(po for po in orders if po["po_number"] == po_number and po["system"] == system)
    links = {"record": url_for("records.get_record", record_id=record.id),
             "pdf": url_for("records.get_record_pdf", record_id=record.id)}
    supersedes = record.document.get("supersedes")
    if supersedes:
        links["previous"] = url_for("records.get_record", record_id=supersedes["record_id"])
    return {"record_id": record.id, "issue": record.issue or 1, "record_digest": record.digest,
            "supersedes": supersedes, "purchase_order": order, "purchase_orders": orders, "linked": linked,
            "links": links}

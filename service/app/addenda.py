"""As-built addenda of approved records, and the calibration of the estimators they measured.

The API (``POST``/``GET /api/v1/records/{id}/addenda``, ``GET /api/v1/calibration``) attaches and reads them
here: the approved submission is re-evaluated with the measurements merged in, outside any transaction, and the
signed addendum issued (service/approval/addenda.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flask import url_for
from sqlalchemy.exc import IntegrityError

from rules.advice.as_built import calibration
from service.accounts.actors import Actor
from service.app import evaluation
from service.approval import addenda
from service.persistence.db import get_db
from service.persistence.models import Addendum, AddendumPdf
from service.record import signing_keys
from service.record.addendum_pdf import signed_addendum_pdf


@dataclass(frozen=True)
class SignedAddendum:
    """An addendum as served: its signed envelope, and the ids that name it."""

    record_id: str
    addendum_id: str
    envelope: dict[str, Any]


def _signed(row: Addendum) -> SignedAddendum:
    return SignedAddendum(row.record_id, row.id, row.envelope)


def attach(actor: Actor, record_id: str, measurements: dict[str, Any], note: str | None, request_digest: str,
           now: datetime) -> tuple[SignedAddendum, bool]:
    """Returns the addendum of ``measurements`` attached to an approved record and whether this call issued it
    (False: the same measurements and note were attached before, and that addendum is returned unchanged)."""
    db = get_db()
    with db.session() as session:
        prepared = addenda.prepare(session, actor, record_id, measurements, request_digest)
    if prepared.existing is not None:
        return _signed(prepared.existing), False
    # The engine runs outside any transaction (up to about a second for a large training submission).
    as_built = evaluation.evaluate_submission(prepared.merged, now)
    document = addenda.addendum_document(prepared, as_built, actor, now, note, measurements)
    row, issued = addenda.issue_or_find(db, actor, prepared, document, request_digest, signing_keys(), now)
    return _signed(row), issued


def self_link(record_id: str, addendum_id: str) -> str:
    return url_for("addenda.get_addendum", record_id=record_id, addendum_id=addendum_id)


def _summary(row: Addendum) -> dict[str, Any]:
    document = row.document
    return {"addendum_id": row.id, "record_id": row.record_id, "record_digest": document["record"]["digest"],
            "digest": row.digest, "verdict": row.verdict, "record_verdict": document["record"]["verdict"],
            "changes": document["changes"], "measured_checks": document["measured_checks"],
            "estimators": [pair["estimator"] for pair in document["estimates"]],
            "issued_at": document["issued_at"], "actor": row.actor, "note": document.get("note"),
            "links": {"self": self_link(row.record_id, row.id),
                      "record": url_for("records.get_record", record_id=row.record_id)}}


def summaries(actor: Actor, record_id: str) -> list[dict[str, Any]]:
    """Returns the summaries of the addenda of every version of a record's final record, oldest first."""
    with get_db().session() as session:
        return [_summary(row) for row in addenda.addenda_of(session, actor, record_id)]


def read(actor: Actor, record_id: str, addendum_id: str) -> SignedAddendum:
    """Returns one addendum of a version of ``record_id``'s record; NotFound otherwise."""
    with get_db().session() as session:
        return _signed(addenda.get_addendum(session, actor, record_id, addendum_id))


def pdf(actor: Actor, record_id: str, addendum_id: str, now: datetime) -> AddendumPdf:
    """Returns the signed PDF of one addendum, rendering, signing and storing it on the first request.

    Rendered outside any transaction; of two first requests at once the first stored stands and both return it.
    """
    db = get_db()
    with db.session() as session:
        row = addenda.get_addendum(session, actor, record_id, addendum_id)
        stored = addenda.stored_pdf(session, row.id)
    if stored is not None:
        return stored
    data = signed_addendum_pdf(row.envelope, signing_keys())
    try:
        with db.session() as session:
            stored = addenda.store_pdf(session, actor, row, data, now)
            session.commit()
            return stored
    except IntegrityError:
        with db.session() as session:
            stored = addenda.stored_pdf(session, row.id)
        if stored is None:
            raise
        return stored


def calibration_of(actor: Actor) -> dict[str, Any]:
    """Returns how many addenda ``actor`` may see and measured / estimated per estimator over them."""
    with get_db().session() as session:
        count, points = addenda.calibration_points(session, actor)
    return {"addenda": count, "estimators": calibration(points)}

"""As-built addenda: the acceptance measurements of a delivered system, attached to its approved record, signed.

The approved record is never changed. An addendum is a document of its own (schemas/addendum.schema.json):
the approved submission re-evaluated with the measurements merged in (rules.advice.as_built), naming the record
by id and digest, signed with the service's key in the envelope records use, and stored with one
calibration point per estimator it measured (GET /api/v1/calibration). Issuing one is three steps, so the
evaluation runs outside any transaction: ``prepare`` (reads), the engine, ``store_addendum`` (writes).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from rules.advice.as_built import compare, merged_submission
from rules.errors import Problem
from rules.evaluate import submission_digest, validate_submission
from service.accounts.actors import Actor
from service.accounts.visibility import own_submissions
from service.approval import record_store, store
from service.approval.workflow import State
from service.errors import Forbidden, InvalidRequest, NotFound, WorkflowConflict
from service.identifiers import new_id
from service.persistence import audit
from service.persistence.models import Addendum, AddendumPdf, CalibrationPoint, Record, Revision, Submission
from service.record import SigningKeys, sign_record

ADDENDUM_VERSION = "1"
KIND = "as-built"
MEASUREMENTS = "/measurements"


@dataclass(frozen=True)
class Prepared:
    """What an addendum is issued from: the approved record, its submission, and the document to evaluate."""

    record: Record
    document: dict[str, Any]  # the approved submission
    merged: dict[str, Any]  # the approved submission with the measurements merged in
    existing: Addendum | None = None  # the addendum of the same body issued before (nothing to do)


def approved_record(session: Session, actor: Actor, record_id: str) -> Record:
    """Returns the approved final record ``record_id``; NotFound, or WorkflowConflict for any other record."""
    record = record_store.visible_record(session, actor, record_id)
    if record_store.is_signed_record(record):
        return record
    if record.kind == "evaluation":
        final = record_store.latest_issue(session, record.submission_id)
        hint = (f"; attach them to the approved final record {final.id}"
                if final is not None and record_store.is_signed_record(final) else "; approve the quote first")
        what = "an evaluation record"
    else:
        hint, what = "", f"the final record of a {State.REJECTED} quote"
    raise WorkflowConflict(f"record {record.id} is {what}, not an approved one: as-built measurements are attached "
                           f"to approved records only{hint}")


def _approved_document(session: Session, record: Record) -> dict[str, Any]:
    """Returns the submitted document the record approved (its revision), checked against the record's digest."""
    named = record.document["submission"]
    revision = session.exec(select(Revision).where(Revision.submission_id == record.submission_id,
                                                   Revision.number == named["revision"])).one()
    if revision.digest != named["digest"]:  # the stored revision is what the record names, or nothing is issued
        raise WorkflowConflict(f"revision {revision.number} of submission {record.submission_id} has digest "
                               f"{revision.digest}, but record {record.id} names {named['digest']}")
    return revision.document


def find(session: Session, record_id: str, input_digest: str) -> Addendum | None:
    """Returns the addendum issued for ``record_id`` from a body of ``input_digest``, if any."""
    return session.exec(select(Addendum).where(Addendum.record_id == record_id,
                                               Addendum.input_digest == input_digest)).first()


def prepare(session: Session, actor: Actor, record_id: str, measurements: dict[str, Any],
            input_digest: str) -> Prepared:
    """Returns what an addendum of ``record_id`` is issued from, or the one this body issued before.

    NotFound / WorkflowConflict as ``approved_record``; Forbidden when ``actor`` submitted or revised the
    quote (whoever sold the system does not attest its acceptance); InvalidSubmission when the approved
    submission with the measurements merged in breaks the submission schema.
    """
    record = approved_record(session, actor, record_id)
    if actor.user_id in store.load(session, record.submission_id).author_users():
        raise Forbidden(f"four-eyes rule: {actor.name!r} submitted this quote (or a revision of it) and may not "
                        "attach its acceptance measurements")
    document = _approved_document(session, record)
    existing = find(session, record.id, input_digest)
    merged = merged_submission(document, measurements)
    if existing is None:
        validate_submission(merged, "the approved submission with the measurements merged in")
    return Prepared(record, document, merged, existing)


def _policy_identity(policy: dict[str, Any]) -> dict[str, Any]:
    return {name: policy[name] for name in ("id", "version", "digest")}


def addendum_document(prepared: Prepared, as_built: dict[str, Any], actor: Actor, now: datetime,
                      note: str | None, measurements: dict[str, Any]) -> dict[str, Any]:
    """Returns the addendum (schemas/addendum.schema.json) of ``as_built``, the merged submission's evaluation.

    InvalidRequest when no check is decided on the measurements and no estimate is compared: such an
    addendum would attest nothing.
    """
    record = prepared.record.document
    comparison = compare(record, as_built)
    if not comparison["measured_checks"] and not comparison["estimates"]:
        given = ", ".join(sorted(measurements))
        raise InvalidRequest("the measurements decide nothing in this record",
                             [Problem(MEASUREMENTS, f"no check of record {prepared.record.id} is decided on, and no "
                                                    f"estimate replaced by, the measurements given ({given})")])
    same = (record["engine"]["version"] == as_built["engine"]["version"]
            and record["policy"]["digest"] == as_built["policy"]["digest"])
    submission = record["submission"]
    return {
        "addendum_version": ADDENDUM_VERSION, "kind": KIND, "addendum_id": new_id(),
        "issued_at": audit.timestamp(now), "actor": actor.name, "role": actor.role,
        **({"note": note} if note else {}),
        "record": {"record_id": prepared.record.id, "digest": prepared.record.digest,
                   "issue": prepared.record.issue or 1, "verdict": record["verdict"],
                   "evaluated_at": record["evaluated_at"], "engine": record["engine"],
                   "policy": _policy_identity(record["policy"])},
        "submission": {"id": prepared.record.submission_id, "revision": submission["revision"],
                       "digest": submission["digest"], "as_built_digest": submission_digest(prepared.merged),
                       "vendor": submission.get("vendor"), "quote_id": submission.get("quote_id")},
        "engine": as_built["engine"], "policy": _policy_identity(as_built["policy"]),
        "evaluated_at": as_built["evaluated_at"], "same_engine_and_policy": same,
        "measurements": measurements,
        **comparison,
    }


def store_addendum(session: Session, actor: Actor, prepared: Prepared, document: dict[str, Any],
                   input_digest: str, keys: SigningKeys, now: datetime) -> Addendum:
    """Returns the stored, signed addendum with its calibration points, audited. The caller commits.

    Raises IntegrityError (at flush or commit) when the same body was attached to the same record meanwhile;
    that addendum stands (``find``).
    """
    record = prepared.record
    # Anchored like a record: the chain's head just before this addendum's addendum.issued event, read under the
    # chain's write lock, which this transaction holds until that event is appended.
    document = {**document, "audit_anchor": audit.anchor(session).as_record_member()}
    envelope = sign_record(document, keys, now=now)
    row = Addendum(id=document["addendum_id"], record_id=record.id, submission_id=record.submission_id,
                   input_digest=input_digest, document=document, digest=envelope["signature"]["record_digest"],
                   envelope=envelope, verdict=document["verdict"], actor=actor.name, created_at=now)
    session.add(row)
    session.flush()
    for pair in document["estimates"]:
        session.add(CalibrationPoint(addendum_id=row.id, submission_id=record.submission_id,
                                     estimator=pair["estimator"], estimated=pair["estimated"],
                                     measured=pair["measured"], ratio=pair["ratio"], optimistic=pair["optimistic"],
                                     created_at=now))
    session.flush()
    audit.append(session, action="addendum.issued", actor=actor, occurred_at=now, submission_id=record.submission_id,
                 input_digest=input_digest, before_state=State.APPROVED, after_state=State.APPROVED,
                 engine_version=document["engine"]["version"], policy_version=document["policy"]["version"],
                 detail={"addendum_id": row.id, "addendum_digest": row.digest, "record_id": record.id,
                         "record_digest": record.digest,
                         "verdict": {"record": document["record"]["verdict"], "as_built": document["verdict"]},
                         "changes": document["changes"],
                         "estimators": [pair["estimator"] for pair in document["estimates"]]})
    return row


def issue_or_find(db: Any, actor: Actor, prepared: Prepared, document: dict[str, Any], input_digest: str,
                  keys: SigningKeys, now: datetime) -> tuple[Addendum, bool]:
    """Returns the addendum and whether this call issued it: of two identical attachments at once the first
    stored stands, and the other returns it."""
    try:
        with db.session() as session:
            row = store_addendum(session, actor, prepared, document, input_digest, keys, now)
            session.commit()
            return row, True
    except IntegrityError:
        with db.session() as session:
            existing = find(session, prepared.record.id, input_digest)
        if existing is None:
            raise
        return existing, False


def addenda_of(session: Session, actor: Actor, record_id: str) -> list[Addendum]:
    """Returns the addenda of every version of ``record_id``'s final record, oldest first (none for any other)."""
    record = record_store.visible_record(session, actor, record_id)
    if record.kind != "final":
        return []
    versions = select(Record.id).where(Record.submission_id == record.submission_id, Record.kind == "final")
    return list(session.exec(select(Addendum).where(col(Addendum.record_id).in_(versions))
                             .order_by(col(Addendum.created_at), col(Addendum.id))).all())


def get_addendum(session: Session, actor: Actor, record_id: str, addendum_id: str) -> Addendum:
    """Returns addendum ``addendum_id`` of a version of ``record_id``'s record; NotFound otherwise."""
    for row in addenda_of(session, actor, record_id):
        if row.id == addendum_id:
            return row
    raise NotFound(f"record {record_id!r} has no addendum {addendum_id!r}")


def calibration_points(session: Session, actor: Actor) -> tuple[int, list[dict[str, Any]]]:
    """Returns how many addenda ``actor`` may see and their calibration points (a token of scope ``own``: its own)."""
    visible = select(Submission.id).where(*own_submissions(actor))
    addenda = session.exec(select(Addendum.id).where(col(Addendum.submission_id).in_(visible))).all()
    points = session.exec(select(CalibrationPoint).where(col(CalibrationPoint.submission_id).in_(visible))
                          .order_by(col(CalibrationPoint.id))).all()
    return len(addenda), [{"estimator": p.estimator, "ratio": p.ratio, "optimistic": p.optimistic} for p in points]


def stored_pdf(session: Session, addendum_id: str) -> AddendumPdf | None:
    """Returns the signed PDF stored for an addendum, if it was rendered before."""
    return session.get(AddendumPdf, addendum_id, populate_existing=True)


def store_pdf(session: Session, actor: Actor, addendum: Addendum, pdf: bytes, now: datetime) -> AddendumPdf:
    """Returns the stored signed PDF of an addendum, audited with its digest (``addendum.pdf_issued``, as a record's
    PDF is); IntegrityError (at flush) when one was stored first. The caller commits."""
    digest = "sha256:" + hashlib.sha256(pdf).hexdigest()
    row = AddendumPdf(addendum_id=addendum.id, pdf_digest=digest, pdf=pdf, created_at=now)
    session.add(row)
    session.flush()
    record = session.get(Record, addendum.record_id)
    document = addendum.document
    audit.append(session, action="addendum.pdf_issued", actor=actor, occurred_at=now,
                 submission_id=record.submission_id, input_digest=addendum.digest,
                 before_state=State.APPROVED, after_state=State.APPROVED,
                 engine_version=document["engine"]["version"], policy_version=document["policy"]["version"],
                 detail={"addendum_id": addendum.id, "addendum_digest": addendum.digest,
                         "record_id": addendum.record_id, "pdf_digest": digest, "bytes": len(pdf)})
    return row

"""Purchase orders: linking one to an approved record issues the record's next version, signed."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col

from service.accounts.actors import Actor
from service.approval.record_store import engine_policy, get_record, is_signed_record, latest_issue, store_final_record
from service.approval.workflow import State
from service.errors import WorkflowConflict
from service.identifiers import new_id
from service.persistence import audit
from service.persistence.models import Record, Submission
from service.record import SigningKeys


def purchase_order_document(po_number: str, system: str, actor: Actor, now: datetime) -> dict[str, Any]:
    """Returns a purchase-order link in the record schema's shape."""
    return {"po_number": po_number, "system": system, "linked_at": audit.timestamp(now), "actor": actor.name,
            "role": actor.role}


def _has_purchase_order(record: Record, po_number: str, system: str) -> bool:
    return any(po.get("po_number") == po_number and po.get("system") == system
               for po in record.document.get("purchase_orders") or [])


def link_purchase_order(session: Session, actor: Actor, record_id: str, po_number: str, system: str,
                        request_digest: str, keys: SigningKeys, now: datetime) -> tuple[Record, bool]:
    """Returns the newest issue of the record that lists the purchase order, and whether this call issued it.

    ``record_id`` may name any issue of an approved final record; the link is added to the newest issue by
    issuing the next one (the same record plus the purchase order, ``supersedes`` the previous issue, signed).
    Linking a (po_number, system) pair that is already listed changes nothing (False). WorkflowConflict for
    any record that is not an approved final record. The caller commits only when this returns True.
    """
    record = get_record(session, record_id)
    if not is_signed_record(record):
        what = ("an evaluation record" if record.kind == "evaluation" else
                f"the final record of a {State.REJECTED} quote")
        hint = ""
        if record.kind == "evaluation":
            final = latest_issue(session, record.submission_id)
            approved = final is not None and is_signed_record(final)
            hint = f"; link it to the approved final record {final.id}" if approved else "; approve the quote first"
        raise WorkflowConflict(f"record {record.id} is {what}, not an approved one: purchase orders are linked to "
                               f"approved records only{hint}")
    latest = latest_issue(session, record.submission_id)
    assert latest is not None  # ``record`` itself is a final record of this submission
    if _has_purchase_order(latest, po_number, system):
        return latest, False
    # Linking is a change of the submission (its final record changes): bump its version unconditionally.
    # As the transaction's first write this also queues concurrent links of the same submission, so the
    # newest issue read next is current and each link extends the chain rather than forking it.
    session.execute(update(Submission).where(col(Submission.id) == record.submission_id)
                    .values(version=Submission.version + 1, updated_at=now)
                    .execution_options(synchronize_session=False))
    latest = latest_issue(session, record.submission_id)
    assert latest is not None
    if _has_purchase_order(latest, po_number, system):
        return latest, False
    issue = (latest.issue or 1) + 1
    document = {**latest.document, "record_id": new_id(), "issue": issue,
                "supersedes": {"record_id": latest.id, "digest": latest.digest},
                "purchase_orders": [*(latest.document.get("purchase_orders") or []),
                                    purchase_order_document(po_number, system, actor, now)],
                "audit_anchor": audit.anchor(session).as_record_member()}
    issued = store_final_record(session, latest.submission_id, latest.evaluation_id, document, now, keys,
                                 supersedes=latest)
    audit.append(session, action="purchase_order.linked", actor=actor, occurred_at=now,
                 submission_id=latest.submission_id, input_digest=request_digest, before_state=State.APPROVED,
                 after_state=State.APPROVED, **engine_policy(document),
                 detail={"po_number": po_number, "system": system, "record_id": issued.id,
                         "record_digest": issued.digest, "issue": issue,
                         "supersedes": {"record_id": latest.id, "record_digest": latest.digest}})
    return issued, True

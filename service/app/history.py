"""A submission's revisions as the pages show them: each revision's document and evaluation record, and the
difference of the checks between two revisions (service.approval.workflow.diff_checks, as a revision's response has
it). Read by the submission page and its downloads (service/ui)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from service.accounts.actors import Actor
from service.accounts.visibility import ensure_visible
from service.approval import workflow
from service.errors import NotFound
from service.persistence.db import get_db
from service.persistence.models import Evaluation, Record, Revision


@dataclass(frozen=True)
class RevisionRow:
    number: int
    author: str
    created_at: Any
    digest: str
    verdict: str | None
    record_id: str | None
    summary: dict[str, int]


def revisions(session: Session, submission_id: str) -> list[RevisionRow]:
    """Returns every revision of a submission, oldest first, with the verdict and record of its evaluation."""
    evaluations = {e.revision: e for e in session.exec(select(Evaluation)
                                                       .where(Evaluation.submission_id == submission_id)
                                                       .order_by(col(Evaluation.id))).all()}
    records = {r.evaluation_id: r for r in session.exec(select(Record).where(Record.submission_id == submission_id,
                                                                             Record.kind == "evaluation")).all()}
    rows = []
    for revision in session.exec(select(Revision).where(Revision.submission_id == submission_id)
                                 .order_by(col(Revision.number))).all():
        evaluation = evaluations.get(revision.number)
        record = records.get(evaluation.id) if evaluation is not None else None
        rows.append(RevisionRow(revision.number, revision.author, revision.created_at, revision.digest,
                                evaluation.verdict if evaluation else None, record.id if record else None,
                                (record.document.get("summary") or {}) if record else {}))
    return rows


def revision_document(session: Session, submission_id: str, number: int) -> dict[str, Any]:
    """Returns the document of revision ``number`` as it was submitted; NotFound when there is no such revision."""
    document = session.exec(select(Revision.document).where(Revision.submission_id == submission_id,
                                                            Revision.number == number)).first()
    if document is None:
        raise NotFound(f"submission {submission_id!r} has no revision {number}")
    return document


def visible_revision_document(actor: Actor, submission_id: str, number: int) -> dict[str, Any]:
    """Returns the document of revision ``number`` as it was submitted, when ``actor`` may see the submission;
    NotFound otherwise, or when there is no such revision."""
    with get_db().session() as session:
        ensure_visible(session, actor, submission_id)
        return revision_document(session, submission_id, number)


def evaluation_record(session: Session, submission_id: str, number: int) -> dict[str, Any]:
    """Returns the evaluation record of revision ``number`` (its newest evaluation); NotFound when there is none."""
    evaluation = session.exec(select(Evaluation).where(Evaluation.submission_id == submission_id,
                                                       Evaluation.revision == number)
                              .order_by(col(Evaluation.id).desc())).first()
    if evaluation is None:
        raise NotFound(f"submission {submission_id!r} has no evaluated revision {number}")
    record = session.exec(select(Record).where(Record.evaluation_id == evaluation.id,
                                               Record.kind == "evaluation")).one()
    return record.document


def check_diff(session: Session, submission_id: str, before: int, after: int) -> dict[str, Any]:
    """Returns the verdicts of two revisions and each check whose status or evidence differs between them."""
    old, new = evaluation_record(session, submission_id, before), evaluation_record(session, submission_id, after)
    titles = {c["id"]: c.get("title") for c in [*old["checks"], *new["checks"]]}
    changes = [{**change, "title": titles.get(change["check_id"])}
               for change in workflow.diff_checks(old["checks"], new["checks"])]
    return {"from_revision": before, "to_revision": after,
            "verdict": {"from": old["verdict"], "to": new["verdict"]}, "checks": changes}

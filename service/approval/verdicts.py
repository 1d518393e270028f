"""Verdicts after waivers for lists of submissions (the single submission's view reads its Snapshot)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import date

from sqlalchemy import Select, or_
from sqlmodel import Session, col, func, select

from rules.evaluate import verdict_of
from service.approval import workflow
from service.approval.workflow import WaiverState
from service.persistence.models import CheckResult, Evaluation, Waiver


def unexpired_waivers(today: date) -> Select:
    """Returns the query of the ids of submissions with a waiver that has not expired by ``today``."""
    return select(Waiver.submission_id).where(or_(col(Waiver.expires).is_(None), col(Waiver.expires) >= today))


def effective_verdicts(session: Session, submission_ids: Sequence[str] | Select, today: date) -> dict[str, str]:
    """Returns submission id → verdict after waivers, for those of ``submission_ids`` that have an unexpired waiver.

    The rule of the detail view (``Snapshot.active_waivers``): a waiver counts while it binds to the digest
    of its check's current result and has not expired, and a counted check is ``waived`` (passed) in the
    verdict. A submission without such a waiver is absent: its verdict after waivers is its verdict.
    ``submission_ids`` is a list of ids or a query of them (``select(Submission.id).where(…)``).
    """
    waivers = session.exec(select(Waiver).where(col(Waiver.submission_id).in_(submission_ids),
                                                or_(col(Waiver.expires).is_(None), col(Waiver.expires) >= today))).all()
    if not waivers:
        return {}
    waived = {w.submission_id for w in waivers}
    current = dict(session.exec(select(Evaluation.submission_id, func.max(Evaluation.id))
                                .where(col(Evaluation.submission_id).in_(list(waived)))
                                .group_by(col(Evaluation.submission_id))).all())
    results: dict[int, list[CheckResult]] = defaultdict(list)
    for result in session.exec(select(CheckResult).where(col(CheckResult.evaluation_id).in_(list(current.values())))):
        results[result.evaluation_id].append(result)
    by_submission: dict[str, list[Waiver]] = defaultdict(list)
    for waiver in waivers:
        by_submission[waiver.submission_id].append(waiver)
    verdicts = {}
    for submission_id, evaluation_id in current.items():
        checks = results[evaluation_id]
        digests = {r.check_id: r.digest for r in checks}
        active = {w.check_id for w in by_submission[submission_id]
                  if workflow.waiver_state(w.result_digest, w.expires, digests.get(w.check_id), today)
                  is WaiverState.ACTIVE}
        verdicts[submission_id] = verdict_of([workflow.effective_status(r.status, r.check_id in active)
                                              for r in checks])
    return verdicts

"""Workflow operations on the database, each inside the caller's transaction.

Every change to a submission starts with a compare-and-set on its version
(``UPDATE submission SET version = version + 1 … WHERE id = :id AND version = :expected``): of two
requests that read the same version, exactly one updates a row, and the other gets 412. Everything a
request read before that statement is therefore still current when it writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select

from service.accounts.actors import Actor
from service.accounts.visibility import ensure_visible
from service.approval import workflow
from service.approval.record_store import engine_policy
from service.approval.workflow import Event, State, WaiverState
from service.errors import Forbidden, NotFound, PreconditionFailed, WorkflowConflict
from service.identifiers import etag_of, new_id
from service.persistence import audit, evaluation_rows
from service.persistence.models import (
    ApiToken,
    CheckResult,
    Decision,
    Evaluation,
    IdempotencyKey,
    Record,
    Revision,
    Submission,
    Waiver,
)
from service.signals import before_compare_and_set


@dataclass
class Snapshot:
    """A submission with everything the workflow decides on: current evaluation, waivers, decisions."""

    submission: Submission
    evaluation: Evaluation
    record: Record
    # The result digest of each check of the evaluation, by check id (what a waiver binds to).
    digests: dict[str, str]
    waivers: list[Waiver]
    decisions: list[Decision]
    # The user of every token that acted on the submission (submitted, revised, waived, decided).
    token_users: dict[int, int]
    final_record: Record | None = None
    revision_token_ids: set[int] = field(init=False, default_factory=set)

    @property
    def checks(self) -> list[dict[str, Any]]:
        return self.record.document["checks"]

    def waiver_state(self, waiver: Waiver, today: date) -> WaiverState:
        return workflow.waiver_state(waiver.result_digest, waiver.expires, self.digests.get(waiver.check_id), today)

    def active_waivers(self, today: date) -> dict[str, Waiver]:
        """Returns the newest active waiver per check id."""
        active: dict[str, Waiver] = {}
        for waiver in self.waivers:
            if self.waiver_state(waiver, today) is WaiverState.ACTIVE:
                active[waiver.check_id] = waiver
        return active

    @property
    def submitter_user(self) -> int:
        """Returns the id of the user who submitted the quote (with whichever of their tokens)."""
        return self.token_users[self.submission.submitter_token_id]

    def author_users(self) -> set[int]:
        """Returns the users who submitted the quote or any revision of it."""
        return {self.submitter_user} | {self.token_users[t] for t in self.revision_token_ids}

    def waiver_users(self) -> set[int]:
        """Returns the users who wrote any waiver on the submission, whatever its state."""
        return {self.token_users[w.author_token_id] for w in self.waivers}

    def _approvals(self) -> dict[int, str]:
        approvals: dict[int, str] = {}
        for decision in self.decisions:
            if decision.action == "approve" and decision.revision == self.submission.revision:
                approvals.setdefault(self.token_users[decision.actor_token_id], decision.actor)
        return approvals

    def approver_users(self) -> set[int]:
        """Returns the distinct users who approved the current revision."""
        return set(self._approvals())

    def approvers(self) -> list[str]:
        """Returns the names of the distinct users who approved the current revision, in order of approval."""
        return list(self._approvals().values())


def load_visible(session: Session, actor: Actor, submission_id: str) -> Snapshot:
    """Returns :func:`load` of a submission ``actor`` may see; NotFound, as for none, when they may not."""
    ensure_visible(session, actor, submission_id)
    return load(session, submission_id)


def load(session: Session, submission_id: str) -> Snapshot:
    """Returns the snapshot of a submission; NotFound when there is none with that id."""
    submission = session.get(Submission, submission_id, populate_existing=True)
    if submission is None:
        raise NotFound(f"there is no submission {submission_id!r}")
    evaluation = session.exec(select(Evaluation).where(Evaluation.submission_id == submission_id)
                              .order_by(col(Evaluation.id).desc())).first()
    if evaluation is None:  # a submission is evaluated in the transaction that creates it
        raise NotFound(f"submission {submission_id!r} has no evaluation")
    records = session.exec(select(Record).where(Record.evaluation_id == evaluation.id)).all()
    record = next(r for r in records if r.kind == "evaluation")
    # The newest issue of the final record (a purchase order linked to it issues the next one).
    final = max((r for r in records if r.kind == "final"), key=lambda r: r.issue or 1, default=None)
    digests = dict(session.exec(select(CheckResult.check_id, CheckResult.digest)
                                .where(CheckResult.evaluation_id == evaluation.id).order_by(col(CheckResult.id))).all())
    waivers = session.exec(select(Waiver).where(Waiver.submission_id == submission_id)
                           .order_by(col(Waiver.id))).all()
    decisions = session.exec(select(Decision).where(Decision.submission_id == submission_id)
                             .order_by(col(Decision.id))).all()
    revision_tokens = set(session.exec(select(Revision.author_token_id)
                                       .where(Revision.submission_id == submission_id)).all())
    token_ids = ({submission.submitter_token_id} | revision_tokens | {w.author_token_id for w in waivers}
                 | {d.actor_token_id for d in decisions})
    token_users = dict(session.exec(select(ApiToken.id, ApiToken.user_id)
                                    .where(col(ApiToken.id).in_(token_ids))).all())
    snap = Snapshot(submission, evaluation, record, digests, list(waivers), list(decisions),
                    token_users, final)
    snap.revision_token_ids = revision_tokens
    return snap


def current_document(session: Session, submission_id: str) -> dict[str, Any]:
    """Returns the submitted document of a submission's current revision; NotFound when there is no such submission."""
    submission = session.get(Submission, submission_id, populate_existing=True)
    if submission is None:
        raise NotFound(f"there is no submission {submission_id!r}")
    return session.exec(select(Revision.document).where(Revision.submission_id == submission_id,
                                                        Revision.number == submission.revision)).one()


def compare_and_set(session: Session, submission_id: str, expected_version: int, **values: Any) -> int:
    """Returns the new version after bumping it from ``expected_version`` and setting ``values``.

    PreconditionFailed when another request changed the submission first. This statement must be the
    first write of the transaction: on SQLite it then waits for the write lock instead of failing.
    """
    before_compare_and_set.send(submission_id, expected_version=expected_version)
    result = session.execute(
        update(Submission)
        .where(col(Submission.id) == submission_id, col(Submission.version) == expected_version)
        .values(version=Submission.version + 1, **values)
        .execution_options(synchronize_session=False))
    if result.rowcount != 1:
        raise PreconditionFailed(f"submission {submission_id} changed since version {expected_version} was read "
                                 f"(If-Match {etag_of(expected_version)}); GET it again, review the change, "
                                 "and retry with its new ETag")
    return expected_version + 1


def _store_evaluation(session: Session, submission: Submission | None, revision: Revision, record: dict[str, Any],
                      now: datetime) -> tuple[Evaluation, Record, dict[str, str]]:
    """Returns the stored evaluation of ``revision`` (stored with it, after ``submission`` when that is new), its
    record and the digest of each check result by check id.

    The rows are written together (service/persistence/evaluation_rows.py): nothing reads them back through the
    session, and the objects returned are built from the values written.
    """
    submission_id = revision.submission_id
    policy = record["policy"]
    evaluation = Evaluation(submission_id=submission_id, revision=revision.number,
                            verdict=record["verdict"], engine_version=record["engine"]["version"],
                            policy_id=policy["id"], policy_version=policy["version"],
                            policy_digest=policy["digest"], created_at=now)
    record_id = new_id()
    document = {**record, "record_id": record_id,
                "submission": {**record["submission"], "id": submission_id, "revision": revision.number}}
    digest, digests = workflow.record_digests(document)
    checks = [{"check_id": check["id"], "status": check["status"], "basis": check["basis"],
               "digest": digests[check["id"]], "evidence": check["evidence"]} for check in record["checks"]]
    stored = Record(id=record_id, submission_id=submission_id, kind="evaluation", document=document, digest=digest,
                    created_at=now)
    evaluation_rows.insert_evaluation(session, submission, revision, evaluation, checks, stored)
    return evaluation, stored, digests


def _evaluation_event(actor: Actor, submission_id: str, before: State, record: dict[str, Any], revision: int,
                      now: datetime) -> audit.Entry:
    return audit.Entry("evaluation.completed", actor, now, submission_id, input_digest=record["submission"]["digest"],
                       before_state=before, after_state=State.EVALUATED,
                       detail={"revision": revision, "verdict": record["verdict"], "summary": record["summary"],
                               "policy_digest": record["policy"]["digest"]},
                       **engine_policy(record))


def find_idempotent(session: Session, token_id: int, key: str) -> IdempotencyKey | None:
    """Returns the stored Idempotency-Key of this token, if it was used before."""
    return session.exec(select(IdempotencyKey).where(IdempotencyKey.token_id == token_id,
                                                     IdempotencyKey.key == key)).first()


def create_submission(session: Session, actor: Actor, document: dict[str, Any], record: dict[str, Any],
                      now: datetime, before_audit: Callable[[Snapshot], None] | None = None) -> Snapshot:
    """Returns the snapshot of a new submission stored with its first revision and evaluation ``record``.

    ``record`` is the evaluation of ``document``: its submission digest is the revision's. The snapshot is
    what ``load`` would read back, built from the rows written. The audit chain is locked last, by its two
    events (submitted, evaluated), so concurrent submitters wait on one another only for that append and the
    commit; ``before_audit(snapshot)`` runs just before it (what may still fail, an Idempotency-Key's unique
    row, fails before this transaction holds the chain).
    """
    submission_id = new_id()
    quote = document.get("quote", {})
    # Its INSERT is the transaction's first write (the first of _store_evaluation's), which takes SQLite's write
    # lock before any read.
    submission = Submission(id=submission_id, state=State.EVALUATED, version=1, revision=1,
                            vendor=quote.get("vendor"), quote_id=quote.get("quote_id"), verdict=record["verdict"],
                            submitter=actor.name, submitter_token_id=actor.token_id, created_at=now, updated_at=now)
    revision = Revision(submission_id=submission_id, number=1, document=document, digest=record["submission"]["digest"],
                        author=actor.name, author_token_id=actor.token_id, created_at=now)
    evaluation, stored, digests = _store_evaluation(session, submission, revision, record, now)
    snap = Snapshot(submission, evaluation, stored, digests, [], [], {actor.token_id: actor.user_id})
    snap.revision_token_ids = {actor.token_id}
    if before_audit is not None:
        before_audit(snap)
    created = audit.Entry("submission.created", actor, now, submission_id, input_digest=revision.digest,
                          before_state=None, after_state=State.SUBMITTED,
                          detail={"revision": 1, "vendor": quote.get("vendor"), "quote_id": quote.get("quote_id")},
                          **engine_policy(record))
    audit.append_all(session, [created, _evaluation_event(actor, submission_id, State.SUBMITTED, record, 1, now)])
    return snap


def remember_idempotency_key(session: Session, actor: Actor, key: str, request_digest: str, submission_id: str,
                             response: dict[str, Any], now: datetime) -> None:
    """Stores the key with the response it produced, so a retry gets the same response."""
    session.add(IdempotencyKey(token_id=actor.token_id, key=key, request_digest=request_digest,
                               submission_id=submission_id, response=response, created_at=now))
    session.flush()


def revise(session: Session, actor: Actor, snap: Snapshot, document: dict[str, Any], record: dict[str, Any],
           now: datetime, origin: dict[str, Any] | None = None) -> dict[str, Any]:
    """Returns the diff of a new revision's evaluation against the previous one, after storing both.

    ``origin``: where the revision came from (a remedy: its id and changes), added to the audit event's detail.
    """
    submission = snap.submission
    workflow.check_transition(submission.state, Event.REVISE)
    if actor.role != "admin" and actor.user_id != snap.submitter_user:
        raise Forbidden(f"only the original submitter ({submission.submitter!r}) or an admin may revise this quote")
    number = submission.revision + 1
    today = now.date()
    active_before = snap.active_waivers(today)
    quote = document.get("quote", {})
    compare_and_set(session, submission.id, submission.version, state=State.EVALUATED, revision=number,
                    vendor=quote.get("vendor"), quote_id=quote.get("quote_id"), verdict=record["verdict"],
                    updated_at=now)
    revision = Revision(submission_id=submission.id, number=number, document=document,
                        digest=record["submission"]["digest"], author=actor.name, author_token_id=actor.token_id,
                        created_at=now)
    _, _, new_digests = _store_evaluation(session, None, revision, record, now)
    revised = audit.Entry("revision.created", actor, now, submission.id, input_digest=revision.digest,
                          before_state=submission.state, after_state=State.REVISED,
                          detail={"revision": number, **(origin or {})}, **engine_policy(record))
    audit.append_all(session, [revised, _evaluation_event(actor, submission.id, State.REVISED, record, number, now)])
    reopened = [{"waiver_id": w.id, "check_id": check_id} for check_id, w in active_before.items()
                if new_digests.get(check_id) != w.result_digest]
    return {"from_revision": submission.revision, "to_revision": number,
            "verdict": {"from": snap.evaluation.verdict, "to": record["verdict"]},
            "checks": workflow.diff_checks(snap.checks, record["checks"]),
            "reopened_waivers": reopened}


def waive(session: Session, actor: Actor, snap: Snapshot, check_id: str, justification: str, expires: date | None,
          request_digest: str, now: datetime) -> Waiver:
    """Returns the stored waiver of the current result of ``check_id``."""
    submission = snap.submission
    workflow.check_transition(submission.state, Event.WAIVE)
    check = next((c for c in snap.checks if c["id"] == check_id), None)
    if check is None:
        known = ", ".join(c["id"] for c in snap.checks)
        raise NotFound(f"the current evaluation has no check {check_id!r}; its checks: {known}")
    if check["status"] not in workflow.WAIVABLE:
        raise WorkflowConflict(f"{check_id} is {check['status']}; only fail, warn or insufficient-data results "
                               "can be waived")
    if actor.user_id in snap.author_users():
        raise Forbidden(f"four-eyes rule: {actor.name!r} submitted this quote (or a revision of it) and may not "
                        "waive its checks")
    digest = snap.digests[check_id]
    existing = snap.active_waivers(now.date()).get(check_id)
    if existing is not None:
        raise WorkflowConflict(f"{check_id} already has an active waiver (id {existing.id}) by {existing.author!r}")
    compare_and_set(session, submission.id, submission.version, updated_at=now)
    waiver = Waiver(submission_id=submission.id, check_id=check_id, result_digest=digest, revision=submission.revision,
                    justification=justification, expires=expires, author=actor.name, author_token_id=actor.token_id,
                    created_at=now)
    session.add(waiver)
    session.flush()
    audit.append(session, action="waiver.created", actor=actor, occurred_at=now, submission_id=submission.id,
                 input_digest=request_digest, before_state=submission.state, after_state=submission.state,
                 engine_version=snap.evaluation.engine_version, policy_version=snap.evaluation.policy_version,
                 detail={"waiver_id": waiver.id, "check_id": check_id, "status": check["status"],
                         "result_digest": digest, "expires": expires.isoformat() if expires else None,
                         "revision": submission.revision})
    return waiver

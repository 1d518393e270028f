"""The SQLModel tables of the service; service/migrations holds the schema history that creates them.

Times are timezone-aware UTC; SQLModel stores them as UTC on SQLite (which keeps no zone) and reads
them back aware, so the audit chain serialises the same instant whichever database stored it.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import JSON, Column, ForeignKey, Index, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

# Deterministic constraint names, so Alembic can compare and alter them on every database.
SQLModel.metadata.naming_convention = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

SUBMISSION_FK = "submission.id"
DIGEST_LENGTH = 71  # "sha256:" + 64 hex digits
HEX_HASH_LENGTH = 64


class User(SQLModel, table=True):
    """A person. The four-eyes rule and a token's scope compare users; each API token belongs to one.

    ``name`` is shown as given (NFKC, blanks trimmed); ``name_key`` is its identity (service.accounts.users.name_key:
    case, blanks and punctuation folded away), unique, so ``Alice``, ``alice `` and ``alice.`` are one user.
    """

    __tablename__ = "app_user"  # "user" is a reserved word in PostgreSQL

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200)
    name_key: str = Field(max_length=200, unique=True)
    created_at: datetime
    # Set by `quotecheck user disable`: every token of the user gets 401 from then on.
    disabled_at: datetime | None = None


class ApiToken(SQLModel, table=True):
    """An API token: only the SHA-256 of the secret is kept; ``prefix`` finds the row without it.

    ``name`` is a label (the user's name when the token was created); who acts is ``user_id``. A rotated
    token is revoked and its successor names it in ``rotated_from_id``, so a token's history is a chain.
    """

    __tablename__ = "api_token"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200)
    role: str = Field(max_length=32)
    prefix: str = Field(max_length=16, unique=True)
    token_hash: str = Field(max_length=HEX_HASH_LENGTH)
    created_at: datetime
    revoked_at: datetime | None = None
    user_id: int = Field(foreign_key="app_user.id", index=True)
    # "all": reads everything; "own": reads only what its user submitted (vendors), 404 for the rest.
    scope: str = Field(default="all", max_length=16)
    expires_at: datetime
    rotated_from_id: int | None = Field(default=None, sa_column=Column(Integer, ForeignKey("api_token.id"),
                                                                       unique=True, nullable=True))


class Submission(SQLModel, table=True):
    """A vendor quote under review; ``version`` is the optimistic-lock counter behind the ETag."""

    id: str = Field(primary_key=True, max_length=36)
    state: str = Field(max_length=32, index=True)
    version: int = 1
    revision: int = 1
    vendor: str | None = Field(default=None, max_length=200, index=True)
    quote_id: str | None = Field(default=None, max_length=100)
    verdict: str | None = Field(default=None, max_length=16, index=True)
    submitter: str = Field(max_length=200)
    submitter_token_id: int = Field(foreign_key="api_token.id")
    created_at: datetime = Field(index=True)
    updated_at: datetime


class Revision(SQLModel, table=True):
    """One submitted document of a submission; revision 1 is the original."""

    __table_args__ = (UniqueConstraint("submission_id", "number"),)

    id: int | None = Field(default=None, primary_key=True)
    submission_id: str = Field(foreign_key=SUBMISSION_FK, max_length=36, index=True)
    number: int
    document: dict[str, Any] = Field(sa_type=JSON)
    digest: str = Field(max_length=DIGEST_LENGTH)
    author: str = Field(max_length=200)
    author_token_id: int = Field(foreign_key="api_token.id")
    created_at: datetime


class Evaluation(SQLModel, table=True):
    """The engine's verdict on one revision; the full record lives in ``record``."""

    id: int | None = Field(default=None, primary_key=True)
    submission_id: str = Field(foreign_key=SUBMISSION_FK, max_length=36, index=True)
    revision_id: int = Field(foreign_key="revision.id")
    revision: int
    verdict: str = Field(max_length=16)
    engine_version: str = Field(max_length=64)
    policy_id: str = Field(max_length=64)
    policy_version: str = Field(max_length=64)
    policy_digest: str = Field(max_length=DIGEST_LENGTH)
    created_at: datetime


class CheckResult(SQLModel, table=True):
    """One check of an evaluation; ``digest`` is what a waiver binds to."""

    __tablename__ = "check_result"
    __table_args__ = (UniqueConstraint("evaluation_id", "check_id"),)

    id: int | None = Field(default=None, primary_key=True)
    evaluation_id: int = Field(foreign_key="evaluation.id", index=True)
    check_id: str = Field(max_length=64)
    status: str = Field(max_length=32)
    basis: str = Field(max_length=16)
    digest: str = Field(max_length=DIGEST_LENGTH)
    evidence: dict[str, Any] = Field(sa_type=JSON)


class Record(SQLModel, table=True):
    """A record document as issued: one per evaluation (kind ``evaluation``) and the final records (kind ``final``).

    A final record is issued at approval or rejection (``issue`` 1) and re-issued, as a new row with a new
    id, for each purchase order linked to an approved one (``issue`` n + 1, ``supersedes_id`` the previous
    issue; unique, so the issues form one chain). Rows are never updated, except that ``envelope`` is set
    once: the signed envelope of an approved record, signed when the record is issued.
    """

    id: str = Field(primary_key=True, max_length=36)
    submission_id: str = Field(foreign_key=SUBMISSION_FK, max_length=36, index=True)
    evaluation_id: int = Field(foreign_key="evaluation.id", index=True)
    kind: str = Field(max_length=16)
    document: dict[str, Any] = Field(sa_type=JSON)
    digest: str = Field(max_length=DIGEST_LENGTH)
    created_at: datetime
    issue: int | None = None
    supersedes_id: str | None = Field(default=None, sa_column=Column(String(36), ForeignKey("record.id"),
                                                                     unique=True, nullable=True))
    # SQL NULL (not JSON null) until signed, so "not signed yet" can be tested in SQL.
    envelope: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON(none_as_null=True), nullable=True))


class RecordPdf(SQLModel, table=True):
    """The signed PDF of an approved record, stored when first rendered and served unchanged from then on."""

    __tablename__ = "record_pdf"

    record_id: str = Field(sa_column=Column(String(36), ForeignKey("record.id"), primary_key=True))
    record_digest: str = Field(max_length=DIGEST_LENGTH)
    # sha256:<hex> of the PDF bytes; the audit event that issued the PDF carries the same digest.
    pdf_digest: str = Field(max_length=DIGEST_LENGTH)
    pdf: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: datetime


class DraftPdf(SQLModel, table=True):
    """The DRAFT PDF of a record that is not signed, rendered once per record digest and renderer, then served.

    A record's document never changes under its digest, so neither does its draft, until the renderer
    does (template, stylesheet, the code that builds the view: ``render.renderer_digest``). A row without
    ``pdf`` is a claim: the request that inserted it at ``claimed_at`` is rendering the draft, and
    requests for the same draft wait for it (service/approval/draft_pdfs.py) rather than render it again.
    """

    __tablename__ = "draft_pdf"

    record_digest: str = Field(primary_key=True, max_length=DIGEST_LENGTH)
    renderer: str = Field(primary_key=True, max_length=DIGEST_LENGTH)
    claimed_at: datetime
    rendered_at: datetime | None = None
    pdf_digest: str | None = Field(default=None, max_length=DIGEST_LENGTH)
    pdf: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))


class Waiver(SQLModel, table=True):
    """A reviewer's waiver of one check result, bound to that result's digest."""

    id: int | None = Field(default=None, primary_key=True)
    submission_id: str = Field(foreign_key=SUBMISSION_FK, max_length=36, index=True)
    check_id: str = Field(max_length=64)
    result_digest: str = Field(max_length=DIGEST_LENGTH)
    revision: int
    justification: str = Field(sa_type=Text)
    expires: date | None = None
    author: str = Field(max_length=200)
    author_token_id: int = Field(foreign_key="api_token.id")
    created_at: datetime


class Decision(SQLModel, table=True):
    """An approve, reject or request-changes decision on one revision."""

    id: int | None = Field(default=None, primary_key=True)
    submission_id: str = Field(foreign_key=SUBMISSION_FK, max_length=36, index=True)
    revision: int
    action: str = Field(max_length=32)
    comment: str | None = Field(default=None, sa_type=Text)
    actor: str = Field(max_length=200)
    actor_role: str = Field(max_length=32)
    actor_token_id: int = Field(foreign_key="api_token.id")
    created_at: datetime


class AuditEvent(SQLModel, table=True):
    """An append-only event; ``hash`` covers the event and ``prev_hash``, chaining every event before it.

    ``id`` is assigned under the chain lock (see service.persistence.audit), not by the database, so ids are
    gapless and a missing event shows as a gap.
    """

    __tablename__ = "audit_event"

    id: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    occurred_at: datetime
    submission_id: str | None = Field(default=None, foreign_key=SUBMISSION_FK, max_length=36, index=True)
    action: str = Field(max_length=64)
    actor: str | None = Field(default=None, max_length=200)
    actor_role: str | None = Field(default=None, max_length=32)
    token_prefix: str | None = Field(default=None, max_length=16)
    input_digest: str | None = Field(default=None, max_length=DIGEST_LENGTH)
    engine_version: str | None = Field(default=None, max_length=64)
    policy_version: str | None = Field(default=None, max_length=64)
    before_state: str | None = Field(default=None, max_length=32)
    after_state: str | None = Field(default=None, max_length=32)
    detail: dict[str, Any] = Field(sa_type=JSON)
    prev_hash: str = Field(max_length=HEX_HASH_LENGTH)
    hash: str = Field(max_length=HEX_HASH_LENGTH)


class AuditChainHead(SQLModel, table=True):
    """The single row (id 1) that serialises appends to the chain and remembers its length and last hash.

    Updating this row first is the lock: concurrent writers queue on it on PostgreSQL and on the
    database write lock on SQLite, so two events can never claim the same predecessor.
    """

    __tablename__ = "audit_chain_head"

    id: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    length: int = 0
    last_hash: str = Field(max_length=HEX_HASH_LENGTH)


class IdempotencyKey(SQLModel, table=True):
    """A client's Idempotency-Key for creating a submission, with the response it got, per token."""

    __tablename__ = "idempotency_key"
    __table_args__ = (UniqueConstraint("token_id", "key"),)

    id: int | None = Field(default=None, primary_key=True)
    token_id: int = Field(foreign_key="api_token.id")
    key: str = Field(max_length=255)
    request_digest: str = Field(max_length=DIGEST_LENGTH)
    submission_id: str = Field(sa_column=Column(String(36), ForeignKey(SUBMISSION_FK), nullable=False))
    response: dict[str, Any] = Field(sa_type=JSON)
    created_at: datetime


class TaskRun(SQLModel, table=True):
    """A background task the API issued (workers/tasks.py runs it): its state, progress and outcome, kept for good.

    ``id`` is the Celery task id. ``key`` identifies the work (sha256 of its inputs, engine version and
    policy): a second request for the same work finds this row instead of queueing it again. The row is
    what ``GET /api/v1/tasks/{id}`` reads, so an id that was never issued is unknown (404), not pending.
    """

    __tablename__ = "task_run"
    # (state, updated_at): /readyz finds the oldest queued task, and whether any run was written lately, in the index.
    __table_args__ = (UniqueConstraint("kind", "key"), Index("ix_task_run_state_updated_at", "state", "updated_at"))

    id: str = Field(primary_key=True, max_length=36)
    kind: str = Field(max_length=32)
    key: str = Field(max_length=DIGEST_LENGTH)
    # PENDING (queued) | PROGRESS (running; progress_current of progress_total done) | SUCCESS | FAILURE
    state: str = Field(max_length=16)
    progress_current: int = 0
    progress_total: int = 0
    # SQL NULL (not JSON null) until the task ends: the result of a success, the problem of a failure.
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON(none_as_null=True), nullable=True))
    error: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON(none_as_null=True), nullable=True))
    requested_by: str | None = Field(default=None, max_length=200)
    created_at: datetime
    updated_at: datetime
    # Who may read the task with a token of scope "own": the owner of ``submission_id`` (the submission the
    # work is about: a record's PDF), or ``user_id`` (work private to that user: a scoped caller's comparison).
    submission_id: str | None = Field(default=None, sa_column=Column(String(36), ForeignKey(SUBMISSION_FK),
                                                                    nullable=True))
    user_id: int | None = Field(default=None, sa_column=Column(Integer, ForeignKey("app_user.id"), nullable=True))
    # The user whose request queued the work last (issued it, or reset it after a failure): their queued and running
    # tasks count against MAX_ACTIVE_TASKS_PER_USER (service/tasks/task_runs.py). None: issued without a user.
    requester_id: int | None = Field(default=None, sa_column=Column(Integer, ForeignKey("app_user.id"),
                                                                     nullable=True, index=True))
    # The outbox (service/tasks/task_outbox.py): ``args`` is the message, kept until the task ends; ``sent`` is false
    # from the request's commit until the broker took it; one sender at a time holds ``send_lease_until``.
    args: list[Any] | None = Field(default=None, sa_column=Column(JSON(none_as_null=True), nullable=True))
    sent: bool = Field(default=True, sa_column=Column(sa.Boolean, nullable=False, server_default=sa.true(), index=True))
    send_lease_until: datetime | None = Field(default=None, sa_column=Column(sa.DateTime(timezone=True), nullable=True))
    # Runs begun (task_runs.claim), and the message (its delivery tag) whose run holds the row while PROGRESS.
    attempts: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    claimed_by: str | None = Field(default=None, max_length=64)


class Addendum(SQLModel, table=True):
    """A signed as-built addendum of an approved final record (service/approval/addenda.py); rows are never updated.

    ``input_digest``: the request body's digest, so the same measurements attached again find this row.
    """

    __table_args__ = (UniqueConstraint("record_id", "input_digest"),)

    id: str = Field(primary_key=True, max_length=36)
    record_id: str = Field(foreign_key="record.id", max_length=36, index=True)
    submission_id: str = Field(foreign_key=SUBMISSION_FK, max_length=36, index=True)
    input_digest: str = Field(max_length=DIGEST_LENGTH)
    document: dict[str, Any] = Field(sa_type=JSON)
    digest: str = Field(max_length=DIGEST_LENGTH)
    envelope: dict[str, Any] = Field(sa_type=JSON)
    verdict: str = Field(max_length=16)
    actor: str = Field(max_length=200)
    created_at: datetime


class CalibrationPoint(SQLModel, table=True):
    """One estimator's estimate and measurement in one addendum, stored when the addendum is issued.

    GET /api/v1/calibration summarises them per estimator (rules.advice.as_built.calibration).
    """

    __tablename__ = "calibration_point"
    __table_args__ = (UniqueConstraint("addendum_id", "estimator"),)

    id: int | None = Field(default=None, primary_key=True)
    addendum_id: str = Field(foreign_key="addendum.id", max_length=36, index=True)
    submission_id: str = Field(foreign_key=SUBMISSION_FK, max_length=36, index=True)
    estimator: str = Field(max_length=64, index=True)
    estimated: float
    measured: float
    ratio: float
    optimistic: bool
    created_at: datetime


class UiSession(SQLModel, table=True):
    """A browser's signed-in session (service/ui): the SHA-256 of its cookie, the API token it was opened with,
    the per-session CSRF token its forms carry, and when it ends. Signing out deletes the row."""

    __tablename__ = "ui_session"

    id: int | None = Field(default=None, primary_key=True)
    cookie_hash: str = Field(max_length=HEX_HASH_LENGTH, unique=True)
    token_id: int = Field(foreign_key="api_token.id", index=True)
    csrf_token: str = Field(max_length=64)
    created_at: datetime
    expires_at: datetime


class SignInFailure(SQLModel, table=True):
    """A sign-in to the pages that failed (service/accounts/throttle.py): from which client address, with which token
    prefix (None: the text was no token). Rows older than SIGN_IN_WINDOW_S are deleted as failures are counted."""

    __tablename__ = "sign_in_failure"

    id: int | None = Field(default=None, primary_key=True)
    client: str = Field(max_length=64, index=True)
    token_prefix: str | None = Field(default=None, max_length=10, index=True)
    failed_at: datetime = Field(index=True)


class AuditHeadTimestamp(SQLModel, table=True):
    """The chain's length and head hash at one moment with the TSA's token over them (service/app/audit_chain.py)."""

    __tablename__ = "audit_head_timestamp"
    id: int | None = Field(default=None, primary_key=True)
    events: int = Field(index=True)
    head_hash: str = Field(max_length=DIGEST_LENGTH)
    reason: str = Field(max_length=32)  # decision or schedule
    token: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: datetime


class AddendumPdf(SQLModel, table=True):
    """The signed PDF of an as-built addendum, stored when first rendered and served unchanged from then on."""

    __tablename__ = "addendum_pdf"
    addendum_id: str = Field(sa_column=Column(String(36), ForeignKey("addendum.id"), primary_key=True))
    pdf_digest: str = Field(max_length=DIGEST_LENGTH)  # sha256:<hex> of the PDF bytes
    pdf: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: datetime

"""Initial schema: tokens, submissions and their revisions, evaluations, check results, records, waivers,
decisions, the audit chain and idempotency keys.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _id() -> sa.Column:
    return sa.Column("id", sa.Integer(), nullable=False)


def _text(name: str, length: int, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.String(length=length), nullable=nullable)


def _time(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _int(name: str) -> sa.Column:
    return sa.Column(name, sa.Integer(), nullable=False)


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"))


def _pk(table: str) -> sa.PrimaryKeyConstraint:
    return sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{table}"))


def _index(table: str, *columns: str) -> None:
    for column in columns:
        op.create_index(op.f(f"ix_{table}_{column}"), table, [column], unique=False)


def upgrade() -> None:
    op.create_table(
        "api_token", _id(), _text("name", 200), _text("role", 32), _text("prefix", 16), _text("token_hash", 64),
        _time("created_at"), _time("revoked_at", nullable=True), _pk("api_token"),
        sa.UniqueConstraint("name", name=op.f("uq_api_token_name")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_token_prefix")),
    )
    op.create_table(
        "audit_chain_head", sa.Column("id", sa.Integer(), autoincrement=False, nullable=False), _int("length"),
        _text("last_hash", 64), _pk("audit_chain_head"),
    )
    op.create_table(
        "submission", _text("id", 36), _text("state", 32), _int("version"), _int("revision"),
        _text("vendor", 200, nullable=True), _text("quote_id", 100, nullable=True),
        _text("verdict", 16, nullable=True), _text("submitter", 200), _int("submitter_token_id"),
        _time("created_at"), _time("updated_at"),
        _fk("submission", "submitter_token_id", "api_token"), _pk("submission"),
    )
    _index("submission", "created_at", "state", "vendor", "verdict")
    op.create_table(
        "audit_event", sa.Column("id", sa.Integer(), autoincrement=False, nullable=False), _time("occurred_at"),
        _text("submission_id", 36, nullable=True), _text("action", 64), _text("actor", 200, nullable=True),
        _text("actor_role", 32, nullable=True), _text("token_prefix", 16, nullable=True),
        _text("input_digest", 71, nullable=True), _text("engine_version", 64, nullable=True),
        _text("policy_version", 64, nullable=True), _text("before_state", 32, nullable=True),
        _text("after_state", 32, nullable=True), sa.Column("detail", sa.JSON(), nullable=False),
        _text("prev_hash", 64), _text("hash", 64),
        _fk("audit_event", "submission_id", "submission"), _pk("audit_event"),
    )
    _index("audit_event", "submission_id")
    op.create_table(
        "decision", _id(), _text("submission_id", 36), _int("revision"), _text("action", 32),
        sa.Column("comment", sa.Text(), nullable=True), _text("actor", 200), _text("actor_role", 32),
        _int("actor_token_id"), _time("created_at"),
        _fk("decision", "actor_token_id", "api_token"), _fk("decision", "submission_id", "submission"),
        _pk("decision"),
    )
    _index("decision", "submission_id")
    op.create_table(
        "idempotency_key", _id(), _int("token_id"), _text("key", 255), _text("request_digest", 71),
        _text("submission_id", 36), sa.Column("response", sa.JSON(), nullable=False), _time("created_at"),
        _fk("idempotency_key", "submission_id", "submission"), _fk("idempotency_key", "token_id", "api_token"),
        _pk("idempotency_key"),
        sa.UniqueConstraint("token_id", "key", name=op.f("uq_idempotency_key_token_id_key")),
    )
    op.create_table(
        "revision", _id(), _text("submission_id", 36), _int("number"),
        sa.Column("document", sa.JSON(), nullable=False), _text("digest", 71), _text("author", 200),
        _int("author_token_id"), _time("created_at"),
        _fk("revision", "author_token_id", "api_token"), _fk("revision", "submission_id", "submission"),
        _pk("revision"),
        sa.UniqueConstraint("submission_id", "number", name=op.f("uq_revision_submission_id_number")),
    )
    _index("revision", "submission_id")
    op.create_table(
        "waiver", _id(), _text("submission_id", 36), _text("check_id", 64), _text("result_digest", 71),
        _int("revision"), sa.Column("justification", sa.Text(), nullable=False),
        sa.Column("expires", sa.Date(), nullable=True), _text("author", 200), _int("author_token_id"),
        _time("created_at"),
        _fk("waiver", "author_token_id", "api_token"), _fk("waiver", "submission_id", "submission"), _pk("waiver"),
    )
    _index("waiver", "submission_id")
    op.create_table(
        "evaluation", _id(), _text("submission_id", 36), _int("revision_id"), _int("revision"),
        _text("verdict", 16), _text("engine_version", 64), _text("policy_id", 64), _text("policy_version", 64),
        _text("policy_digest", 71), _time("created_at"),
        _fk("evaluation", "revision_id", "revision"), _fk("evaluation", "submission_id", "submission"),
        _pk("evaluation"),
    )
    _index("evaluation", "submission_id")
    op.create_table(
        "check_result", _id(), _int("evaluation_id"), _text("check_id", 64), _text("status", 32),
        _text("basis", 16), _text("digest", 71), sa.Column("evidence", sa.JSON(), nullable=False),
        _fk("check_result", "evaluation_id", "evaluation"), _pk("check_result"),
        sa.UniqueConstraint("evaluation_id", "check_id", name=op.f("uq_check_result_evaluation_id_check_id")),
    )
    _index("check_result", "evaluation_id")
    op.create_table(
        "record", _text("id", 36), _text("submission_id", 36), _int("evaluation_id"), _text("kind", 16),
        sa.Column("document", sa.JSON(), nullable=False), _text("digest", 71), _time("created_at"),
        _fk("record", "evaluation_id", "evaluation"), _fk("record", "submission_id", "submission"), _pk("record"),
    )
    _index("record", "evaluation_id", "submission_id")

    # The chain starts from a head of 64 zeros; every append updates this one row (see service.persistence.audit).
    head = sa.table("audit_chain_head", sa.column("id", sa.Integer), sa.column("length", sa.Integer),
                    sa.column("last_hash", sa.String))
    op.bulk_insert(head, [{"id": 1, "length": 0, "last_hash": "0" * 64}])


def downgrade() -> None:
    for table in ("record", "check_result", "evaluation", "waiver", "revision", "idempotency_key", "decision",
                  "audit_event", "submission", "audit_chain_head", "api_token"):
        op.drop_table(table)

"""The audit chain's head timestamped by the TSA, and the signed PDFs of as-built addenda.

``audit_head_timestamp``: at every decision and on a schedule (`quotecheck audit timestamp`), the chain's length
and head hash at one moment with the TSA's RFC 3161 token over them, so `quotecheck audit verify` finds a tail
deleted (and the head row rewritten) before the latest such anchor. ``addendum_pdf``: an addendum's signed PDF,
stored when first rendered and served unchanged from then on.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_head_timestamp",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.Column("head_hash", sa.String(length=71), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("token", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_head_timestamp")),
    )
    op.create_index(op.f("ix_audit_head_timestamp_events"), "audit_head_timestamp", ["events"])
    op.create_table(
        "addendum_pdf",
        sa.Column("addendum_id", sa.String(length=36), nullable=False),
        sa.Column("pdf_digest", sa.String(length=71), nullable=False),
        sa.Column("pdf", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["addendum_id"], ["addendum.id"], name=op.f("fk_addendum_pdf_addendum_id_addendum")),
        sa.PrimaryKeyConstraint("addendum_id", name=op.f("pk_addendum_pdf")),
    )


def downgrade() -> None:
    op.drop_table("addendum_pdf")
    op.drop_index(op.f("ix_audit_head_timestamp_events"), table_name="audit_head_timestamp")
    op.drop_table("audit_head_timestamp")

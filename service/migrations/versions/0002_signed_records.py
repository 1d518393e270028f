"""Signed records: the stored envelope and the issue chain of final records, and the issued signed PDFs.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Batch mode: on SQLite the table is rebuilt, since SQLite cannot add a constraint to an existing table.
    with op.batch_alter_table("record") as batch:
        batch.add_column(sa.Column("issue", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("supersedes_id", sa.String(length=36), nullable=True))
        batch.add_column(sa.Column("envelope", sa.JSON(none_as_null=True), nullable=True))
        batch.create_unique_constraint(op.f("uq_record_supersedes_id"), ["supersedes_id"])
        batch.create_foreign_key(op.f("fk_record_supersedes_id_record"), "record", ["supersedes_id"], ["id"])
    # Final records issued before this migration are issue 1 of their chain.
    op.execute("UPDATE record SET issue = 1 WHERE kind = 'final'")
    op.create_table(
        "record_pdf",
        sa.Column("record_id", sa.String(length=36), nullable=False),
        sa.Column("record_digest", sa.String(length=71), nullable=False),
        sa.Column("pdf_digest", sa.String(length=71), nullable=False),
        sa.Column("pdf", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["record_id"], ["record.id"], name=op.f("fk_record_pdf_record_id_record")),
        sa.PrimaryKeyConstraint("record_id", name=op.f("pk_record_pdf")),
    )


def downgrade() -> None:
    op.drop_table("record_pdf")
    with op.batch_alter_table("record") as batch:
        batch.drop_constraint(op.f("fk_record_supersedes_id_record"), type_="foreignkey")
        batch.drop_constraint(op.f("uq_record_supersedes_id"), type_="unique")
        batch.drop_column("envelope")
        batch.drop_column("supersedes_id")
        batch.drop_column("issue")

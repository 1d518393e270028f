"""Draft PDFs: the draft_pdf table, where a record's DRAFT PDF is kept once rendered.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "draft_pdf",
        sa.Column("record_digest", sa.String(length=71), nullable=False),
        sa.Column("renderer", sa.String(length=71), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("rendered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pdf_digest", sa.String(length=71), nullable=True),
        sa.Column("pdf", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("record_digest", "renderer", name=op.f("pk_draft_pdf")),
    )


def downgrade() -> None:
    op.drop_table("draft_pdf")

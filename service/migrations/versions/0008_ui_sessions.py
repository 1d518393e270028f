"""Browser sessions of the reviewer pages (service/ui): one row per signed-in browser.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ui_session",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cookie_hash", sa.String(length=64), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("csrf_token", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["token_id"], ["api_token.id"], name=op.f("fk_ui_session_token_id_api_token")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ui_session")),
        sa.UniqueConstraint("cookie_hash", name=op.f("uq_ui_session_cookie_hash")),
    )
    op.create_index(op.f("ix_ui_session_token_id"), "ui_session", ["token_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_ui_session_token_id"), table_name="ui_session")
    op.drop_table("ui_session")

"""Task outbox and claims: a task's message kept until it ends, whether the broker took it, and which run holds it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Rows from before this revision were sent when they were issued (or failed): sent defaults to true.
    with op.batch_alter_table("task_run") as batch:
        batch.add_column(sa.Column("args", sa.JSON(none_as_null=True), nullable=True))
        batch.add_column(sa.Column("sent", sa.Boolean(), server_default=sa.true(), nullable=False))
        batch.add_column(sa.Column("send_lease_until", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("attempts", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("claimed_by", sa.String(length=64), nullable=True))
    op.create_index(op.f("ix_task_run_sent"), "task_run", ["sent"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_task_run_sent"), table_name="task_run")
    with op.batch_alter_table("task_run") as batch:
        for column in ("claimed_by", "attempts", "send_lease_until", "sent", "args"):
            batch.drop_column(column)

"""Who queued each task: the user whose queued and running tasks count against MAX_ACTIVE_TASKS_PER_USER.

Rows from before this revision have no requester (NULL) and count against no one.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("task_run") as batch:
        batch.add_column(sa.Column("requester_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(op.f("fk_task_run_requester_id_app_user"), "app_user", ["requester_id"], ["id"])
        batch.create_index(op.f("ix_task_run_requester_id"), ["requester_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("task_run") as batch:
        batch.drop_index(op.f("ix_task_run_requester_id"))
        batch.drop_constraint(op.f("fk_task_run_requester_id_app_user"), type_="foreignkey")
        batch.drop_column("requester_id")

"""An index of the task table by state and last write, for /readyz: the oldest queued task, and recent runs.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-09
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_task_run_state_updated_at", "task_run", ["state", "updated_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_task_run_state_updated_at", table_name="task_run")

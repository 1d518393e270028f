"""Failed sign-ins to the pages, counted per client address and per token prefix (service/accounts/throttle.py).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sign_in_failure",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("client", sa.String(length=64), nullable=False),
        sa.Column("token_prefix", sa.String(length=10), nullable=True),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sign_in_failure")),
    )
    op.create_index(op.f("ix_sign_in_failure_client"), "sign_in_failure", ["client"])
    op.create_index(op.f("ix_sign_in_failure_token_prefix"), "sign_in_failure", ["token_prefix"])
    op.create_index(op.f("ix_sign_in_failure_failed_at"), "sign_in_failure", ["failed_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_sign_in_failure_failed_at"), table_name="sign_in_failure")
    op.drop_index(op.f("ix_sign_in_failure_token_prefix"), table_name="sign_in_failure")
    op.drop_index(op.f("ix_sign_in_failure_client"), table_name="sign_in_failure")
    op.drop_table("sign_in_failure")

"""As built: the signed addenda of approved records, and the estimator calibration points each one stores.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"))


def upgrade() -> None:
    op.create_table(
        "addendum",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("record_id", sa.String(length=36), nullable=False),
        sa.Column("submission_id", sa.String(length=36), nullable=False),
        sa.Column("input_digest", sa.String(length=71), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("digest", sa.String(length=71), nullable=False),
        sa.Column("envelope", sa.JSON(), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        _fk("addendum", "record_id", "record"), _fk("addendum", "submission_id", "submission"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_addendum")),
        sa.UniqueConstraint("record_id", "input_digest", name=op.f("uq_addendum_record_id_input_digest")),
    )
    op.create_index(op.f("ix_addendum_record_id"), "addendum", ["record_id"], unique=False)
    op.create_index(op.f("ix_addendum_submission_id"), "addendum", ["submission_id"], unique=False)
    op.create_table(
        "calibration_point",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("addendum_id", sa.String(length=36), nullable=False),
        sa.Column("submission_id", sa.String(length=36), nullable=False),
        sa.Column("estimator", sa.String(length=64), nullable=False),
        sa.Column("estimated", sa.Float(), nullable=False),
        sa.Column("measured", sa.Float(), nullable=False),
        sa.Column("ratio", sa.Float(), nullable=False),
        sa.Column("optimistic", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        _fk("calibration_point", "addendum_id", "addendum"), _fk("calibration_point", "submission_id", "submission"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calibration_point")),
        sa.UniqueConstraint("addendum_id", "estimator", name=op.f("uq_calibration_point_addendum_id_estimator")),
    )
    for column in ("addendum_id", "submission_id", "estimator"):
        op.create_index(op.f(f"ix_calibration_point_{column}"), "calibration_point", [column], unique=False)


def downgrade() -> None:
    op.drop_table("calibration_point")
    op.drop_table("addendum")

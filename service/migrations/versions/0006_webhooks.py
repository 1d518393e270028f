"""Webhooks: admins' subscriptions, the outbox of deliveries written with their audit events, and each attempt.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "webhook_subscription",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(length=2000), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("description", sa.String(length=200), nullable=True),
        sa.Column("secret", sa.String(length=100), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_subscription")),
    )
    op.create_table(
        "webhook_delivery",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("subscription_id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.String(length=36), nullable=False),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column("audit_event_id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.String(length=36), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["subscription_id"], ["webhook_subscription.id"],
                                name=op.f("fk_webhook_delivery_subscription_id_webhook_subscription")),
        sa.ForeignKeyConstraint(["audit_event_id"], ["audit_event.id"],
                                name=op.f("fk_webhook_delivery_audit_event_id_audit_event")),
        sa.ForeignKeyConstraint(["submission_id"], ["submission.id"],
                                name=op.f("fk_webhook_delivery_submission_id_submission")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_delivery")),
    )
    op.create_index(op.f("ix_webhook_delivery_subscription_id"), "webhook_delivery", ["subscription_id"])
    op.create_index("ix_webhook_delivery_due", "webhook_delivery", ["state", "next_attempt_at"])
    op.create_table(
        "webhook_attempt",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("delivery_id", sa.String(length=36), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("attempted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.String(length=500), nullable=True),
        sa.ForeignKeyConstraint(["delivery_id"], ["webhook_delivery.id"],
                                name=op.f("fk_webhook_attempt_delivery_id_webhook_delivery")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_attempt")),
        sa.UniqueConstraint("delivery_id", "number", name=op.f("uq_webhook_attempt_delivery_id_number")),
    )
    op.create_index(op.f("ix_webhook_attempt_delivery_id"), "webhook_attempt", ["delivery_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_webhook_attempt_delivery_id"), table_name="webhook_attempt")
    op.drop_table("webhook_attempt")
    op.drop_index("ix_webhook_delivery_due", table_name="webhook_delivery")
    op.drop_index(op.f("ix_webhook_delivery_subscription_id"), table_name="webhook_delivery")
    op.drop_table("webhook_delivery")
    op.drop_table("webhook_subscription")

"""Webhook signing secrets encrypted at rest: the secrets stored in plain text are sealed, the key's id beside each.

``webhook_subscription.secret`` holds the secret sealed with AES-256-GCM (service/webhooks/secret_box.py) and
``secret_key_id`` the id of the key that sealed it. The keys come from the app that migrates (``quotecheck db
upgrade``, or AUTO_MIGRATE): WEBHOOK_SECRET_KEY, or without a broker the instance folder's key; a database with
subscriptions cannot be migrated without one, and the migration says so. Downgrading opens them again.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-10
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import context, op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SUBSCRIPTIONS = sa.table("webhook_subscription", sa.column("id", sa.Integer), sa.column("secret", sa.String),
                         sa.column("secret_key_id", sa.String))


def _box(count: int) -> Any:
    """Returns the SecretBox of the app that migrates (service.persistence.db.upgrade passes a function for it)."""
    provide = context.config.attributes.get("webhook_secret_box")
    if provide is None:
        raise RuntimeError(f"migration 0015 encrypts the signing secrets of {count} webhook(s) and needs their key: "
                           "migrate through the app (`quotecheck db upgrade`) with WEBHOOK_SECRET_KEY set")
    return provide()


def upgrade() -> None:
    with op.batch_alter_table("webhook_subscription") as batch:
        batch.add_column(sa.Column("secret_key_id", sa.String(length=64), nullable=True))
        batch.alter_column("secret", existing_type=sa.String(length=100), type_=sa.String(length=200),
                           existing_nullable=False)
    connection = op.get_bind()
    rows = connection.execute(sa.select(SUBSCRIPTIONS.c.id, SUBSCRIPTIONS.c.secret)
                              .where(SUBSCRIPTIONS.c.secret_key_id.is_(None))).all()
    if rows:
        box = _box(len(rows))
        for subscription_id, secret in rows:
            key_id, sealed = box.seal(secret)
            connection.execute(sa.update(SUBSCRIPTIONS).where(SUBSCRIPTIONS.c.id == subscription_id)
                               .values(secret=sealed, secret_key_id=key_id))
    with op.batch_alter_table("webhook_subscription") as batch:
        batch.alter_column("secret_key_id", existing_type=sa.String(length=64), nullable=False)


def downgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.select(SUBSCRIPTIONS.c.id, SUBSCRIPTIONS.c.secret,
                                        SUBSCRIPTIONS.c.secret_key_id)).all()
    if rows:
        box = _box(len(rows))
        for subscription_id, sealed, key_id in rows:
            secret = box.open(key_id, sealed, f"the secret of webhook {subscription_id}")
            connection.execute(sa.update(SUBSCRIPTIONS).where(SUBSCRIPTIONS.c.id == subscription_id)
                               .values(secret=secret))
    with op.batch_alter_table("webhook_subscription") as batch:
        batch.drop_column("secret_key_id")
        batch.alter_column("secret", existing_type=sa.String(length=200), type_=sa.String(length=100),
                           existing_nullable=False)

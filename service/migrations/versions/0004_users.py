"""Users: each API token belongs to a user, expires, may be scoped to its user's submissions, and can be rotated.

Every existing token becomes a user of its own, named as the token was; tokens whose names differ only by
case, blanks or punctuation (``Alice``, ``alice ``, ``alice.``) name one person, so they become one user.
Existing tokens keep their role, get scope ``all``, and expire 90 days (the default lifetime) after this
upgrade: rotate them before (``quotecheck token rotate PREFIX``). Tasks gain the submission or user that
a token of scope ``own`` needs to own to read them.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The default TOKEN_LIFETIME_DAYS when this migration was written; fixed here, as migrations are history.
LEGACY_TOKEN_LIFETIME = timedelta(days=90)


def _display(name: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", name).split())


def _key(name: str) -> str:
    # As service.accounts.users.name_key at this revision (copied: a migration must not change when the code does).
    folded = unicodedata.normalize("NFKC", name).casefold()
    return unicodedata.normalize("NFKC", "".join(c for c in folded if unicodedata.category(c)[0] in "LMN"))


def upgrade() -> None:
    op.create_table(
        "app_user",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("name_key", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_app_user")),
        sa.UniqueConstraint("name_key", name=op.f("uq_app_user_name_key")),
    )
    # Batch mode: on SQLite the table is rebuilt (service.persistence.db turns foreign keys off for that and checks
    # them after).
    with op.batch_alter_table("api_token") as batch:
        batch.drop_constraint(op.f("uq_api_token_name"), type_="unique")
        batch.add_column(sa.Column("user_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("scope", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("rotated_from_id", sa.Integer(), nullable=True))

    connection = op.get_bind()
    now = datetime.now(UTC)
    tokens = sa.table("api_token", sa.column("id", sa.Integer), sa.column("name", sa.String),
                      sa.column("user_id", sa.Integer), sa.column("scope", sa.String),
                      sa.column("expires_at", sa.DateTime(timezone=True)))
    users = sa.table("app_user", sa.column("id", sa.Integer), sa.column("name", sa.String),
                     sa.column("name_key", sa.String), sa.column("created_at", sa.DateTime(timezone=True)))
    user_ids: dict[str, int] = {}
    for token_id, name in connection.execute(sa.select(tokens.c.id, tokens.c.name).order_by(tokens.c.id)).all():
        key = _key(name) or f"token-{token_id}"
        if key not in user_ids:
            user_ids[key] = len(user_ids) + 1
            connection.execute(users.insert().values(id=user_ids[key], name=_display(name) or name, name_key=key,
                                                     created_at=now))
        connection.execute(tokens.update().where(tokens.c.id == token_id)
                           .values(user_id=user_ids[key], scope="all", expires_at=now + LEGACY_TOKEN_LIFETIME))
    if user_ids and connection.dialect.name == "postgresql":
        # Rows inserted with explicit ids leave the sequence behind.
        op.execute("SELECT setval(pg_get_serial_sequence('app_user', 'id'), (SELECT max(id) FROM app_user))")

    with op.batch_alter_table("api_token") as batch:
        batch.alter_column("user_id", existing_type=sa.Integer(), nullable=False)
        batch.alter_column("scope", existing_type=sa.String(length=16), nullable=False)
        batch.alter_column("expires_at", existing_type=sa.DateTime(timezone=True), nullable=False)
        batch.create_foreign_key(op.f("fk_api_token_user_id_app_user"), "app_user", ["user_id"], ["id"])
        batch.create_foreign_key(op.f("fk_api_token_rotated_from_id_api_token"), "api_token", ["rotated_from_id"],
                                 ["id"])
        batch.create_unique_constraint(op.f("uq_api_token_rotated_from_id"), ["rotated_from_id"])
        batch.create_index(op.f("ix_api_token_user_id"), ["user_id"], unique=False)

    with op.batch_alter_table("task_run") as batch:
        batch.add_column(sa.Column("submission_id", sa.String(length=36), nullable=True))
        batch.add_column(sa.Column("user_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(op.f("fk_task_run_submission_id_submission"), "submission", ["submission_id"],
                                 ["id"])
        batch.create_foreign_key(op.f("fk_task_run_user_id_app_user"), "app_user", ["user_id"], ["id"])


def downgrade() -> None:
    with op.batch_alter_table("task_run") as batch:
        batch.drop_constraint(op.f("fk_task_run_user_id_app_user"), type_="foreignkey")
        batch.drop_constraint(op.f("fk_task_run_submission_id_submission"), type_="foreignkey")
        batch.drop_column("user_id")
        batch.drop_column("submission_id")
    with op.batch_alter_table("api_token") as batch:
        batch.drop_index(op.f("ix_api_token_user_id"))
        batch.drop_constraint(op.f("uq_api_token_rotated_from_id"), type_="unique")
        batch.drop_constraint(op.f("fk_api_token_rotated_from_id_api_token"), type_="foreignkey")
        batch.drop_constraint(op.f("fk_api_token_user_id_app_user"), type_="foreignkey")
        batch.drop_column("rotated_from_id")
        batch.drop_column("expires_at")
        batch.drop_column("scope")
        batch.drop_column("user_id")
        # Token names were people's names, unique; several tokens of one user share a name now.
        batch.create_unique_constraint(op.f("uq_api_token_name"), ["name"])
    op.drop_table("app_user")

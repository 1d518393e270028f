"""The JSON documents a submission writes are compressed with LZ4 on PostgreSQL, where the server has it.

PostgreSQL compresses a value of more than about 2 kB before it stores it (TOAST), with pglz unless told
otherwise. A POST /api/v1/submissions of the DGX example stores about 100 kB of such JSON (its record, 68 kB,
the check results' evidence and the submitted document): compressing it with pglz was about 0.85 ms of the
server's 2.85 ms of CPU per POST (in-process POSTs against one database with and without LZ4, medians of
three alternating runs of 200: 2.85 -> 2.00 ms). LZ4 is PostgreSQL's other method (version 14 on, when built
with it): the values read back are the same, only their stored form differs, and values stored before keep
theirs. A server without LZ4 (or older than 14, which has no choice) keeps pglz: nothing changes there.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The columns of the submission path's large JSON values: the submitted document, each check's evidence, the
# record, and the response an Idempotency-Key keeps.
COLUMNS = (("revision", "document"), ("check_result", "evidence"), ("record", "document"),
           ("idempotency_key", "response"))


def _lz4_available() -> bool:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return False
    # NULL before PostgreSQL 14, which has no default_toast_compression (and no choice of method).
    return bool(bind.execute(sa.text("SELECT 'lz4' = ANY(enumvals) FROM pg_settings "
                                     "WHERE name = 'default_toast_compression'")).scalar())


def upgrade() -> None:
    if _lz4_available():
        for table, column in COLUMNS:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION lz4")


def downgrade() -> None:
    if _lz4_available():
        for table, column in COLUMNS:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION default")

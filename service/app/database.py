"""The database as the command line and the workers see it: its schema's migrations and its connections.

`quotecheck db upgrade` and `quotecheck db current` read and move the schema through these operations, and a
worker's prefork child drops the connections it inherited with ``drop_inherited_connections``.
"""

from __future__ import annotations

from typing import NamedTuple

from flask import Flask

from service.persistence.db import current_revision, get_db, head_revision, upgrade
from service.webhooks.secret_box import secret_box


class Migrated(NamedTuple):
    """Where a database stands after an upgrade: its URL (password hidden) and the migration it is at."""
    url: str
    revision: str | None


def migrate(app: Flask, revision: str = "head") -> Migrated:
    """Returns where ``app``'s database stands once the migrations up to ``revision`` were applied to it."""
    engine = get_db(app).engine
    upgrade(engine, revision, secret_box=lambda: secret_box(app))
    return Migrated(engine.url.render_as_string(hide_password=True), current_revision(engine))


def revisions(app: Flask) -> tuple[str | None, str]:
    """Returns the migration ``app``'s database is at (None before the first) and the newest one shipped."""
    return current_revision(get_db(app).engine), head_revision()


def drop_inherited_connections(app: Flask) -> None:
    """Drops, without closing, the pooled connections a forked process inherited from its parent.

    Sharing a socket across processes corrupts it; the parent still owns these, and the child opens its own.
    """
    get_db(app).engine.dispose(close=False)

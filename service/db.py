"""The database subsystem: one SQLAlchemy engine per app, sessions, and Alembic migrations."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from flask import Flask, current_app
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlmodel import Session

MIGRATIONS = "service:migrations"
EXTENSION = "quotecheck.db"


def normalise_url(url: str) -> str:
    """Returns ``url`` with PostgreSQL URLs pointed at the psycopg 3 driver."""
    for bare in ("postgres://", "postgresql://"):
        if url.startswith(bare):
            return "postgresql+psycopg://" + url[len(bare):]
    return url


def make_engine(url: str, sqlite_busy_timeout_s: float = 30) -> Engine:
    """Returns an engine for ``url``; SQLite gets WAL, foreign keys and a busy timeout."""
    url = normalise_url(url)
    if make_url(url).get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    # Flask serves requests on several threads; each checks out its own pooled connection.
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": sqlite_busy_timeout_s})

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        # WAL lets readers proceed while a writer holds the lock; foreign keys are off by default.
        _set_wal(cursor, sqlite_busy_timeout_s)
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


def _set_wal(cursor: Any, timeout_s: float) -> None:
    """Switches a SQLite database to WAL, retrying while another connection holds it.

    Switching a new database's journal mode can fail with "database is locked" at once, without waiting
    for the busy timeout, when processes that start together (gunicorn workers) open it at the same time.
    """
    import sqlite3

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class Database:
    """The engine of one app and the way to open sessions on it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def session(self) -> Iterator[Session]:
        """Yields a session; whatever was not committed is rolled back when the block ends.

        Closing (rather than rolling back) detaches the loaded objects without expiring them, so callers
        may read what they loaded after the block.
        """
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    def ping(self) -> None:
        """Raises when the database cannot run ``SELECT 1``."""
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))


def alembic_config() -> Config:
    """Returns an Alembic configuration for the migrations shipped in service/migrations."""
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    return config


def head_revision() -> str:
    """Returns the id of the newest migration."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head() or ""


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Applies the migrations up to ``revision`` on ``engine``'s database."""
    config = alembic_config()
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # SQLite alters a table by rebuilding it (drop, then rename a copy), which enforced foreign keys
            # refuse for a table others refer to. The switch works only outside a transaction; the migration
            # environment checks every foreign key before it commits (service/migrations/env.py).
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        try:
            with connection.begin():
                config.attributes["connection"] = connection
                command.upgrade(config, revision)
        finally:
            if sqlite:
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                connection.commit()


def current_revision(engine: Engine) -> str | None:
    """Returns the migration the database is at, or None when it has none."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def database_url(app: Flask) -> str:
    """Returns the configured URL, or a SQLite file in the instance folder."""
    url = app.config.get("DATABASE_URL")
    if url:
        return normalise_url(str(url))
    Path(app.instance_path).mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{Path(app.instance_path) / 'quotecheck.sqlite3'}"


def get_db(app: Flask | None = None) -> Database:
    """Returns the Database of ``app`` (default: the current app)."""
    return (app or current_app).extensions[EXTENSION]


def init_app(app: Flask) -> None:
    """Creates the engine, migrates when AUTO_MIGRATE is on, and disposes the pool with the app."""
    engine = make_engine(database_url(app), app.config["SQLITE_BUSY_TIMEOUT_S"])
    app.extensions[EXTENSION] = Database(engine)
    if app.config["AUTO_MIGRATE"]:
        upgrade(engine)

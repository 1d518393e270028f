"""The database subsystem: one SQLAlchemy engine per app, sessions, and Alembic migrations."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from flask import Flask, current_app
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlmodel import Session

from service.persistence import db_postgres
from service.persistence.db_postgres import Timeouts
from service.webhooks.secret_box import secret_box as webhook_secret_box

MIGRATIONS = "service:migrations"
EXTENSION = "quotecheck.db"


def normalise_url(url: str) -> str:
    """Returns ``url`` with PostgreSQL URLs pointed at the psycopg 3 driver."""
    for bare in ("postgres://", "postgresql://"):
        if url.startswith(bare):
            return "postgresql+psycopg://" + url[len(bare):]
    return url


def make_engine(url: str, sqlite_busy_timeout_s: float = 30, timeouts: Timeouts | None = None,
                pool_timeout_s: float = 30) -> Engine:
    """Returns an engine for ``url``; SQLite gets WAL, foreign keys and a busy timeout.

    PostgreSQL gets ``timeouts`` (connect, statement, socket: service/persistence/db_postgres.py) and waits at most
    ``pool_timeout_s`` for a pooled connection.
    """
    url = normalise_url(url)
    if make_url(url).get_backend_name() != "sqlite":
        return _postgres_engine(url, timeouts or Timeouts(connect_s=10, statement_s=None, socket_s=None),
                                pool_timeout_s)
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


def _postgres_engine(url: str, timeouts: Timeouts, pool_timeout_s: float) -> Engine:
    engine = create_engine(url, pool_pre_ping=True, pool_timeout=pool_timeout_s,
                           connect_args=db_postgres.connect_args(timeouts))

    @event.listens_for(engine, "do_connect")
    def _deadline_connection(_dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        return db_postgres.connect(cargs, cparams, timeouts)

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
        # The same pool; a connection checked out through it runs each statement as its own transaction.
        self._autocommit_engine = engine.execution_options(isolation_level="AUTOCOMMIT")

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

    @contextmanager
    def autocommit_session(self) -> Iterator[Session]:
        """Yields a session in which each statement commits on its own (no BEGIN, no ROLLBACK).

        For a lookup of one statement, such as a request's token and user, the transaction around it would only
        cost two more round trips; whatever reads several rows that must agree uses ``session``.
        """
        with Session(self._autocommit_engine, expire_on_commit=False) as session:
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


def upgrade(engine: Engine, revision: str = "head", secret_box: Callable[[], Any] | None = None) -> None:
    """Applies the migrations up to ``revision`` on ``engine``'s database.

    ``secret_box`` returns the keys of webhook secrets (service/webhooks/secret_box.py), for the migrations that
    encrypt or decrypt stored secrets (0016); it is called only when there are secrets to seal or open.
    """
    config = alembic_config()
    config.attributes["webhook_secret_box"] = secret_box
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # SQLite alters a table by rebuilding it (drop, then rename a copy), which enforced foreign keys
            # refuse for a table others refer to. The switch works only outside a transaction; the migration
            # environment checks every foreign key before it commits (service/migrations/env.py).
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        try:
            with connection.begin(), without_timeouts(connection):
                config.attributes["connection"] = connection
                command.upgrade(config, revision)
        finally:
            if sqlite:
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                connection.commit()


@contextmanager
def without_timeouts(connection: Connection) -> Iterator[None]:
    """Lifts PostgreSQL's statement and socket timeouts for the transaction of a migration."""
    if connection.dialect.name != "postgresql":
        yield
        return
    # SET LOCAL ends with the transaction: the pooled connection gets its statement timeout back.
    connection.exec_driver_sql("SET LOCAL statement_timeout = 0")
    with db_postgres.without_socket_timeout(connection.connection.dbapi_connection):
        yield


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


def timeouts_of(config: dict[str, Any]) -> Timeouts:
    """Returns the PostgreSQL timeouts the settings give; ValueError when they contradict each other."""
    timeouts = Timeouts(connect_s=config["DATABASE_CONNECT_TIMEOUT_S"],
                        statement_s=config["DATABASE_STATEMENT_TIMEOUT_S"] or None,
                        socket_s=config["DATABASE_SOCKET_TIMEOUT_S"] or None)
    if timeouts.socket_s and timeouts.statement_s and timeouts.socket_s <= timeouts.statement_s:
        raise ValueError(f"DATABASE_SOCKET_TIMEOUT_S ({timeouts.socket_s}) must exceed DATABASE_STATEMENT_TIMEOUT_S "
                         f"({timeouts.statement_s}): the server's own limit should end a slow statement first")
    return timeouts


def get_db(app: Flask | None = None) -> Database:
    """Returns the Database of ``app`` (default: the current app)."""
    return (app or current_app).extensions[EXTENSION]


def init_app(app: Flask) -> None:
    """Creates the engine, migrates when AUTO_MIGRATE is on, and disposes the pool with the app."""
    engine = make_engine(database_url(app), app.config["SQLITE_BUSY_TIMEOUT_S"], timeouts_of(app.config),
                         app.config["DATABASE_POOL_TIMEOUT_S"])
    app.extensions[EXTENSION] = Database(engine)
    if app.config["AUTO_MIGRATE"]:
        upgrade(engine, secret_box=lambda: webhook_secret_box(app))

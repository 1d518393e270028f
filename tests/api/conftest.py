"""Fixtures for the API tests: an app per test on SQLite and on PostgreSQL, and callers acting in a role.

Every test that uses ``app`` (directly or through ``client``/``as_role``) runs twice: on a SQLite file in
the test's tmp path, and on a PostgreSQL database created for this test run (``qc_test_<random>`` on
127.0.0.1:5432, dropped at the end) whose tables are emptied between tests. When that server cannot be
reached the PostgreSQL runs are skipped with the reason.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from api_support import FAILING_SUBMISSION, Caller, Clock, new_token
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import text
from sqlmodel import SQLModel

from service import create_app
from service.persistence.audit import GENESIS_HASH
from service.persistence.db import get_db

PG_HOST, PG_PORT, PG_ADMIN_DB = "127.0.0.1", 5432, "test"
PG_USERS = ("postgres", "root")

# --- PostgreSQL: one database per test run ---------------------------------------------------------------

def _admin_connection() -> Any:
    import psycopg

    errors = []
    for user in PG_USERS:
        try:
            return psycopg.connect(host=PG_HOST, port=PG_PORT, dbname=PG_ADMIN_DB, user=user, autocommit=True,
                                   connect_timeout=3), user
        except psycopg.Error as error:
            errors.append(f"{user}: {' '.join(str(error).split())}")
    raise ConnectionError("; ".join(errors))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """Yields the URL of a fresh, migrated PostgreSQL database for this run; dropped afterwards."""
    try:
        admin, user = _admin_connection()
    except (ConnectionError, ImportError) as error:
        pytest.skip(f"PostgreSQL on {PG_HOST}:{PG_PORT} (database {PG_ADMIN_DB!r}, trust auth) is unreachable: "
                    f"{error}. CI starts it (.ci/run).")
    name = f"qc_test_{secrets.token_hex(6)}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://{user}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        admin, _ = _admin_connection()
        with admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _empty_tables(app: Flask) -> None:
    # DELETE, not TRUNCATE: the tables hold a handful of rows, and TRUNCATE's new files cost far more.
    with get_db(app).engine.begin() as connection:
        for table in reversed(SQLModel.metadata.sorted_tables):
            connection.execute(table.delete())
        connection.execute(text("INSERT INTO audit_chain_head (id, length, last_hash) VALUES (1, 0, :h)"),
                           {"h": GENESIS_HASH})


# --- the app -------------------------------------------------------------------------------------------

@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """The database the test runs on."""
    return request.param


@pytest.fixture
def database_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The database URL of this test: a new SQLite file, or the run's PostgreSQL database."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'quotecheck.sqlite3'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def empty_database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """Yields the URL of a database without tables (for migration tests): a new SQLite file, or a PostgreSQL
    database created for this test and dropped after it."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.sqlite3'}"
        return
    try:
        admin, user = _admin_connection()
    except (ConnectionError, ImportError) as error:
        pytest.skip(f"PostgreSQL on {PG_HOST}:{PG_PORT} is unreachable: {error}")
    name = f"qc_test_{secrets.token_hex(6)}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://{user}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        admin, _ = _admin_connection()
        with admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_app(database_url: str, tmp_path: Path, clock: Clock, backend: str) -> Iterator[Callable[..., Flask]]:
    """Yields a factory of apps on this test's database (extra config as keyword arguments)."""
    apps: list[Flask] = []

    def make(**config: Any) -> Flask:
        app = create_app({"TESTING": True, "INSTANCE_PATH": str(tmp_path / "instance"),
                          "DATABASE_URL": database_url, "CLOCK": clock, **config})
        if backend == "postgresql" and not apps:
            _empty_tables(app)
        apps.append(app)
        return app

    yield make
    for app in apps:
        get_db(app).engine.dispose()


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Flask:
    return make_app()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


# --- acting in a role -------------------------------------------------------------------------------------

@pytest.fixture
def as_role(app: Flask) -> Callable[..., Caller]:
    """Returns a function that creates a token in ``role`` (optionally named) and a Caller sending it."""

    def make(role: str, name: str | None = None) -> Caller:
        name, token = new_token(app, role, name)
        return Caller(app, name, role, token)

    return make


@pytest.fixture
def submission_document() -> dict[str, Any]:
    """A fresh copy of the failing submission, to change freely."""
    return copy.deepcopy(FAILING_SUBMISSION)


@pytest.fixture
def submitted(as_role: Callable[..., Caller], submission_document: dict[str, Any]) -> tuple[Caller, dict[str, Any]]:
    """A submitter and the evaluated view of the failing submission they posted."""
    submitter = as_role("submitter")
    response = submitter.post("/api/v1/submissions", json=submission_document)
    assert response.status_code == 201, response.get_json()
    return submitter, response.get_json()


@pytest.fixture
def receiver() -> Iterator[Any]:
    """A webhook receiver (webhook_support.Receiver) listening on 127.0.0.1 for the test, stopped afterwards."""
    from webhook_support import Receiver

    receiver = Receiver().start()
    yield receiver
    if receiver.running:
        receiver.stop()

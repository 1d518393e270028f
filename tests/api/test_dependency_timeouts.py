"""A database or Redis that hangs costs a request a bounded time and a clean 503 with Retry-After.

The hung dependency is a TCP server on 127.0.0.1 that accepts and never answers (dependency_support.py):
the connection opens, then nothing comes back, as from a paused server. The answer must come within a
bound set by the timeout settings, as application/problem+json with Retry-After, and its detail must not
name the dependency's address (the log does).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from api_support import new_token
from dependency_support import hung_server
from flask import Flask
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from task_support import example, three_variants

from service import create_app
from service.errors import dependency_failure
from service.persistence import db_postgres
from service.persistence.db import get_db, make_engine, without_timeouts
from service.persistence.db_postgres import Timeouts
from service.tasks import task_runs

CONNECT_S, SOCKET_S = 1, 1
# What a request may cost on top of the timeouts it runs into: the app's own work and the test client.
SLACK_S = 1.5


def _assert_clean_503(response: Any, port: int) -> None:
    assert response.status_code == 503, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    assert int(response.headers["Retry-After"]) > 0
    problem = response.get_json()
    assert problem["status"] == 503 and problem["title"] == "Service unavailable"
    assert str(port) not in response.get_data(as_text=True) and "127.0.0.1" not in response.get_data(as_text=True)


def _timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


# --- Redis that hangs ---------------------------------------------------------------------------------------

@pytest.fixture
def hung_redis_app(make_app: Callable[..., Flask]) -> Any:
    with hung_server() as port:
        url = f"redis://127.0.0.1:{port}/0"
        yield make_app(CELERY_BROKER_URL=url, CELERY_CONNECT_TIMEOUT_S=CONNECT_S, CELERY_SOCKET_TIMEOUT_S=SOCKET_S,
                       READINESS_WORKER_TIMEOUT_S=0.5), port


def test_a_comparison_sent_to_a_hung_broker_is_accepted_within_its_bound_and_waits_in_the_outbox(hung_redis_app,
                                                                                                  caplog):
    app, port = hung_redis_app
    _, token = new_token(app, "submitter")
    client = app.test_client()
    submission = example()

    response, elapsed = _timed(lambda: client.post(
        "/api/v1/comparisons", headers={"Authorization": f"Bearer {token}"},
        json={"submission": submission, "variants": three_variants(submission)}))

    # Accepted: the task waits in the outbox (docs/workers.md, "Faults") and is sent when the broker answers
    assert response.status_code == 202, response.get_json()
    assert response.get_json()["state"] == "PENDING"
    assert str(port) not in response.get_data(as_text=True)
    # Publishing once, bounded by the socket timeouts (a new task has no backend state to clear).
    assert elapsed < SOCKET_S + CONNECT_S + SLACK_S, elapsed
    # The operator finds what failed in the log: redis-py says "Timeout reading from socket" up to 7 and
    # "Timeout reading from <host>:<port>" from 8 on (pyproject.toml admits both), the socket module "timed out".
    assert any("Timeout reading from" in record.getMessage() or "timed out" in record.getMessage().lower()
               for record in caplog.records)


def test_readiness_with_a_hung_broker_fails_within_its_bound(hung_redis_app):
    app, port = hung_redis_app

    response, elapsed = _timed(lambda: app.test_client().get("/readyz"))

    _assert_clean_503(response, port)
    checks = response.get_json()["checks"]
    assert checks["database"]["status"] == "ok"
    assert checks["broker"]["status"] == "failed" and checks["workers"]["status"] == "failed"
    assert elapsed < SOCKET_S + SLACK_S, elapsed


def test_a_task_read_while_the_result_backend_hangs_answers_from_the_task_table(hung_redis_app, clock):
    # Given a queued task (its row PENDING), whose live state the API asks the result backend for
    app, port = hung_redis_app
    _, token = new_token(app, "submitter")
    with app.app_context(), get_db(app).session() as session:
        row, _ = task_runs.issue(session, task_runs.COMPARISON, "sha256:" + "0" * 64, 3, "alice", clock())
        session.commit()

    response, elapsed = _timed(lambda: app.test_client().get(f"/api/v1/tasks/{row.id}",
                                                             headers={"Authorization": f"Bearer {token}"}))

    assert response.status_code == 200 and response.get_json()["state"] == "PENDING", response.get_json()
    assert elapsed < SOCKET_S + SLACK_S, elapsed
    assert str(port) not in response.get_data(as_text=True)


# --- PostgreSQL that hangs ----------------------------------------------------------------------------------

@pytest.fixture
def hung_postgres_app(tmp_path) -> Any:
    pytest.importorskip("psycopg")
    with hung_server() as port:
        app = create_app({"TESTING": True, "INSTANCE_PATH": str(tmp_path / "instance"), "AUTO_MIGRATE": False,
                          "DATABASE_URL": f"postgresql://quotecheck@127.0.0.1:{port}/quotecheck",
                          "DATABASE_CONNECT_TIMEOUT_S": 2})
        yield app, port
        get_db(app).engine.dispose()


def test_a_request_to_a_hung_database_gets_503_within_the_connect_timeout(hung_postgres_app):
    app, port = hung_postgres_app

    response, elapsed = _timed(lambda: app.test_client().get(
        "/api/v1/submissions", headers={"Authorization": "Bearer qc_0123456789_" + "a" * 43}))

    _assert_clean_503(response, port)
    assert "database" in response.get_json()["detail"]
    assert elapsed < 2 + SLACK_S, elapsed  # libpq's connect_timeout is at least 2 s


def test_readiness_with_a_hung_database_fails_within_the_connect_timeout(hung_postgres_app):
    app, port = hung_postgres_app

    response, elapsed = _timed(lambda: app.test_client().get("/readyz"))

    _assert_clean_503(response, port)
    assert response.get_json()["checks"]["database"]["status"] == "failed"
    assert elapsed < 2 + SLACK_S, elapsed


# --- PostgreSQL timeouts on an open connection ----------------------------------------------------------------

@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("postgres_url")


@pytest.mark.postgres
def test_a_statement_past_the_statement_timeout_is_cancelled_and_answers_503(pg_url):
    engine = make_engine(pg_url, timeouts=Timeouts(connect_s=2, statement_s=0.2, socket_s=5))
    try:
        started = time.monotonic()
        with engine.connect() as connection, pytest.raises(OperationalError) as raised:
            connection.execute(text("SELECT pg_sleep(3)"))
        assert "statement timeout" in str(raised.value) and time.monotonic() - started < 2
        assert dependency_failure(raised.value) is not None
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_server_that_stops_answering_on_an_open_connection_costs_the_socket_timeout(pg_url):
    # Given a pooled connection whose server process is then paused (SIGSTOP), as a frozen host would be
    engine = make_engine(pg_url, timeouts=Timeouts(connect_s=2, statement_s=None, socket_s=SOCKET_S))
    try:
        with engine.connect() as connection:
            backend_pid = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
            connection.commit()
            try:
                os.kill(backend_pid, signal.SIGSTOP)
            except PermissionError:
                pytest.skip("pausing the PostgreSQL server process needs its user or root")
            try:
                # When a statement is sent
                started = time.monotonic()
                with pytest.raises(OperationalError, match="sent nothing back") as raised:
                    connection.execute(text("SELECT 1"))
                elapsed = time.monotonic() - started
            finally:
                os.kill(backend_pid, signal.SIGCONT)
        assert SOCKET_S <= elapsed < SOCKET_S + SLACK_S, elapsed
        # Then it fails after the socket timeout as a dependency failure, and the pool works on
        assert dependency_failure(raised.value) is not None
        with engine.connect() as connection:
            assert connection.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_migrations_run_without_the_statement_and_socket_timeouts(pg_url):
    engine = make_engine(pg_url, timeouts=Timeouts(connect_s=2, statement_s=0.25, socket_s=0.5))
    try:
        with engine.connect() as connection:
            with connection.begin(), without_timeouts(connection):
                assert connection.execute(text("SHOW statement_timeout")).scalar_one() == "0"
                assert connection.connection.dbapi_connection.socket_timeout_s is None
                connection.execute(text("SELECT pg_sleep(0.6)"))  # past both timeouts
            assert connection.execute(text("SHOW statement_timeout")).scalar_one() == "250ms"
            assert connection.connection.dbapi_connection.socket_timeout_s == 0.5
    finally:
        engine.dispose()


def db_postgres_lifted(connection: Any) -> Any:
    from service.persistence.db import _without_timeouts

    return _without_timeouts(connection)


def test_the_socket_timeout_must_exceed_the_statement_timeout(tmp_path):
    with pytest.raises(ValueError, match="must exceed DATABASE_STATEMENT_TIMEOUT_S"):
        create_app({"INSTANCE_PATH": str(tmp_path), "DATABASE_STATEMENT_TIMEOUT_S": 30,
                    "DATABASE_SOCKET_TIMEOUT_S": 30})


def test_postgres_connections_carry_the_connect_and_statement_timeouts():
    assert db_postgres.connect_args(Timeouts(connect_s=0.5, statement_s=30, socket_s=45)) == {
        "connect_timeout": 2, "options": "-c statement_timeout=30000"}
    assert db_postgres.connect_args(Timeouts(connect_s=5.2, statement_s=None, socket_s=None)) == {"connect_timeout": 6}


def test_a_task_that_failed_on_the_database_is_told_without_its_address(app):
    error = OperationalError("SELECT 1", {}, Exception('connection to server at "10.1.2.3", port 5432 failed'))

    with app.app_context():
        problem = task_runs.problem_of(error)

    assert problem["status"] == 503 and "10.1.2.3" not in problem["detail"] and "5432" not in problem["detail"]

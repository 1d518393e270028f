"""`quotecheck worker health`: the workers' health check (Compose healthcheck, Kubernetes liveness probe) fails
when queued work ages while no run is written, as GET /readyz's workers check does, read from the task table.

On SQLite: in process with the app's clock moved on, and once as the probe runs it (a process configured by the
environment) against a database that holds a task queued long ago.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from flask import Flask
from sqlalchemy import update

from service import create_app
from service.cli import main
from service.config import ENV_PREFIX, clock_of
from service.persistence.db import get_db
from service.persistence.models import TaskRun
from service.tasks import task_runs

ROOT = Path(__file__).parent.parent
MAX_AGE_S = 20


class Clock:
    """The app's clock: the real time shifted by ``offset``."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def app(tmp_path: Path, clock: Clock) -> Iterator[Flask]:
    built = create_app({"TESTING": True, "INSTANCE_PATH": str(tmp_path / "instance"),
                        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "CLOCK": clock,
                        "READINESS_MAX_QUEUED_AGE_S": MAX_AGE_S, "SIGNING_KEYS_AT_START": False})
    yield built
    get_db(built).engine.dispose()


def _queue(app: Flask, key: str) -> str:
    """Issues a task (PENDING, as the API leaves it for a worker) and returns its id."""
    with app.app_context(), get_db().session() as session:
        row, _ = task_runs.issue(session, "comparison", key, 1, "alice", clock_of(app.config)())
        session.commit()
        return row.id


def _write(app: Flask, task_id: str, state: str, when: datetime) -> None:
    with app.app_context(), get_db().session() as session:
        session.execute(update(TaskRun).where(TaskRun.id == task_id).values(state=state, updated_at=when))
        session.commit()


def _health(app: Flask, *args: str) -> Result:
    return CliRunner().invoke(main, ["worker", "health", *args], obj={"app": app})


def test_a_fresh_queued_task_is_healthy(app, clock):
    _queue(app, "a" * 64)
    clock.offset = timedelta(seconds=MAX_AGE_S - 1)

    result = _health(app)

    assert result.exit_code == 0, result.output
    assert "worker health ok" in result.output


def test_a_task_queued_past_the_age_with_no_run_written_exits_1_with_the_reason(app, clock):
    _queue(app, "a" * 64)
    clock.offset = timedelta(seconds=MAX_AGE_S + 5)

    result = _health(app)

    assert result.exit_code == 1
    assert "worker health failed: a task has waited 25" in result.output
    assert f"in the last {MAX_AGE_S} s (READINESS_MAX_QUEUED_AGE_S): the workers are not consuming" in result.output


def test_a_run_written_meanwhile_keeps_the_aged_queue_healthy(app, clock):
    # Given one task waiting past the age, and another that a worker advanced a moment ago
    _queue(app, "a" * 64)
    running = _queue(app, "b" * 64)
    clock.offset = timedelta(seconds=MAX_AGE_S + 5)
    _write(app, running, task_runs.PROGRESS, clock())

    assert _health(app).exit_code == 0


def test_the_age_given_on_the_command_line_replaces_the_setting(app, clock):
    _queue(app, "a" * 64)
    clock.offset = timedelta(seconds=MAX_AGE_S + 5)

    longer = _health(app, "--max-queued-age-s", "300")
    clock.offset = timedelta(seconds=301)
    aged = _health(app, "--max-queued-age-s", "300")

    assert longer.exit_code == 0, longer.output
    assert aged.exit_code == 1 and "(--max-queued-age-s)" in aged.output
    assert _health(app, "--max-queued-age-s", "0").exit_code == 2


def _probe(tmp_path: Path, database_url: str) -> subprocess.CompletedProcess[str]:
    """Runs the command as the probes do: a process whose settings are the environment's."""
    environment: dict[str, Any] = {name: value for name, value in os.environ.items()
                                   if not name.startswith(f"{ENV_PREFIX}_")}
    environment.update({f"{ENV_PREFIX}_DATABASE_URL": database_url,
                        f"{ENV_PREFIX}_INSTANCE_PATH": str(tmp_path / "instance"),
                        f"{ENV_PREFIX}_SIGNING_KEYS_AT_START": "false", "PYTHONPATH": str(ROOT)})
    return subprocess.run([sys.executable, "-m", "service.cli", "worker", "health", "--max-queued-age-s", "300"],
                          capture_output=True, text=True, cwd=ROOT, env=environment, timeout=120)


def test_the_probe_process_fails_on_a_task_queued_long_ago_and_passes_once_it_started(app, tmp_path):
    # Given a task the API queued 400 s ago that no worker took
    task_id = _queue(app, "a" * 64)
    _write(app, task_id, task_runs.PENDING, datetime.now(UTC) - timedelta(seconds=400))
    database_url = app.config["DATABASE_URL"]

    stuck = _probe(tmp_path, database_url)
    _write(app, task_id, task_runs.PROGRESS, datetime.now(UTC))
    moving = _probe(tmp_path, database_url)

    assert stuck.returncode == 1, stuck.stdout + stuck.stderr
    assert "worker health failed: a task has waited 4" in stuck.stderr
    assert moving.returncode == 0, moving.stdout + moving.stderr
    assert "worker health ok" in moving.stdout

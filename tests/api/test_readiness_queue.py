"""/readyz reads the task table for waiting work, in-process on SQLite and PostgreSQL, with a queue that stands in
for the broker and workers that answer every ping: answering pings is not consuming the queue.

A task that waited longer than READINESS_MAX_QUEUED_AGE_S while no run began, made a step or ended makes the
workers check fail (503, problem+json, its members named); work that moves (a run written meanwhile) or a task
started keeps it ready. Real processes (a stopped worker, a worker on another queue) are in test_faults_redis_stall.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from api_support import caller_for
from flask import Flask
from sqlalchemy import update
from task_support import QueueWithoutWorkers, example

from service.persistence.db import get_db
from service.persistence.models import TaskRun
from service.tasks import task_runs, tasks_port

COMPARISONS = "/api/v1/comparisons"
MAX_AGE_S = 20


class AnsweringQueue(QueueWithoutWorkers):
    """A task queue whose broker takes every message and whose workers answer every ping, and consume nothing."""

    def uses_broker(self) -> bool:
        return True

    def depth(self, timeout_s: float | None = None) -> int:
        return len(self.sent)

    def live_workers(self, timeout_s: float) -> list[str]:
        return ["worker@a"]


@pytest.fixture
def app(make_app: Any) -> Flask:
    built = make_app(READINESS_MAX_QUEUED_AGE_S=MAX_AGE_S)
    tasks_port.register(built, AnsweringQueue())
    return built


def _queue_comparison(app: Flask, name: str) -> str:
    response = caller_for(app).post(COMPARISONS, json={"submission": example(),
                                                       "variants": [{"name": name, "patch": {}}]})
    assert response.status_code == 202, response.get_json()
    return response.get_json()["id"]


def _write_run(app: Flask, task_id: str, clock: Any, state: str = task_runs.PROGRESS) -> None:
    with app.app_context(), get_db(app).session() as session:
        session.execute(update(TaskRun).where(TaskRun.id == task_id).values(state=state, updated_at=clock()))
        session.commit()


def test_a_task_waiting_past_the_age_with_no_run_written_makes_the_workers_check_fail(app, clock):
    # Given a comparison queued, and workers that answer pings but take nothing
    client = app.test_client()
    _queue_comparison(app, "waits")
    clock.advance(seconds=MAX_AGE_S - 1)
    assert client.get("/readyz").status_code == 200

    # When it has waited longer than READINESS_MAX_QUEUED_AGE_S
    clock.advance(seconds=2)
    response = client.get("/readyz")

    # Then not ready, with the existing members and what the worker check found
    assert response.status_code == 503 and response.mimetype == "application/problem+json"
    assert "Retry-After" in response.headers
    body = response.get_json()
    assert body["detail"] == "not ready: workers failed"
    assert body["checks"]["database"] == {"status": "ok"} and body["checks"]["broker"] == {"status": "ok", "queued": 1}
    workers = body["checks"]["workers"]
    assert workers["status"] == "failed" and workers["oldest_queued_s"] >= MAX_AGE_S + 1
    assert "READINESS_MAX_QUEUED_AGE_S" in workers["detail"]
    # A probe that leaves the workers to monitoring still sees the API ready
    assert client.get("/readyz?exclude=workers").status_code == 200


def test_a_run_written_within_the_age_keeps_it_ready_and_starting_the_waiting_task_makes_it_ready(app, clock):
    client = app.test_client()
    busy = _queue_comparison(app, "busy")
    waiting = _queue_comparison(app, "waiting")
    clock.advance(seconds=MAX_AGE_S + 5)
    assert client.get("/readyz").status_code == 503

    # A worker that is busy with another task still consumes the queue: its run's step keeps the API ready
    _write_run(app, busy, clock)
    assert client.get("/readyz").get_json()["checks"]["workers"] == {"status": "ok", "live": 1}
    clock.advance(seconds=MAX_AGE_S + 1)
    _write_run(app, busy, clock, task_runs.SUCCESS)
    assert client.get("/readyz").status_code == 200
    clock.advance(seconds=MAX_AGE_S + 1)
    assert client.get("/readyz").status_code == 503

    # Once the waiting task is started, nothing waits
    _write_run(app, waiting, clock)
    clock.advance(seconds=MAX_AGE_S + 1)
    assert client.get("/readyz").status_code == 200


def test_the_readiness_ages_must_be_positive(make_app):
    with pytest.raises(Exception, match="READINESS_MAX_QUEUED_AGE_S must be a positive number"):
        make_app(READINESS_MAX_QUEUED_AGE_S=0)
    with pytest.raises(Exception, match="READINESS_BROKER_TIMEOUT_S must be a positive number"):
        make_app(READINESS_BROKER_TIMEOUT_S="2")

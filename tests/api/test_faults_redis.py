"""Faults of Redis and of workers, against servers of the test's own: a paused Redis, a killed worker, Redis down.

Each test starts its own PostgreSQL (``initdb``, ``pg_ctl``) and Redis (``redis-server``) on loopback ports of
their own, stops them afterwards, and runs real workers (``celery -A workers.worker worker``, prefork) on
them; the API runs in-process on the same database and broker. The time limits are short and the socket
timeouts explicit, so that each test is bounded (tens of seconds). How often each task ran is the task
row's ``attempts`` (every run claims its row first). Skipped when redis-server or PostgreSQL's binaries
are missing.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_support import Caller, new_token
from fault_support import PostgresServer, RedisServer, Worker, service_env, wait_until
from flask import Flask
from task_support import example

from service import create_app
from service.persistence.db import get_db
from service.persistence.models import TaskRun
from service.tasks import task_runs
from service.tasks.tasks_port import COMPARE_CONFIGURATIONS

pytestmark = pytest.mark.faults

COMPARISONS = "/api/v1/comparisons"
SOCKET_TIMEOUT_S = 2
SOFT_LIMIT_S, HARD_LIMIT_S, VISIBILITY_S = 8, 10, 12
# What one request may cost while Redis hangs: two commands that each wait out the socket timeout, and the
# request's own work on the database.
REQUEST_BOUND_S = 2 * SOCKET_TIMEOUT_S + 1.5
TIMEOUTS = {"socket_timeout": SOCKET_TIMEOUT_S, "socket_connect_timeout": SOCKET_TIMEOUT_S}


class Stack:
    """The servers, the in-process API on them, and the settings a worker process gets through its environment."""

    def __init__(self, tmp_path: Path, redis: RedisServer, postgres: PostgresServer) -> None:
        self.tmp_path, self.redis, self.postgres = tmp_path, redis, postgres
        self.queue = f"qc-fault-{secrets.token_hex(4)}"
        self.config: dict[str, Any] = {}
        self.app: Flask | None = None
        self.workers: list[Worker] = []

    def configure(self, celery: dict[str, Any] | None = None, **limits: Any) -> Flask:
        """Returns the API on the servers, with the test's time limits (``limits`` override the module's) and Celery
        settings (``celery``; by default the module's short socket timeouts, ``{}`` for the service's own)."""
        if celery is None:
            celery = {"broker_transport_options": {**TIMEOUTS, "unacked_restore_interval": 1},
                      "redis_socket_timeout": SOCKET_TIMEOUT_S, "redis_socket_connect_timeout": SOCKET_TIMEOUT_S}
        self.config = {
            "CELERY_BROKER_URL": self.redis.url, "CELERY_QUEUE": self.queue,
            "CELERY_TASK_SOFT_TIME_LIMIT_S": SOFT_LIMIT_S, "CELERY_TASK_TIME_LIMIT_S": HARD_LIMIT_S,
            "CELERY_VISIBILITY_TIMEOUT_S": VISIBILITY_S, "TASK_DISPATCH_INTERVAL_S": 1, **limits, "CELERY": celery}
        self.app = create_app({"TESTING": True, "INSTANCE_PATH": str(self.tmp_path / "instance"),
                               "DATABASE_URL": self.postgres.url, **self.config})
        return self.app

    def worker(self, name: str, step_delay_s: float = 0, queue: str | None = None) -> Worker:
        if self.app is None:
            self.configure()
        env = service_env(self.postgres.url, self.tmp_path / "instance", self.config)
        worker = Worker(env, queue or self.queue, self.tmp_path / f"{name}.log", step_delay_s)
        self.workers.append(worker)
        return worker

    def caller(self) -> Caller:
        assert self.app is not None
        name, token = new_token(self.app, "submitter")
        return Caller(self.app, name, "submitter", token)

    def row(self, task_id: str) -> TaskRun:
        assert self.app is not None
        with self.app.app_context(), get_db(self.app).session() as session:
            row = task_runs.find(session, task_id)
        assert row is not None
        return row

    def logs(self) -> str:
        return "\n".join(f"--- {w.log.name}\n{w.tail()}" for w in self.workers)


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    redis, postgres = RedisServer(tmp_path), PostgresServer()
    built: Stack | None = None
    try:
        redis.start()
        postgres.start()
        built = Stack(tmp_path, redis, postgres)
        yield built
    finally:
        if built is not None:
            for worker in built.workers:
                worker.stop()
            if built.app is not None:
                get_db(built.app).engine.dispose()
        redis.stop()
        postgres.remove()


def _body(name: str, variants: int = 1) -> dict[str, Any]:
    return {"submission": example(), "variants": [{"name": f"{name} #{n}", "patch": {}} for n in range(variants)]}


def _timed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def _all_succeed(stack: Stack, task_ids: list[str], timeout_s: float) -> list[TaskRun]:
    """Returns the rows of ``task_ids`` once every one is SUCCESS; AssertionError (with the logs) past the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = [stack.row(task_id) for task_id in task_ids]
        if all(row.state == task_runs.SUCCESS for row in rows):
            return rows
        states = sorted({(row.state, row.sent) for row in rows})
        assert time.monotonic() < deadline, f"not all ended within {timeout_s} s: {states}\n{stack.logs()}"
        assert not any(row.state == task_runs.FAILURE for row in rows), f"{[r.error for r in rows]}\n{stack.logs()}"
        time.sleep(0.2)


def test_while_redis_is_paused_every_request_answers_within_its_bound_and_its_tasks_run_once_it_is_back(stack):
    # Given a worker, a comparison it finished and one it is running (each step slowed down), with time
    # limits that outlast the pause and the steps' waits on Redis meanwhile
    stack.configure(CELERY_TASK_SOFT_TIME_LIMIT_S=60, CELERY_TASK_TIME_LIMIT_S=70, CELERY_VISIBILITY_TIMEOUT_S=80)
    worker = stack.worker("worker", step_delay_s=0.3)
    worker.start()
    submitter = stack.caller()
    finished = submitter.post(COMPARISONS, json=_body("before")).get_json()["id"]
    _all_succeed(stack, [finished], 60)
    running = submitter.post(COMPARISONS, json=_body("running", variants=8)).get_json()["id"]
    wait_until(lambda: stack.row(running).progress_current >= 1, 30, "the second comparison running")

    # When Redis stops answering (SIGSTOP: connections are accepted, nothing is answered)
    stack.redis.pause()
    timings: list[tuple[str, float, int]] = []
    accepted: list[str] = []
    try:
        for n in range(3):
            response, took = _timed(lambda n=n: submitter.post(COMPARISONS, json=_body(f"paused {n}")))
            timings.append((f"POST comparison {n}", took, response.status_code))
            assert response.status_code == 202 and response.get_json()["state"] == "PENDING", response.get_json()
            accepted.append(response.get_json()["id"])
            location = response.headers["Location"]
            read, took = _timed(lambda location=location: submitter.get(location))
            timings.append((f"GET its task {n}", took, read.status_code))
            assert read.status_code == 200 and read.get_json()["state"] == "PENDING"
        again, took = _timed(lambda: submitter.post(COMPARISONS, json=_body("paused 0")))
        timings.append(("POST the same comparison again", took, again.status_code))
        assert again.status_code == 202 and again.get_json()["id"] == accepted[0]
        done, took = _timed(lambda: submitter.get(f"/api/v1/tasks/{finished}"))
        timings.append(("GET a finished task", took, done.status_code))
        assert done.status_code == 200 and done.get_json()["state"] == "SUCCESS"
        live, took = _timed(lambda: submitter.get(f"/api/v1/tasks/{running}"))
        timings.append(("GET a running task (its live state is in Redis)", took, live.status_code))
        assert live.status_code == 200 and live.get_json()["state"] in ("PROGRESS", "SUCCESS")
    finally:
        stack.redis.resume()

    # Then every request answered within its bound...
    slowest = max(timings, key=lambda t: t[1])
    assert slowest[1] <= REQUEST_BOUND_S, timings
    print(f"\nslowest request while Redis was paused: {slowest[0]} {slowest[1]:.2f} s (bound {REQUEST_BOUND_S} s)")
    # ... and once Redis answers again, each accepted task runs, once, and the running one ended (its
    # progress not published meanwhile did not fail it)
    started = time.monotonic()
    rows = _all_succeed(stack, [running, *accepted], 90)
    print(f"all {len(rows)} tasks ended {time.monotonic() - started:.1f} s after Redis answered again")
    assert [row.attempts for row in rows] == [1] * len(rows)


def test_a_worker_killed_with_its_children_mid_task_is_replaced_and_the_task_completes_once(stack):
    stack.configure()
    # Given a worker running a comparison of 16 variants, slowed down so that it can be killed mid-task
    first = stack.worker("worker-1", step_delay_s=0.3)
    first.start()
    submitter = stack.caller()
    response = submitter.post(COMPARISONS, json=_body("killed", variants=16))
    assert response.status_code == 202, response.get_json()
    task_id = response.get_json()["id"]
    wait_until(lambda: stack.row(task_id).progress_current >= 2, 60, "the comparison reaching step 2")

    # When the worker and its pool's children are SIGKILLed, and a worker is started again
    first.kill()
    killed_at = time.monotonic()
    stranded = stack.row(task_id)
    assert (stranded.state, stranded.attempts) == ("PROGRESS", 1) and stranded.progress_current >= 2
    # (asked again meanwhile: the same task, still running as far as anyone can tell)
    assert submitter.post(COMPARISONS, json=_body("killed", variants=16)).get_json()["id"] == task_id
    second = stack.worker("worker-2", step_delay_s=0.3)
    second.start()

    # Then its message comes back after the visibility timeout, its row is reset, and it completes once
    [row] = _all_succeed(stack, [task_id], VISIBILITY_S + 45)
    recovered_s = time.monotonic() - killed_at
    print(f"\nkilled at step {stranded.progress_current}/16; completed {recovered_s:.1f} s later "
          f"(visibility timeout {VISIBILITY_S} s)")
    assert row.attempts == 2 and row.progress_current == row.progress_total == 16
    assert len(row.result["variants"]) == 16
    assert (first.succeeded(COMPARE_CONFIGURATIONS), second.succeeded(COMPARE_CONFIGURATIONS)) == (0, 1), stack.logs()
    task = submitter.get(f"/api/v1/tasks/{task_id}").get_json()
    assert task["state"] == "SUCCESS" and task["result"] == row.result


def test_comparisons_requested_while_redis_is_down_all_complete_once_it_is_back_none_twice(stack):
    # Given a worker, and Redis down (one user's 20 comparisons: a share that holds them, the outage is the point)
    stack.configure(MAX_ACTIVE_TASKS_PER_USER=20)
    worker = stack.worker("worker")
    worker.start()
    submitter = stack.caller()
    stack.redis.stop()

    # When 20 comparisons are requested
    accepted, timings = [], []
    for n in range(20):
        response, took = _timed(lambda n=n: submitter.post(COMPARISONS, json=_body(f"comparison {n}")))
        timings.append(took)
        assert response.status_code == 202 and response.get_json()["state"] == "PENDING", response.get_json()
        accepted.append(response.get_json()["id"])
    assert [stack.row(task_id).sent for task_id in accepted] == [False] * 20

    # Then once Redis is back (empty: it keeps nothing), all 20 complete, each run once
    stack.redis.start()
    back = time.monotonic()
    rows = _all_succeed(stack, accepted, 120)
    print(f"\n20 requests while Redis was down: slowest {max(timings):.2f} s; all complete "
          f"{time.monotonic() - back:.1f} s after Redis was back")
    assert max(timings) <= REQUEST_BOUND_S
    assert [row.attempts for row in rows] == [1] * 20
    assert len({row.id for row in rows}) == 20 and all(row.sent for row in rows)
    assert worker.succeeded(COMPARE_CONFIGURATIONS) == 20, stack.logs()

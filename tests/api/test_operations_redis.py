"""Operations with real Redis and a real worker: readiness (no worker: not ready; one: ready), the queue depth in
/metrics, and the request id in the worker's JSON task logs.

The worker is started as in test_workers_redis.py (`celery -A workers.worker worker`, its own queue and key
prefix on Redis db QUOTECHECK_TEST_REDIS_DB); skipped when Redis is not on 127.0.0.1:6379.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from prometheus_client.parser import text_string_to_metric_families
from task_support import example, poll, three_variants
from test_workers_redis import _start_worker, _stop, _tail, celery_config, isolation, redis_url  # noqa: F401

pytestmark = pytest.mark.redis

WORKER_START_S = 60


@pytest.fixture
def app(make_app: Callable[..., Flask], celery_config: dict[str, Any]) -> Flask:  # noqa: F811
    """The API on Redis; the worker check is cached for a minute, as a long READINESS_CACHE_S would be."""
    return make_app(**celery_config, READINESS_CACHE_S=60, READINESS_WORKER_TIMEOUT_S=0.5)


def _ready_within(client: Any, path: str, timeout_s: float, process: Any, log: Any) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        response = client.get(path)
        if response.status_code == 200:
            return response.get_json()
        assert process.poll() is None, _tail(log)
        assert time.monotonic() < deadline, f"not ready within {timeout_s} s: {response.get_json()}\n{_tail(log)}"
        time.sleep(0.2)


def test_not_ready_without_a_worker_ready_with_one(app, database_url, tmp_path, celery_config):  # noqa: F811
    client = app.test_client()

    # No worker: the database and the broker answer, no worker does
    response = client.get("/readyz")
    assert response.status_code == 503 and response.mimetype == "application/problem+json"
    assert "Retry-After" in response.headers
    checks = response.get_json()["checks"]
    assert checks["database"]["status"] == "ok" and checks["broker"] == {"status": "ok", "queued": 0}
    assert checks["workers"]["status"] == "failed" and "no worker answered" in checks["workers"]["detail"]
    # A probe that leaves the workers out sees the API ready
    assert client.get("/readyz?exclude=workers").status_code == 200

    log = tmp_path / "worker.log"
    process = _start_worker(database_url, tmp_path / "instance", celery_config, log, celery_config["CELERY_QUEUE"])
    try:
        while " ready." not in (log.read_text(errors="replace") if log.exists() else ""):
            assert process.poll() is None, _tail(log)
            time.sleep(0.2)
        # The outcome of the last ping is kept for READINESS_CACHE_S: a probe now costs no ping
        started = time.monotonic()
        assert client.get("/readyz").status_code == 503
        assert time.monotonic() - started < 0.4

        # Once the cached outcome expires, the running worker answers
        app.config["READINESS_CACHE_S"] = 0
        body = _ready_within(client, "/readyz", WORKER_START_S, process, log)
        assert body["status"] == "ready" and body["checks"]["workers"] == {"status": "ok", "live": 1}
    finally:
        _stop(process)


def test_the_metrics_count_the_tasks_waiting_on_the_queue(app, as_role):
    submission = example()
    # Queued, and no worker runs: the task waits on the queue
    assert as_role("submitter").post("/api/v1/comparisons", json={
        "submission": submission, "variants": three_variants(submission)}).status_code == 202

    response = as_role("admin").get("/metrics")

    scraped = {sample.name: sample.value for family in text_string_to_metric_families(response.get_data(as_text=True))
               for sample in family.samples if not sample.labels}
    assert scraped["quotecheck_broker_up"] == 1 and scraped["quotecheck_queue_depth"] == 1


def test_the_request_id_reaches_the_json_logs_of_the_worker_that_runs_the_task(app, as_role, database_url, tmp_path,
                                                                               celery_config):  # noqa: F811
    log = tmp_path / "worker.log"
    process = _start_worker(database_url, tmp_path / "instance", {**celery_config, "LOG_FORMAT": "json"}, log,
                            celery_config["CELERY_QUEUE"])
    try:
        submission = example()
        response = as_role("submitter").post("/api/v1/comparisons", json={
            "submission": submission, "variants": three_variants(submission)}, headers={"X-Request-Id": "req-w-1"})
        assert response.status_code == 202
        view, _ = poll(as_role("submitter").get, response.headers["Location"], timeout_s=WORKER_START_S)
        assert view["state"] == "SUCCESS", view
    finally:
        _stop(process)

    entries = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:  # Celery's start-up banner is printed, not logged
            continue
    task_lines = [e for e in entries if e.get("task_id") == view["id"]]
    assert len(task_lines) == 2 and all(e["request_id"] == "req-w-1" for e in task_lines), task_lines

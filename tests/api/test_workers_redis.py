"""Real services: Celery worker processes on Redis run the tasks the API sends, on SQLite and PostgreSQL.

The worker is started as an operator would (`celery -A workers.worker worker`), configured only through
the environment, on the test's database and instance folder (so it signs with the same key). Each run
uses its own queue and Redis key prefix, and deletes its keys afterwards. Without Redis on 127.0.0.1:6379
these tests are skipped (CI starts it: .ci/run).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from api_support import url, waive_all
from flask import Flask
from task_support import direct_evaluation, example, poll, three_variants

from rules.advice.search import default_chunks, search_submission
from service.record import TrustedKeys, verify_document
from tests.redis_support import delete_keys, reachable_redis_url

pytestmark = pytest.mark.redis

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="session")
def redis_url() -> str:
    return reachable_redis_url()


@pytest.fixture
def isolation(redis_url: str) -> Iterator[dict[str, str]]:
    """Yields this test's queue and key prefix; deletes every key under the prefix afterwards."""
    run = secrets.token_hex(4)
    names = {"queue": f"qc-test-{run}", "prefix": f"qc-test-{run}:"}
    yield names
    delete_keys(redis_url, names["prefix"])


@pytest.fixture
def celery_config(redis_url: str, isolation: dict[str, str]) -> dict[str, Any]:
    """The Celery configuration the app and the worker share (Flask config keys)."""
    prefix = {"global_keyprefix": isolation["prefix"]}
    return {"CELERY_BROKER_URL": redis_url, "CELERY_RESULT_BACKEND": redis_url, "CELERY_QUEUE": isolation["queue"],
            "CELERY": {"broker_transport_options": prefix, "result_backend_transport_options": prefix}}


@pytest.fixture
def app(make_app: Callable[..., Flask], celery_config: dict[str, Any]) -> Flask:
    """The API, sending its tasks to Redis (overrides conftest's eager app)."""
    return make_app(**celery_config)


def _start_worker(database_url: str, instance: Path, celery_config: dict[str, Any], log: Path,
                  name: str) -> subprocess.Popen:
    """Starts `celery -A workers.worker worker` on this test's database, instance folder and queue; logs to ``log``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTECHECK_")}
    env.update({"QUOTECHECK_DATABASE_URL": database_url, "QUOTECHECK_INSTANCE_PATH": str(instance)})
    env.update({f"QUOTECHECK_{key}": value if isinstance(value, str) else json.dumps(value)
                for key, value in celery_config.items()})
    command = [sys.executable, "-m", "celery", "-A", "workers.worker", "worker", "--pool=solo", "--concurrency=1",
               "-Q", celery_config["CELERY_QUEUE"], "-n", f"{name}@%h",
               "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=INFO"]
    with log.open("wb") as output:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)


def _stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)  # warm shutdown: finish the current task, then exit
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


@pytest.fixture
def worker(database_url: str, tmp_path: Path, celery_config: dict[str, Any], app: Flask) -> Iterator[Path]:
    """Runs one worker process on this test's database, instance folder and queue; yields its log."""
    log = tmp_path / "worker.log"
    process = _start_worker(database_url, tmp_path / "instance", celery_config, log, celery_config["CELERY_QUEUE"])
    try:
        yield log
    finally:
        _stop(process)


@pytest.fixture
def two_workers(database_url: str, tmp_path: Path, celery_config: dict[str, Any], app: Flask) -> Iterator[list[Path]]:
    """Runs two worker processes on the same queue, waits until both take tasks; yields their logs."""
    logs = [tmp_path / f"worker-{n}.log" for n in (1, 2)]
    processes = [_start_worker(database_url, tmp_path / "instance", celery_config, log,
                               f"{celery_config['CELERY_QUEUE']}-{n}") for n, log in enumerate(logs, start=1)]
    try:
        deadline = time.monotonic() + 60
        while not all(log.exists() and " ready." in log.read_text(errors="replace") for log in logs):
            assert all(p.poll() is None for p in processes), "\n".join(map(_tail, logs))
            assert time.monotonic() < deadline, "the workers did not start within 60 s:\n" + "\n".join(map(_tail, logs))
            time.sleep(0.1)
        yield logs
    finally:
        for process in processes:
            _stop(process)


def _drain(listener: Any, until: Callable[[dict], bool], window_s: float = 3) -> list[dict]:
    """Returns the task metas published so far, reading until ``until`` holds for one or ``window_s`` passed."""
    published: list[dict] = []
    deadline = time.monotonic() + window_s
    while time.monotonic() < deadline:
        # None both when nothing arrived and for the (ignored) subscribe confirmation: keep reading.
        message = listener.get_message(timeout=0.1)
        if message is not None:
            published.append(json.loads(message["data"]))
            if until(published[-1]):
                break
    return published


def _tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-30:])


def test_a_worker_process_compares_variants_and_reports_progress(app, as_role, worker, isolation, redis_url):
    import redis

    submitter = as_role("submitter")
    submission = example()
    variants = three_variants(submission)
    # Every state change the worker stores is also published on the task's key: watch them all
    listener = redis.Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)
    listener.psubscribe(isolation["prefix"] + "celery-task-meta-*")
    try:
        response = submitter.post("/api/v1/comparisons", json={"submission": submission, "variants": variants})

        assert response.status_code == 202, response.get_json()
        assert response.get_json()["state"] in ("PENDING", "PROGRESS", "SUCCESS")
        task, seen = poll(submitter.get, response.headers["Location"])
        published = _drain(listener, until=lambda meta: meta.get("result") == {"current": 3, "total": 3})
    finally:
        listener.close()

    assert task["state"] == "SUCCESS", f"{task.get('error')}\nworker log:\n{_tail(worker)}"
    assert task["progress"] == {"current": 3, "total": 3}
    rows = {row["name"]: row for row in task["result"]["variants"]}
    for variant in variants:
        direct = direct_evaluation(submission, variant["patch"])
        assert rows[variant["name"]]["failing_checks"] == direct["failing"]
        assert rows[variant["name"]]["days"] == pytest.approx(direct["timing"]["days"])
    assert "peak-memory" in rows["ddp"]["failing_checks"]
    progress = [m["result"] for m in published if m["status"] == "PROGRESS" and m["task_id"] == task["id"]]
    assert {"current": 3, "total": 3} in progress, (published, seen)
    assert all(state in ("PENDING", "PROGRESS", "SUCCESS") for state, _, _ in seen)
    # Asked again, the stored result answers at once: nothing is queued
    again = submitter.post("/api/v1/comparisons", json={"submission": submission, "variants": variants})
    assert again.headers["Location"] == response.headers["Location"]
    assert again.get_json()["state"] == "SUCCESS" and again.get_json()["result"] == task["result"]


def test_a_worker_process_renders_and_stores_the_signed_pdf(app, client, as_role, submitted, worker):
    _, view = submitted
    view = waive_all(as_role("reviewer"), view)
    approved = as_role("approver").post(url(view["id"], "decisions"), json={"action": "approve"},
                                        if_match=view["etag"]).get_json()
    record_pdf = f"/api/v1/records/{approved['final_record_id']}.pdf"
    reader = as_role("reviewer")

    response = reader.get(record_pdf, headers={"Prefer": "respond-async"})

    assert response.status_code == 202, response.get_data(as_text=True)[:300]
    task, _ = poll(reader.get, response.headers["Location"])
    assert task["state"] == "SUCCESS", f"{task.get('error')}\nworker log:\n{_tail(worker)}"
    assert task["progress"] == {"current": 1, "total": 1}
    pdf = reader.get(task["links"]["result"])
    assert pdf.status_code == 200 and pdf.headers["Record-Status"] == "signed"
    assert task["result"]["pdf_digest"] == "sha256:" + hashlib.sha256(pdf.data).hexdigest()
    # Signed in the worker with the instance's key, which GET /api/v1/keys publishes
    pem = "".join(k["certificate_pem"] for k in client.get("/api/v1/keys").get_json()["keys"])
    assert verify_document(pdf.data, TrustedKeys.from_pem(pem.encode(), "GET /api/v1/keys")).ok


def test_with_a_broker_a_plain_get_of_a_signed_pdf_is_a_task_the_worker_runs(app, as_role, submitted, worker):
    # Given an approved record whose signed PDF nobody read yet, and a broker with a worker
    _, view = submitted
    view = waive_all(as_role("reviewer"), view)
    approved = as_role("approver").post(url(view["id"], "decisions"), json={"action": "approve"},
                                        if_match=view["etag"]).get_json()
    record_pdf = f"/api/v1/records/{approved['final_record_id']}.pdf"
    reader = as_role("reviewer")

    # When a reader GETs it without any preference
    response = reader.get(record_pdf)

    # Then the API renders nothing: the worker does, and the PDF it stored is served from then on
    assert response.status_code == 202, response.get_data(as_text=True)[:300]
    assert "Preference-Applied" not in response.headers
    task, _ = poll(reader.get, response.headers["Location"])
    assert task["state"] == "SUCCESS", f"{task.get('error')}\nworker log:\n{_tail(worker)}"
    pdf = reader.get(record_pdf)
    assert pdf.status_code == 200 and pdf.headers["Record-Status"] == "signed"
    assert task["result"]["pdf_digest"] == "sha256:" + hashlib.sha256(pdf.data).hexdigest()


def test_two_worker_processes_search_the_chunks_and_merge_what_one_process_finds(app, as_role, two_workers, isolation,
                                                                                redis_url):
    import redis

    # Given the 1,024-GPU pretraining example, submitted, and two workers on the queue
    document = json.loads((ROOT / "examples" / "h200-128node-pretraining.json").read_text())
    created = as_role("submitter").post("/api/v1/submissions", json=document)
    assert created.status_code == 201, created.get_json()
    reader = as_role("reviewer")
    chunks = len(default_chunks())
    listener = redis.Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)
    listener.psubscribe(isolation["prefix"] + "celery-task-meta-*")
    try:
        # When a reader asks for its layout search
        response = reader.post("/api/v1/searches", json={"submission": created.get_json()["id"]})

        assert response.status_code == 202, response.get_json()
        task, seen = poll(reader.get, response.headers["Location"])
        published = _drain(listener, until=lambda meta: meta["task_id"] == task["id"] and meta["status"] == "SUCCESS")
    finally:
        listener.close()

    # Then the chunks were searched by the workers and merged into what one process finds
    assert task["state"] == "SUCCESS", f"{task.get('error')}\n" + "\n".join(map(_tail, two_workers))
    assert task["kind"] == "search" and task["progress"] == {"current": chunks, "total": chunks}
    assert task["result"] == search_submission(document)
    logs = [log.read_text(errors="replace") for log in two_workers]
    by_worker = [_succeeded(log, "quotecheck.search_layouts.chunk") for log in logs]
    assert sum(by_worker) == chunks and all(by_worker), f"chunks searched by each worker: {by_worker}"
    assert sum(_succeeded(log, "quotecheck.search_layouts.merge") for log in logs) == 1
    # Progress was published under the search's id, one step per chunk, before its end
    mine = [m for m in published if m["task_id"] == task["id"]]
    assert [m["status"] for m in mine][-1] == "SUCCESS" and mine[-1]["result"] == task["result"]
    steps = sorted(m["result"]["current"] for m in mine if m["status"] == "PROGRESS")
    assert steps == list(range(chunks + 1)), mine
    # ... and whatever GET /api/v1/tasks/{id} read on the way only ever moved forward
    assert all(state in ("PENDING", "PROGRESS", "SUCCESS") and total == chunks for state, _, total in seen)
    assert [current for _, current, _ in seen] == sorted(current for _, current, _ in seen)


def _succeeded(log: str, task_name: str) -> int:
    """Returns how many tasks named ``task_name`` a worker's log says succeeded."""
    return sum(1 for line in log.splitlines() if f"{task_name}[" in line and "] succeeded in " in line)


def test_one_users_twenty_comparisons_are_held_to_their_share_and_another_users_completes_within_10_s(
        app, as_role, database_url, tmp_path, celery_config):
    # Given a user who posts 20 comparisons of 16 variants each at once (before a worker takes any of them)
    limit = app.config["MAX_ACTIVE_TASKS_PER_USER"]
    greedy, other = as_role("submitter"), as_role("submitter")
    submission = example()
    bodies = [{"submission": submission, "variants": [{"name": f"comparison {n}, variant {v}", "patch": {}}
                                                      for v in range(16)]} for n in range(20)]
    answers = [greedy.post("/api/v1/comparisons", json=body) for body in bodies]

    # Then the ones over the share get 429 with Retry-After
    assert [a.status_code for a in answers] == [202] * limit + [429] * (20 - limit)
    assert all(a.headers["Retry-After"] == str(app.config["TASK_LIMIT_RETRY_AFTER_S"]) for a in answers[limit:])

    # When a worker process starts on the queue that holds the first user's comparisons
    log = tmp_path / "worker.log"
    process = _start_worker(database_url, tmp_path / "instance", celery_config, log, celery_config["CELERY_QUEUE"])
    try:
        deadline = time.monotonic() + 60
        while not (log.exists() and " ready." in log.read_text(errors="replace")):
            assert process.poll() is None and time.monotonic() < deadline, "the worker did not start:\n" + _tail(log)
            time.sleep(0.1)

        # Then another user's one-variant comparison, queued behind them, completes within 10 s of being posted
        posted = time.monotonic()
        theirs = other.post("/api/v1/comparisons", json={"submission": submission,
                                                          "variants": [{"name": "as quoted", "patch": {}}]})
        assert theirs.status_code == 202, theirs.get_json()
        view, _ = poll(other.get, theirs.headers["Location"], timeout_s=10)
        assert view["state"] == "SUCCESS", view
        assert time.monotonic() - posted < 10
    finally:
        _stop(process)

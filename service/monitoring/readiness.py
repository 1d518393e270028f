"""Readiness: whether this API process can do its work now (the database, the broker, a live worker).

``GET /readyz`` runs the checks; each says ``ok`` or ``failed`` with what it found, and the process is
ready when every check it was asked for is ok. Without a broker (tasks run in this process) there is no
broker or worker to check. The worker check pings the workers through the broker and waits up to
READINESS_WORKER_TIMEOUT_S for the first answer, so its outcome (either way) is kept for READINESS_CACHE_S:
probes every few seconds from several load balancers cost one ping per process and period.

A worker can answer pings and still consume nothing (its BRPOP on a connection that went dead while its pub/sub
connection lives), and a broker that hangs cannot be asked at all; so the worker check also reads the task table,
which needs no broker: a task waiting to be started for longer than READINESS_MAX_QUEUED_AGE_S while no run began,
made a step or ended in that time means the workers are not consuming (stuck, gone, or all busy past that long),
and the check fails until they are again. The broker check waits at most READINESS_BROKER_TIMEOUT_S (its own
socket timeouts), so a probe answers within its own timeout while Redis hangs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from flask import Flask, current_app

from service.config import clock_of
from service.errors import DATABASE_FAILURES, QUEUE_FAILURES, InvalidRequest
from service.persistence.db import get_db
from service.tasks import task_runs
from service.tasks.tasks_port import EXTENSION as TASK_QUEUE
from service.tasks.tasks_port import task_queue

OK, FAILED = "ok", "failed"
CHECKS = ("database", "broker", "workers")
EXTENSION = "quotecheck.readiness"


@dataclass
class _WorkerCache:
    """The last worker check of one app: when it ran (monotonic seconds) and what it found."""

    checked_at: float = float("-inf")
    result: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _database() -> dict[str, Any]:
    try:
        get_db().ping()
    except DATABASE_FAILURES as error:
        current_app.logger.warning("readiness: the database failed: %s", error)
        return {"status": FAILED, "detail": "the database did not answer in time or refused the connection"}
    return {"status": OK}


def _broker() -> dict[str, Any]:
    try:
        depth = task_queue().depth(timeout_s=current_app.config["READINESS_BROKER_TIMEOUT_S"])
    except QUEUE_FAILURES as error:
        current_app.logger.warning("readiness: the broker failed: %s", error)
        return {"status": FAILED, "detail": "the task queue (CELERY_BROKER_URL) did not answer in time or refused "
                                            "the connection"}
    return {"status": OK, "queued": depth}


def _ping_workers() -> dict[str, Any]:
    timeout_s = current_app.config["READINESS_WORKER_TIMEOUT_S"]
    try:
        workers = task_queue().live_workers(timeout_s)
    except QUEUE_FAILURES as error:
        current_app.logger.warning("readiness: could not ping the workers: %s", error)
        return {"status": FAILED, "detail": "the workers could not be pinged: the task queue did not answer"}
    if not workers:
        return {"status": FAILED, "detail": f"no worker answered a ping within {timeout_s} s: queued tasks wait "
                                            "until a worker (celery -A workers.worker worker) runs"}
    return {"status": OK, "live": len(workers)}


def _workers() -> dict[str, Any]:
    cache: _WorkerCache = current_app.extensions[EXTENSION]
    with cache.lock:
        if time.monotonic() - cache.checked_at >= current_app.config["READINESS_CACHE_S"]:
            cache.result = _ping_workers()
            cache.checked_at = time.monotonic()
        return dict(cache.result)


def queue_consumed(max_age_s: float | None = None) -> dict[str, Any] | None:
    """Returns a failed check when a task has waited to be started longer than ``max_age_s`` (by default
    READINESS_MAX_QUEUED_AGE_S) and no run was written in that time (the workers consume nothing); None when the
    queue moves, or the database cannot say.

    ``GET /readyz`` and ``quotecheck worker health`` (the workers' own health check) both ask this.
    """
    setting = "READINESS_MAX_QUEUED_AGE_S" if max_age_s is None else "--max-queued-age-s"
    max_age_s = current_app.config["READINESS_MAX_QUEUED_AGE_S"] if max_age_s is None else max_age_s
    now = clock_of(current_app.config)()
    try:
        with get_db().session() as session:
            waiting_since = task_runs.oldest_waiting(session)
            if waiting_since is None or (now - waiting_since).total_seconds() <= max_age_s:
                return None
            if task_runs.runs_written_since(session, now - timedelta(seconds=max_age_s)):
                return None
    except DATABASE_FAILURES as error:  # the database check says so
        current_app.logger.warning("readiness: could not read the task table: %s", error)
        return None
    waited_s = round((now - waiting_since).total_seconds(), 1)
    return {"status": FAILED, "oldest_queued_s": waited_s,
            "detail": f"a task has waited {waited_s} s to be started and no worker started, advanced or ended a task "
                      f"in the last {max_age_s} s ({setting}): the workers are not consuming the "
                      "queue (stuck, stopped, or all busy)"}


def check(excluded: frozenset[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """Returns each check that applies and is not ``excluded``, by name: its ``status`` and what it found."""
    results = {}
    if "database" not in excluded:
        results["database"] = _database()
    queue = current_app.extensions.get(TASK_QUEUE)
    if queue is not None and queue.uses_broker():
        if "broker" not in excluded:
            results["broker"] = _broker()
        if "workers" not in excluded:
            broker_failed = results.get("broker", {}).get("status") == FAILED
            # No ping through a broker that just failed: it would cost its timeout again for the same answer.
            results["workers"] = {"status": FAILED, "detail": "not pinged: the broker failed"} if broker_failed \
                else _workers()
            if results["workers"]["status"] == OK:
                # Read from the database, uncached: answering pings is not consuming the queue.
                results["workers"] = queue_consumed() or results["workers"]
    return results


def init_app(app: Flask) -> None:
    """Gives the app its cache of the worker check; InvalidRequest when a readiness setting is not a positive number."""
    for name in ("READINESS_MAX_QUEUED_AGE_S", "READINESS_BROKER_TIMEOUT_S"):
        value = app.config[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise InvalidRequest(f"{name} must be a positive number of seconds, found {value!r}")
    app.extensions[EXTENSION] = _WorkerCache()

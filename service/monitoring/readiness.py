"""Readiness: whether this API process can do its work now (the database, the broker, a live worker).

``GET /readyz`` runs the checks; each says ``ok`` or ``failed`` with what it found, and the process is
ready when every check it was asked for is ok. Without a broker (tasks run in this process) there is no
broker or worker to check. The worker check pings the workers through the broker and waits up to
READINESS_WORKER_TIMEOUT_S for the first answer, so its outcome (either way) is kept for READINESS_CACHE_S:
probes every few seconds from several load balancers cost one ping per process and period.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, current_app

from service.errors import DATABASE_FAILURES, QUEUE_FAILURES
from service.persistence.db import get_db
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
        depth = task_queue().depth()
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
    return results


def init_app(app: Flask) -> None:
    """Gives the app its cache of the worker check."""
    app.extensions[EXTENSION] = _WorkerCache()

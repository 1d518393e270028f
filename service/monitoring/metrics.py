"""Prometheus metrics of the API: what each process counts, and what a scrape reads from the database and Redis.

Counted in the process that does the work (``quotecheck_http_*`` per request, by the route's URL rule, not
its raw path; ``quotecheck_evaluations_total`` and ``quotecheck_check_results_total`` per evaluation). Under
gunicorn with several workers, QUOTECHECK_METRICS_DIR (deploy/gunicorn.conf.py, which empties it at start
and sets prometheus_client's ``PROMETHEUS_MULTIPROC_DIR`` from it) makes each worker process write its counts
there, and a scrape, whichever worker answers it, adds up all of them (prometheus_client's multiprocess
mode). Without it each process reports only its own counts.

Read on each scrape, so every API process reports the same: the task table by kind and state
(``quotecheck_tasks``) and the time from request to end of the finished ones
(``quotecheck_task_duration_seconds``, a histogram by kind and outcome), which covers tasks run by the
workers as well as in-process ones; the tasks waiting on the broker's queue
(``quotecheck_queue_depth``, within the Redis timeouts; ``quotecheck_broker_up`` says whether it answered);
and the webhook outbox by state (``quotecheck_webhook_deliveries``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from typing import Any

from flask import Flask, Response, current_app, g, request
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from sqlalchemy import case, func
from sqlmodel import select

from service.errors import QUEUE_FAILURES
from service.persistence.db import get_db
from service.persistence.models import TaskRun
from service.persistence.webhook_models import WebhookDelivery
from service.tasks import task_runs
from service.tasks.tasks_port import EXTENSION as TASK_QUEUE

MULTIPROCESS_DIRECTORY = "PROMETHEUS_MULTIPROC_DIR"
# Latency buckets (seconds): an evaluation takes milliseconds, a PDF about a second, a timeout up to a minute.
REQUEST_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# From request to end of a task: a comparison takes seconds, a search up to its time limit, a queue may wait.
TASK_BUCKETS_S = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)
UNMATCHED_ROUTE = "<unmatched>"

# The counts of this process. A registry of its own: the tests create many apps in one process.
REGISTRY = CollectorRegistry(auto_describe=True)
HTTP_REQUESTS = Counter("quotecheck_http_requests", "HTTP requests answered, by method, route (URL rule) and status",
                        ["method", "route", "status"], registry=REGISTRY)
HTTP_DURATION = Histogram("quotecheck_http_request_duration_seconds", "Time to answer a request, by method and route",
                          ["method", "route"], buckets=REQUEST_BUCKETS_S, registry=REGISTRY)
EVALUATIONS = Counter("quotecheck_evaluations", "Submissions evaluated, by verdict", ["verdict"], registry=REGISTRY)
CHECK_RESULTS = Counter("quotecheck_check_results", "Check results of evaluations, by check id and status",
                        ["check", "status"], registry=REGISTRY)

_STARTED = "quotecheck_request_started"


def observe_evaluation(record: dict[str, Any]) -> None:
    """Counts one evaluation (its record) by verdict, and each of its check results by check id and status."""
    EVALUATIONS.labels(verdict=str(record.get("verdict"))).inc()
    for check in record.get("checks", []):
        CHECK_RESULTS.labels(check=str(check.get("id")), status=str(check.get("status"))).inc()


def _start_timer() -> None:
    g.setdefault(_STARTED, time.perf_counter())


def _count_request(response: Response) -> Response:
    route = request.url_rule.rule if request.url_rule is not None else UNMATCHED_ROUTE
    HTTP_REQUESTS.labels(method=request.method, route=route, status=str(response.status_code)).inc()
    started = g.get(_STARTED)
    if started is not None:
        HTTP_DURATION.labels(method=request.method, route=route).observe(time.perf_counter() - started)
    return response


# --- read on scrape -----------------------------------------------------------------------------------------

def _seconds_between(start: Any, end: Any, dialect: str) -> Any:
    """Returns the SQL expression of the seconds from ``start`` to ``end`` (timestamps) in ``dialect``."""
    if dialect == "postgresql":
        return func.extract("epoch", end - start)
    return (func.julianday(end) - func.julianday(start)) * 86400.0


def _task_metrics() -> Iterator[Metric]:
    db = get_db()
    tasks = GaugeMetricFamily("quotecheck_tasks", "Tasks in the task table, by kind and state (FAILURE: failed "
                              "and not asked for again)", labels=["kind", "state"])
    duration = HistogramMetricFamily("quotecheck_task_duration_seconds", "Time from a task's request to its end, "
                                     "queue wait included, of the finished tasks in the table, by kind and outcome",
                                     labels=["kind", "state"])
    seconds = _seconds_between(TaskRun.created_at, TaskRun.updated_at, db.dialect)
    with db.session() as session:
        for kind, state, count in session.exec(
                select(TaskRun.kind, TaskRun.state, func.count()).group_by(TaskRun.kind, TaskRun.state)).all():
            tasks.add_metric([kind, state], count)
        # One pass over the finished tasks: their count, the sum of their durations, and a count per bucket.
        columns = [func.count(), func.coalesce(func.sum(seconds), 0.0)] + [
            func.sum(case((seconds <= bound, 1), else_=0)) for bound in TASK_BUCKETS_S]
        rows = session.exec(select(TaskRun.kind, TaskRun.state, *columns)
                            .where(TaskRun.state.in_(task_runs.FINISHED))  # type: ignore[attr-defined]
                            .group_by(TaskRun.kind, TaskRun.state)).all()
    for kind, state, count, total, *cumulative in rows:
        buckets = [(str(bound), int(n)) for bound, n in zip(TASK_BUCKETS_S, cumulative, strict=True)]
        duration.add_metric([kind, state], buckets + [("+Inf", int(count))], float(total))
    yield tasks
    yield duration


def _queue_metrics() -> Iterator[Metric]:
    queue = current_app.extensions.get(TASK_QUEUE)
    if queue is None or not queue.uses_broker():
        return
    up = GaugeMetricFamily("quotecheck_broker_up", "1 when the broker answered this scrape, 0 when it did not")
    try:
        depth = queue.depth()
    except QUEUE_FAILURES as error:
        current_app.logger.warning("metrics: the broker did not answer: %s", error)
        up.add_metric([], 0)
        yield up
        return
    up.add_metric([], 1)
    yield up
    yield GaugeMetricFamily("quotecheck_queue_depth", "Tasks waiting on the broker's queue for a worker",
                            value=depth or 0)


def _outbox_metrics() -> Iterator[Metric]:
    deliveries = GaugeMetricFamily("quotecheck_webhook_deliveries", "Webhook deliveries in the outbox, by state "
                                   "(pending: not sent yet or to be retried)", labels=["state"])
    with get_db().session() as session:
        for state, count in session.exec(
                select(WebhookDelivery.state, func.count()).group_by(WebhookDelivery.state)).all():
            deliveries.add_metric([state], count)
    yield deliveries


class _ScrapeCollector:
    """The metrics read when scraped (registered on a registry made for one scrape, inside the request)."""

    def collect(self) -> Iterable[Metric]:
        yield from _task_metrics()
        yield from _queue_metrics()
        yield from _outbox_metrics()


def exposition() -> bytes:
    """Returns the metrics in the Prometheus text format: this process's counts (or all processes', in
    multiprocess mode) and what the database and the broker say now."""
    if os.environ.get(MULTIPROCESS_DIRECTORY):
        counted = CollectorRegistry()
        MultiProcessCollector(counted)
    else:
        counted = REGISTRY
    scraped = CollectorRegistry(auto_describe=False)
    scraped.register(_ScrapeCollector())  # type: ignore[arg-type]
    return generate_latest(counted) + generate_latest(scraped)


# The classic text format (what prometheus_client's own exporters send): every Prometheus version reads it.
MEDIA_TYPE = CONTENT_TYPE_PLAIN_0_0_4


def init_app(app: Flask) -> None:
    """Counts every request of ``app``; checks METRICS_TOKEN, so a weak one stops the start."""
    token = app.config.get("METRICS_TOKEN")
    if token is not None and (not isinstance(token, str) or len(token) < 32):
        raise ValueError("METRICS_TOKEN must be a string of at least 32 characters (e.g. `openssl rand -hex 32`), "
                         "JSON-quoted in the environment if it could parse as a number")
    app.before_request(_start_timer)
    app.after_request(_count_request)

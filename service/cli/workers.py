"""`quotecheck worker health`: whether the workers consume the task queue, for the workers' own health check."""

from __future__ import annotations

import sys

import click

from service.cli.common import EXIT_FAILED, service_app
from service.monitoring import readiness

WORKER_HEALTH_EXIT_CODES = """\b
Exit codes:
  0  no task waits past the age, or a run was written meanwhile (the queue moves);
     also when the database does not answer (said on stderr: restarting a worker
     does not bring the database back)
  1  a task waited past the age and no worker started, advanced or ended one
  2  bad input (invalid configuration)"""


@click.group()
def worker() -> None:
    """The Celery workers (celery -A workers.worker worker) seen from the task table."""


@worker.command("health", epilog=WORKER_HEALTH_EXIT_CODES)
@click.option("--max-queued-age-s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="How long a task may wait to be started while no run is written, in seconds (default: "
                   "READINESS_MAX_QUEUED_AGE_S, as GET /readyz). A probe that restarts workers sets it above "
                   "CELERY_TASK_TIME_LIMIT_S: then workers busy with long tasks still end one within it.")
def worker_health(max_queued_age_s: float | None) -> None:
    """Fail when queued work ages and no worker consumes it: the check of GET /readyz's `workers` that reads the
    task table (a worker that answers pings but takes nothing from the queue fails it).

    Reads the database only, not the broker: run it beside `celery inspect ping`, which asks the worker itself.
    """
    app = service_app()
    with app.app_context():
        database = readiness.check(frozenset({"broker", "workers"}))["database"]
        failed = readiness.queue_consumed(max_queued_age_s) if database["status"] == readiness.OK else None
    if database["status"] != readiness.OK:
        click.echo(f"worker health not judged: {database['detail']}", err=True)
        return
    if failed is not None:
        click.echo(f"worker health failed: {failed['detail']}", err=True)
        sys.exit(EXIT_FAILED)
    click.echo("worker health ok: no queued task waits past the age, or the workers wrote a run meanwhile")

"""`quotecheck tasks dispatch`: send the background tasks accepted while the broker was unreachable."""

from __future__ import annotations

import sys

import click

from service.app.tasks import dispatch_pending
from service.cli.common import EXIT_FAILED, service_app

TASKS_DISPATCH_EXIT_CODES = """\b
Exit codes:
  0  every unsent task was sent (or none was waiting)
  1  the broker refused one: the rest wait for the next dispatch
  2  bad input (invalid configuration)"""


@click.group()
def tasks() -> None:
    """Background tasks (comparisons, searches, PDFs) and their outbox."""


@tasks.command("dispatch", epilog=TASKS_DISPATCH_EXIT_CODES)
def tasks_dispatch() -> None:
    """Send every task the API accepted but could not hand to the broker (Redis was down), oldest first.

    Every worker does this when it is ready and every TASK_DISPATCH_INTERVAL_S; run it where no worker
    runs yet, or to drain the outbox at once. Safe beside workers doing the same: a task is sent by one
    sender at a time, and a task sent twice runs once.
    """
    app = service_app()
    with app.app_context():
        report = dispatch_pending()
    click.echo(f"task outbox: {report.sent} sent, {'the broker refused the next' if report.failed else 'none left'}")
    if report.failed:
        sys.exit(EXIT_FAILED)

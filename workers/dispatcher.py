"""Every worker sends the outbox's unsent tasks (service/tasks/task_outbox.py): once it is ready, then periodically.

A request accepted while the broker was unreachable left its task unsent in the database. Nothing on the
broker can remind anyone of it (Celery beat needs the broker too), so each worker process that consumes
tasks runs this thread beside its consumer: when the broker is back, the worker that reconnects sends
them. Several workers at once are safe (one sender per row, and a task sent twice runs once).
"""

from __future__ import annotations

import logging
import threading

from flask import Flask

from service.app.tasks import dispatch_pending

logger = logging.getLogger(__name__)


class Dispatcher(threading.Thread):
    """A daemon thread that runs ``dispatch_pending`` in ``app``'s context now and every ``interval_s``."""

    def __init__(self, app: Flask, interval_s: float) -> None:
        super().__init__(name="quotecheck-task-dispatcher", daemon=True)
        self.app, self.interval_s = app, interval_s
        self.stopping = threading.Event()

    def run(self) -> None:
        while True:
            try:
                with self.app.app_context():
                    report = dispatch_pending()
                if report.sent or report.failed:
                    refused = "; the broker refused the next, the rest wait for the next pass" if report.failed else ""
                    logger.info("task outbox: %d sent%s", report.sent, refused)
            except Exception:  # the database is unreachable: try again next time
                logger.warning("task outbox: could not dispatch", exc_info=True)
            if self.stopping.wait(self.interval_s):
                return

    def stop(self) -> None:
        self.stopping.set()

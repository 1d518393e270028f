"""The one interface through which the service hands work to background tasks, by task name.

The service names the tasks and says what it sends them; the worker package (workers/) implements the
queue and the tasks, and registers its queue on the app when the app is created: ``create_app`` calls
``init_app(app)`` of the module named by the TASK_QUEUE setting (``workers.celery_app`` by default). So
``workers`` imports ``service``, never the reverse, and an app without a queue (TASK_QUEUE None) serves
everything but background work, which it answers with 503.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from flask import Flask, current_app

from service.errors import InvalidRequest, ServiceUnavailable

# The tasks, by the names the worker registers them under (workers/tasks.py) and the service sends them.
COMPARE_CONFIGURATIONS = "quotecheck.compare_configurations"  # (submission JSON text, variants)
# (JSON text of [[submission id, document], ...], {submission id: [ids of the checks waived on it]})
COMPARE_QUOTES = "quotecheck.compare_quotes"
RENDER_RECORD_PDF = "quotecheck.render_record_pdf"  # (record id, the actor who asked, as a dict)
SEARCH_LAYOUTS = "quotecheck.search_layouts"  # (submission JSON text): fans out into a task per chunk
# (): sends the webhook deliveries due now (service/webhooks/subscriptions.py)
DELIVER_WEBHOOKS = "quotecheck.deliver_webhooks"
FIND_REMEDIES = "quotecheck.find_remedies"  # (submission JSON text)

EXTENSION = "quotecheck.task_queue"


class TaskQueue(Protocol):
    """What the service needs of a task queue."""

    # True when sent tasks run in other processes (a broker and its workers); False when ``send`` runs them
    # in the sending process before it returns (no broker).
    in_background: bool

    def send(self, name: str, args: list[Any], task_id: str) -> None:
        """Queues task ``name`` with JSON ``args`` under ``task_id`` (or runs it now, in-process); raises when the
        queue cannot be reached."""

    def forget(self, task_id: str) -> None:
        """Drops what the queue's result store holds of ``task_id`` (a task sent again must not show its last end)."""

    def state(self, task_id: str) -> tuple[str | None, Any]:
        """Returns the result store's (state, meta) of ``task_id``: PENDING, PROGRESS, SUCCESS or FAILURE."""

    def uses_broker(self) -> bool:
        """Returns True when tasks go to a broker for worker processes, False when they run in this process."""

    def depth(self, timeout_s: float | None = None) -> int | None:
        """Returns how many tasks wait on the queue (None without a broker); raises when the broker does not answer
        within its timeouts, or within ``timeout_s`` when given."""

    def live_workers(self, timeout_s: float) -> list[str]:
        """Returns the names of the workers that answered a ping within ``timeout_s`` (the first answer ends the
        wait); raises when the broker does not answer."""


def register(app: Flask, queue: TaskQueue) -> None:
    """Makes ``queue`` the app's task queue (the worker package calls this from its ``init_app``)."""
    app.extensions[EXTENSION] = queue


def task_queue() -> TaskQueue:
    """Returns the current app's task queue; ServiceUnavailable when none was registered (TASK_QUEUE is None)."""
    queue = current_app.extensions.get(EXTENSION)
    if queue is None:
        raise ServiceUnavailable("this service runs no background tasks (TASK_QUEUE is not set); nothing was queued")
    return queue


def runs_in_background() -> bool:
    """Returns True when the current app hands tasks to workers elsewhere (a broker is configured)."""
    queue = current_app.extensions.get(EXTENSION)
    return bool(queue is not None and getattr(queue, "in_background", False))


# Fair shares (service/tasks/task_runs.py, docs/settings.md): each a whole number of at least 1.
LIMIT_SETTINGS = ("MAX_ACTIVE_TASKS_PER_USER", "TASK_LIMIT_RETRY_AFTER_S")


def init_app(app: Flask) -> None:
    """Checks the settings of fair shares, so a bad one stops the start rather than the first request for work;
    then lets the module named by TASK_QUEUE register the app's task queue (its ``init_app(app)``)."""
    for setting in LIMIT_SETTINGS:
        value = app.config[setting]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidRequest(f"{setting} must be a whole number of at least 1, found {value!r}")
    name = app.config.get("TASK_QUEUE")
    if name:
        importlib.import_module(name).init_app(app)

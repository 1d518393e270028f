"""The Celery app a worker process runs: ``celery -A workers.worker worker``.

The Flask app is created from the environment (``QUOTECHECK_*``, as for the API), so a worker reads the
same database, broker, queue and signing key. The module must not have an attribute named ``app`` that is
not the Celery app: ``celery -A`` looks for ``app`` first, then ``celery``. Once the worker is ready its
main process sends the task outbox's unsent tasks, then every TASK_DISPATCH_INTERVAL_S (workers/dispatcher.py).
"""

from __future__ import annotations

from typing import Any

from celery.signals import setup_logging, worker_process_init, worker_ready, worker_shutting_down

from service import create_app, logs
from service.app.database import drop_inherited_connections
from service.startup import settle_after_start_up
from workers.dispatcher import Dispatcher

flask_app = create_app()
celery = flask_app.extensions["celery"]
dispatcher = Dispatcher(flask_app, flask_app.config["TASK_DISPATCH_INTERVAL_S"])


if logs.json_logs(flask_app.config):
    # Connected, this signal keeps Celery from setting up logging its way: JSON lines instead, whose task
    # lines carry the request id of the request that sent the task.
    @setup_logging.connect(weak=False)
    def _json_logs(**_: Any) -> None:
        logs.configure_json_logs()


@worker_process_init.connect(weak=False)
def _fresh_database_connections(**_: Any) -> None:
    # A prefork child inherits the parent's pooled connections; sharing a socket across processes corrupts
    # it. Drop them without closing (the parent still owns them); the child opens its own.
    drop_inherited_connections(flask_app)
    # What every evaluation reads, loaded and frozen out of the garbage collector's walks (service/startup.py).
    settle_after_start_up()


@worker_ready.connect(weak=False)
def _start_dispatcher(**_: Any) -> None:
    dispatcher.start()


@worker_shutting_down.connect(weak=False)
def _stop_dispatcher(**_: Any) -> None:
    dispatcher.stop()

"""The Celery app a worker process runs: ``celery -A workers.worker worker``.

The Flask app is created from the environment (``QUOTECHECK_*``, as for the API), so a worker reads the
same database, broker, queue and signing key. The module must not have an attribute named ``app`` that is
not the Celery app: ``celery -A`` looks for ``app`` first, then ``celery``.
"""

from __future__ import annotations

from typing import Any

from celery.signals import worker_process_init

from service import create_app
from service.db import get_db

flask_app = create_app()
celery = flask_app.extensions["celery"]


@worker_process_init.connect(weak=False)
def _fresh_database_connections(**_: Any) -> None:
    # A prefork child inherits the parent's pooled connections; sharing a socket across processes corrupts
    # it. Drop them without closing (the parent still owns them); the child opens its own.
    get_db(flask_app).engine.dispose(close=False)

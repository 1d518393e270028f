"""The quotecheck web service: ``create_app`` builds a configured Flask app."""

from __future__ import annotations

import copy
import json
import os
from typing import Any

from flask import Flask

from service.config import DEFAULTS, ENV_PREFIX


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Returns a Flask app configured from defaults, the instance file, the environment, then ``test_config``.

    The instance folder (``QUOTECHECK_INSTANCE_PATH`` or ``INSTANCE_PATH`` in ``test_config``; default
    ``./instance``) holds ``config.json`` or ``config.py``, without DATABASE_URL the SQLite file, and without
    SIGNING_CERT_FILE/SIGNING_KEY_FILE the record signing key (``signing/``, generated on first start).
    Environment variables ``QUOTECHECK_<KEY>`` set ``<KEY>``; values that parse as JSON are taken as JSON.
    The module TASK_QUEUE names (``workers.celery_app``) registers the task queue (service/tasks/tasks_port.py).
    """
    # Imported on first use, not with the package: the command line and Alembic's env import modules of
    # this package (every import of one runs this file) and must not load the whole web layer to do so.
    from service import api, errors, http, logs, record, ui
    from service.accounts import auth, throttle
    from service.app import evaluation
    from service.monitoring import metrics, readiness
    from service.persistence import db
    from service.tasks import tasks_port
    from service.webhooks import subscriptions as webhooks

    test_config = dict(test_config or {})
    instance_path = test_config.pop("INSTANCE_PATH", None) or os.environ.get(f"{ENV_PREFIX}_INSTANCE_PATH")
    app = Flask(__name__, instance_path=os.path.abspath(instance_path) if instance_path else None,
                instance_relative_config=True, static_folder=None)
    # A copy: nested settings (QUOTECHECK_CELERY__broker_transport_options) are written into the dicts of
    # the config, which must not be the module's defaults shared by every app of the process.
    app.config.from_mapping(copy.deepcopy(DEFAULTS))
    app.config.from_file("config.json", load=json.load, silent=True)
    app.config.from_pyfile("config.py", silent=True)
    app.config.from_prefixed_env(ENV_PREFIX)
    app.config.from_mapping(test_config)

    logs.init_app(app)
    errors.init_app(app)
    http.init_app(app)
    metrics.init_app(app)
    db.init_app(app)
    auth.init_app(app)
    throttle.init_app(app)
    evaluation.init_app(app)
    record.init_app(app)
    tasks_port.init_app(app)
    readiness.init_app(app)
    webhooks.init_app(app)
    api.init_app(app)
    ui.init_app(app)
    return app

"""Logs: one JSON object per line (LOG_FORMAT ``json``), each naming the request (or task) it belongs to.

Every request gets a request id: the client's ``X-Request-Id`` when it is a sane token (1 to 128 of
``A-Z a-z 0-9 . _ : @ / + = -``, starting with a letter or digit), otherwise a new one; the response echoes
it. The id travels with the tasks the request sends (a task header; workers/celery_app.py) and is bound
again while a worker runs the task, so a worker's task logs carry the id of the request that asked for the
work. With LOG_FORMAT ``json`` each request also writes one ``request`` line (method, route, status,
duration), which replaces gunicorn's access log (deploy/gunicorn.conf.py turns that off).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from flask import Flask, Response, g, request
from flask.logging import default_handler

REQUEST_ID_HEADER = "X-Request-Id"
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,127}")
FORMATS = ("text", "json")
REQUEST_LOGGER = "quotecheck.request"

_request_id: ContextVar[str | None] = ContextVar("quotecheck_request_id", default=None)
# The attributes every LogRecord has; anything else on a record came from ``extra=`` and is logged as a field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "request_id"}


def request_id() -> str | None:
    """Returns the id of the request (or task) this code runs for, if any."""
    return _request_id.get()


@contextmanager
def bound_request_id(value: str | None) -> Iterator[None]:
    """Binds ``value`` as the request id for the block (a worker running a task a request sent)."""
    token = _request_id.set(value)
    try:
        yield
    finally:
        _request_id.reset(token)


def accepted_request_id(header: str | None) -> str:
    """Returns the client's request id when it is sane, else a new one (32 hexadecimal digits)."""
    if header is not None and SANE_REQUEST_ID.fullmatch(header):
        return header
    return uuid.uuid4().hex


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object: time (UTC), level, logger, message, request id, extra fields, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00",
                                                                                                         "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", None) or request_id()
        if rid:
            entry["request_id"] = rid
        entry.update({key: value for key, value in vars(record).items() if key not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is when a record is written (test runners swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_json_logs() -> None:
    """Makes the root logger write JSON lines to standard error at INFO (replacing the handler an earlier call added).

    Process-wide and idempotent: every app of a process and the worker share it.
    """
    handler = logging.StreamHandler(_CurrentStderr())  # type: ignore[arg-type]
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "quotecheck_json", False):
            root.removeHandler(old)
    handler.quotecheck_json = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # Celery's line for every task that succeeded carries its arguments and result (whole submissions): the
    # task's own start and end lines (workers/celery_app.py) say what happened; failures still show.
    logging.getLogger("celery.app.trace").setLevel(logging.WARNING)


def json_logs(config: dict[str, Any]) -> bool:
    """Returns whether LOG_FORMAT asks for JSON lines; ValueError for a value that is neither text nor json."""
    value = config.get("LOG_FORMAT", "text")
    if value not in FORMATS:
        raise ValueError(f"LOG_FORMAT must be one of {', '.join(FORMATS)}, not {value!r}")
    return value == "json"


def _begin_request() -> None:
    rid = accepted_request_id(request.headers.get(REQUEST_ID_HEADER))
    g.quotecheck_request_id = rid
    g.quotecheck_request_token = _request_id.set(rid)
    g.quotecheck_request_started = time.perf_counter()


def _end_request(response: Response) -> Response:
    rid = g.get("quotecheck_request_id")
    if rid:
        response.headers[REQUEST_ID_HEADER] = rid
    return response


def _log_request(response: Response) -> Response:
    started = g.get("quotecheck_request_started")
    duration_ms = round((time.perf_counter() - started) * 1000, 1) if started is not None else None
    logging.getLogger(REQUEST_LOGGER).info(
        "%s %s %s", request.method, request.path, response.status_code,
        extra={"method": request.method, "route": request.url_rule.rule if request.url_rule else None,
               "path": request.path, "status": response.status_code, "duration_ms": duration_ms,
               "remote_addr": request.remote_addr})
    return response


def _forget_request(_error: BaseException | None) -> None:
    token = g.pop("quotecheck_request_token", None)
    if token is not None:
        try:
            _request_id.reset(token)
        except ValueError:  # torn down in another context than the one it began in
            _request_id.set(None)


def init_app(app: Flask) -> None:
    """Gives every request of ``app`` its request id (echoed in the response); JSON lines when LOG_FORMAT is json."""
    app.before_request(_begin_request)
    app.after_request(_end_request)
    app.teardown_request(_forget_request)
    if json_logs(app.config):
        app.logger.removeHandler(default_handler)
        configure_json_logs()
        app.after_request(_log_request)

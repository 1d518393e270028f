"""The Celery app of a Flask app, in the shape of Flask's ``celery_init_app`` ("Background Tasks with Celery").

Every task runs inside the Flask app's context, so it reads the same configuration, database and signing
keys as the API. Without ``CELERY_BROKER_URL`` tasks run in-process when they are sent (eager), which is
what one machine and the fast tests use; with a Redis URL they go to ``celery -A workers.worker worker``.

``init_app`` is what ``create_app`` calls for the TASK_QUEUE setting (``workers.celery_app`` by default):
it registers the Celery app as the service's task queue (service/tasks/tasks_port.py), through which the API
sends tasks by name; the service never imports this package.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import Celery, Task
from celery.signals import task_postrun, task_prerun
from flask import Flask

# Registers the shared tasks on every Celery app, this module's included.
import workers.remedy_tasks  # noqa: F401
import workers.search_tasks  # noqa: F401
import workers.tasks  # noqa: F401
import workers.webhook_tasks  # noqa: F401
from service import logs
from service.errors import InvalidRequest
from service.tasks import tasks_port
from workers.acks import AckRetries, RetriedAckRequest

EXTENSION = "celery"
REDIS_SCHEMES = ("redis://", "rediss://", "redis+socket://")
# How often (s) a worker looks for messages whose worker died before acknowledging them (kombu's
# unacked_restore_interval; its throttle 1 makes every look a scan), to re-queue those older than the
# visibility timeout.
UNACKED_RESTORE_INTERVAL_S = 10
# Only JSON crosses the broker: a message or result that only pickle could carry is refused, not executed.
JSON_ONLY: dict[str, Any] = {
    "task_serializer": "json",
    "result_serializer": "json",
    "accept_content": ["json"],
    "result_accept_content": ["json"],
    "event_serializer": "json",
}


def check_time_limits(config: dict[str, Any]) -> None:
    """Raises InvalidRequest unless soft time limit < hard time limit < the broker's visibility timeout.

    A message a worker took is handed to another worker when it was not acknowledged within the visibility
    timeout; a task runs at most its hard time limit, so with a longer timeout a running task is never
    handed out twice, and one whose worker died is re-queued once the timeout ran out.
    """
    soft, hard = config["CELERY_TASK_SOFT_TIME_LIMIT_S"], config["CELERY_TASK_TIME_LIMIT_S"]
    visibility = config["CELERY_VISIBILITY_TIMEOUT_S"]
    for name, value in (("CELERY_TASK_SOFT_TIME_LIMIT_S", soft), ("CELERY_TASK_TIME_LIMIT_S", hard),
                        ("CELERY_VISIBILITY_TIMEOUT_S", visibility), ("TASK_DISPATCH_INTERVAL_S",
                                                                      config["TASK_DISPATCH_INTERVAL_S"])):
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise InvalidRequest(f"{name} must be a positive number of seconds, found {value!r}")
    if not soft < hard < visibility:
        raise InvalidRequest(f"the task time limits must be soft < hard < the broker's visibility timeout, found "
                             f"CELERY_TASK_SOFT_TIME_LIMIT_S={soft}, CELERY_TASK_TIME_LIMIT_S={hard}, "
                             f"CELERY_VISIBILITY_TIMEOUT_S={visibility}")


def redis_broker_options(config: dict[str, Any]) -> dict[str, Any]:
    """Returns the broker's transport options on Redis: re-queueing dead workers' messages, and connecting once.

    A message a worker took stays in Redis's unacknowledged set until acknowledged; once older than the
    visibility timeout, a worker's next scan puts it back on its queue. Connecting to send a task is tried
    once, not retried (kombu's default retries hold a request about 6 s when Redis refuses, and each retry
    waits out the socket timeout again when it hangs): a task the broker did not take waits in the outbox.
    A worker reconnects by its own retries (broker_connection_retry, broker_connection_max_retries).

    What a worker does when Redis hangs, and why nothing more is set here: each command gives up at the socket
    timeout (``redis_timeouts``); a BRPOP or pub/sub connection that went half-open is dropped by kombu's own
    checks after brpop_timeout + health_check_interval (kombu 5.7.0's Redis transport, left at its default 25 s;
    celery/kombu#2590); ``socket_keepalive`` does not keep a connection through an L4 proxy (celery/celery#10325);
    and an acknowledgement that timed out is sent again by the worker (workers/acks.py), which redis-py's
    ``retry_on_timeout`` (one immediate retry) would not outlast a 15 s pause.
    """
    return {"visibility_timeout": config["CELERY_VISIBILITY_TIMEOUT_S"],
            "unacked_restore_interval": UNACKED_RESTORE_INTERVAL_S, "unacked_restore_throttle": 1,
            "max_retries": 0}


def celery_settings(config: dict[str, Any]) -> dict[str, Any]:
    """Returns the Celery settings (lowercase names) for a Flask app's configuration."""
    check_time_limits(config)
    broker = config.get("CELERY_BROKER_URL")
    backend = config.get("CELERY_RESULT_BACKEND")
    settings: dict[str, Any] = {
        # A task is acknowledged when it has finished, not when a worker took it: a worker that dies
        # mid-task (OOM, deploy) leaves it on the queue for the next one. Tasks are idempotent for this.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        # With late acknowledgement a worker process should hold one unacknowledged message, not four.
        "worker_prefetch_multiplier": 1,
        "task_soft_time_limit": config["CELERY_TASK_SOFT_TIME_LIMIT_S"],
        "task_time_limit": config["CELERY_TASK_TIME_LIMIT_S"],
        "task_default_queue": config["CELERY_QUEUE"],
        "result_expires": config["CELERY_RESULT_EXPIRES_S"],
        # The API sends tasks with ignore_result (the task table holds results); a failure the task could not
        # record itself (killed at the hard time limit) is still stored, for GET /api/v1/tasks/{id} to find.
        "task_store_errors_even_if_ignored": True,
        "broker_connection_retry_on_startup": True,
        # Celery beat drains the webhook outbox this often: the retries of deliveries that failed (the first
        # attempt is sent right after the commit that wrote it).
        "beat_schedule": {"quotecheck-deliver-webhooks": {"task": tasks_port.DELIVER_WEBHOOKS,
                                                          "schedule": config["WEBHOOK_DRAIN_INTERVAL_S"]}},
    }
    if broker:
        if backend is None and str(broker).startswith(REDIS_SCHEMES):
            backend = broker
        settings.update(broker_url=broker, result_backend=backend, task_always_eager=False)
        settings.update(redis_timeouts(config))
        if str(broker).startswith(REDIS_SCHEMES):
            settings["broker_transport_options"] = {**settings.get("broker_transport_options", {}),
                                                    **redis_broker_options(config)}
        if backend and str(backend).startswith(REDIS_SCHEMES):
            # Celery retries a result backend operation 20 times by default: a request would hang for
            # seconds when Redis is down. The backend is advisory for the API, so give up quickly.
            settings["result_backend_transport_options"] = {"retry_policy": {
                "max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}}
    else:
        # One process: run each task when it is sent, keep its states in this process's memory (for
        # AsyncResult and update_state), and let a task's failure be recorded rather than raised at the caller.
        settings.update(broker_url="memory://", result_backend=backend or "cache+memory://",
                        task_always_eager=True, task_store_eager_result=True, task_eager_propagates=False)
    for name, value in (config.get("CELERY") or {}).items():
        # Option dicts (transport options) are merged one level deep, so adding a key prefix keeps the rest.
        if isinstance(value, dict) and isinstance(settings.get(name), dict):
            value = {**settings[name], **value}
        settings[name] = value
    settings.update(JSON_ONLY)
    return settings


def redis_timeouts(config: dict[str, Any]) -> dict[str, Any]:
    """Returns the Celery settings that bound every wait on Redis, broker and result backend alike.

    Without them a Redis that accepts connections but never answers (paused, or a dead proxy in front of it)
    holds a request for as long as the kernel keeps the socket: publishing a task, clearing or reading its
    state, pinging the workers. With them each such call gives up after about one socket timeout.
    """
    connect_s, socket_s = config["CELERY_CONNECT_TIMEOUT_S"], config["CELERY_SOCKET_TIMEOUT_S"]
    return {
        "broker_connection_timeout": connect_s,
        "broker_transport_options": {"socket_connect_timeout": connect_s, "socket_timeout": socket_s},
        "redis_socket_connect_timeout": connect_s,
        "redis_socket_timeout": socket_s,
    }


def celery_init_app(app: Flask) -> Celery:
    """Returns the Celery app bound to ``app`` (also ``app.extensions["celery"]``), configured from ``app.config``."""

    class FlaskTask(Task):
        # An acknowledgement the broker did not take (Redis hung) is tried again, rather than leaving the worker's
        # prefetch window full and the worker consuming nothing (workers/acks.py).
        Request = RetriedAckRequest

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            with app.app_context():
                return self.run(*args, **kwargs)

    celery_app = Celery(app.name, task_cls=FlaskTask)
    celery_app.config_from_object(celery_settings(app.config))
    celery_app.steps["consumer"].add(AckRetries)
    celery_app.set_default()
    app.extensions[EXTENSION] = celery_app
    return celery_app


class CeleryQueue:
    """The service's task queue (service.tasks.tasks_port.TaskQueue) on a Celery app."""

    def __init__(self, celery_app: Celery) -> None:
        self.celery_app = celery_app
        # Eager (no broker): a sent task runs in the sending process before send returns.
        self.in_background = not celery_app.conf.task_always_eager

    def send(self, name: str, args: list[Any], task_id: str) -> None:
        # ignore_result: the task records its outcome in the task table; the sender need not subscribe to
        # the result backend for a result it never waits for. The request id goes along in a header, for the
        # worker's logs of the task. retry=False: one attempt, bounded by the socket timeouts; a task the broker
        # did not take stays in the outbox for the next dispatcher (service/tasks/task_outbox.py) rather than holding
        # the request.
        rid = logs.request_id()
        self.celery_app.tasks[name].apply_async(args=args, task_id=task_id, ignore_result=True, retry=False,
                                                headers={REQUEST_ID_HEADER: rid} if rid else None)

    def forget(self, task_id: str) -> None:
        self.celery_app.backend.forget(task_id)

    def state(self, task_id: str) -> tuple[str | None, Any]:
        meta = self.celery_app.backend.get_task_meta(task_id)
        return meta.get("status"), meta.get("result")

    def uses_broker(self) -> bool:
        return not self.celery_app.conf.task_always_eager

    def depth(self, timeout_s: float | None = None) -> int | None:
        if not self.uses_broker():
            return None
        queue = self.celery_app.conf.task_default_queue
        # A shorter wait than the broker's own timeouts, for a caller that must answer sooner (/readyz).
        bounded = {} if timeout_s is None else {"connect_timeout": timeout_s, "transport_options": {
            "socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}}
        with self.celery_app.connection_for_read(**bounded) as connection:
            # Declaring counts the messages (Redis: LLEN of the queue's lists, key prefix applied) and declares
            # nothing new: the API sends to this queue anyway. A passive declaration would do, but kombu's
            # Redis transport looks the queue up without the key prefix.
            return connection.default_channel.queue_declare(queue=queue).message_count

    def live_workers(self, timeout_s: float) -> list[str]:
        replies = self.celery_app.control.ping(timeout=timeout_s, limit=1) or []
        return sorted(name for reply in replies for name in reply)


# --- the request id in the logs of a task ------------------------------------------------------------------

REQUEST_ID_HEADER = "quotecheck_request_id"
_running: dict[str, tuple[float, Any]] = {}
task_logger = logging.getLogger("quotecheck.tasks")


def _sent_request_id(task: Task) -> str | None:
    """Returns the request id a task was sent with: a message header (a worker) or the eager call's headers."""
    rid = getattr(task.request, REQUEST_ID_HEADER, None) or (task.request.headers or {}).get(REQUEST_ID_HEADER)
    return rid if isinstance(rid, str) else None


@task_prerun.connect(weak=False)
def _task_started(task_id: str = "", task: Task | None = None, **_: Any) -> None:
    if task is None:
        return
    binding = logs.bound_request_id(_sent_request_id(task))
    binding.__enter__()
    _running[task_id] = (time.perf_counter(), binding)
    task_logger.info("task %s %s started", task.name, task_id, extra={"task": task.name, "task_id": task_id})


@task_postrun.connect(weak=False)
def _task_ended(task_id: str = "", task: Task | None = None, state: str | None = None, **_: Any) -> None:
    started, binding = _running.pop(task_id, (None, None))
    if task is not None:
        duration_ms = round((time.perf_counter() - started) * 1000, 1) if started is not None else None
        task_logger.info("task %s %s ended: %s", task.name, task_id, state,
                         extra={"task": task.name, "task_id": task_id, "state": state, "duration_ms": duration_ms})
    if binding is not None:
        binding.__exit__(None, None, None)


def init_app(app: Flask) -> None:
    """The entry point create_app calls (TASK_QUEUE): wires Celery to ``app`` and registers it as its task queue."""
    tasks_port.register(app, CeleryQueue(celery_init_app(app)))

"""Tasks: the state, progress and outcome of background work the API accepted (202 + Location here).

Issuing and sending tasks is shared by the blueprints that accept work (comparisons, record PDFs); the
task table (service/task_runs.py) is the source of truth, and the Celery result backend adds the live
progress of a running task and the end of one whose worker died before it could record it.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from flask import Blueprint, Response, current_app, url_for
from sqlalchemy.exc import IntegrityError

from service import audit, task_runs
from service.audit import Actor, timestamp
from service.auth import current_actor, require
from service.db import get_db
from service.errors import NotFound, ServiceUnavailable
from service.http import json_response
from service.models import TaskRun
from service.openapi import operation
from service.tasks_port import (
    COMPARE_CONFIGURATIONS,
    COMPARE_QUOTES,
    FIND_REMEDIES,
    RENDER_RECORD_PDF,
    SEARCH_LAYOUTS,
    task_queue,
)
from service.visibility import may_see

bp = Blueprint("tasks", __name__, url_prefix="/api/v1/tasks")

TASK_NAMES = {task_runs.COMPARISON: COMPARE_CONFIGURATIONS, task_runs.QUOTE_COMPARISON: COMPARE_QUOTES,
              task_runs.RECORD_PDF: RENDER_RECORD_PDF, task_runs.SEARCH: SEARCH_LAYOUTS,
              task_runs.REMEDIES: FIND_REMEDIES}


def key_for(actor: Actor, key: str) -> tuple[str, bool]:
    """Returns the key the work ``key`` is issued under for ``actor``, and whether the work is private to them.

    A vendor's work (a token of scope ``own``) is theirs alone: bound to their user, it is neither shared
    with nor found by another user asking for the same work.
    """
    if actor.scope != "own":
        return key, False
    return "sha256:" + hashlib.sha256(f"{key}\nuser:{actor.user_id}".encode()).hexdigest(), True


def issue(actor: Actor, kind: str, key: str, total: int, now: datetime, event: dict[str, Any] | None = None,
          submission_id: str | None = None, private: bool = False) -> tuple[TaskRun, bool]:
    """Returns the task for the work ``key`` and whether it must be sent now (see task_runs.issue).

    ``event``: the audit event to append with it (``action``, ``detail`` and other audit.append
    arguments); ``detail`` gains ``task_id`` and ``sent``. ``submission_id``: the submission the work is
    about; ``private``: the work is the actor's own (its key must then name the actor's user). Either lets
    a token of scope ``own`` read the task.
    """
    db = get_db()
    for attempt in (1, 2):
        try:
            with db.session() as session:
                row, send = task_runs.issue(session, kind, key, total, actor.name, now, submission_id=submission_id,
                                            user_id=actor.user_id if private else None)
                if event is not None:
                    fields = {k: v for k, v in event.items() if k != "detail"}
                    audit.append(session, actor=actor, occurred_at=now,
                                 detail={**event.get("detail", {}), "task_id": row.id, "sent": send}, **fields)
                session.commit()
                return row, send
        except IntegrityError:
            # A concurrent request issued the same work first; the second attempt finds its task.
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def send(row: TaskRun, args: list[Any]) -> None:
    """Sends the task of ``row`` to the queue (or runs it now, with no broker); 503 when the queue is unreachable."""
    try:
        queue = task_queue()
    except ServiceUnavailable as problem:
        task_runs.fail(row.id, problem)
        raise
    try:
        # A task sent again under its id (after a failure) must not show the last run's end meanwhile.
        queue.forget(row.id)
    except Exception as error:  # the result store is only advisory here; sending decides
        current_app.logger.warning("could not clear the result backend's state of task %s: %s", row.id, error)
    try:
        queue.send(TASK_NAMES[row.kind], args, row.id)
    except Exception as error:  # kombu.exceptions.OperationalError, redis.ConnectionError, …
        current_app.logger.error("could not send task %s (%s): %s", row.id, row.kind, error)
        # The broker's address stays in the log: the caller learns what to do, not where Redis runs.
        problem = ServiceUnavailable("the task queue (CELERY_BROKER_URL) is not reachable or did not answer in "
                                     "time; nothing was queued: send the request again later")
        task_runs.fail(row.id, problem)
        raise problem from None


def _live(task_id: str) -> tuple[str, Any] | None:
    """Returns the result backend's (state, meta) of a task, or None when the backend cannot say."""
    try:
        return task_queue().state(task_id)
    except Exception as error:
        current_app.logger.warning("the result backend could not report task %s: %s", task_id, error)
        return None


def view_of(row: TaskRun) -> dict[str, Any]:
    """Returns the representation of a task: state, progress, and its result or error once it ended."""
    state, current, total = row.state, row.progress_current, row.progress_total
    result, error = row.result, row.error
    if state not in task_runs.FINISHED:
        live = _live(row.id)
        if live is not None:
            status, meta = live
            if status == "PROGRESS" and isinstance(meta, dict):
                state = task_runs.PROGRESS
                current = max(current, int(meta.get("current", 0)))
                total = int(meta.get("total", total)) or total
            elif status == "SUCCESS" and isinstance(meta, dict):
                state, current, result = task_runs.SUCCESS, total, meta
            elif status == "FAILURE":
                # Ended where the task could not record it: killed at the hard time limit, or its database
                # write failed.
                state = task_runs.FAILURE
                error = {"type": current_app.config["PROBLEM_TYPE_BASE"] + "task-failed", "title": "Task failed",
                         "status": 500, "detail": f"{type(meta).__name__}: {meta}"}
    link = url_for("tasks.get_task", task_id=row.id)
    view: dict[str, Any] = {"id": row.id, "kind": row.kind, "state": state,
                            "progress": {"current": current, "total": total},
                            "created_at": timestamp(row.created_at), "updated_at": timestamp(row.updated_at),
                            "links": {"self": link}}
    if state == task_runs.SUCCESS:
        view["result"] = result
        if isinstance(result, dict) and isinstance(result.get("href"), str):
            view["links"]["result"] = result["href"]
    elif state == task_runs.FAILURE:
        view["error"] = {**(error or {}), "instance": link}
    return view


def load_view(task_id: str, actor: Actor | None = None) -> dict[str, Any]:
    """Returns the representation of task ``task_id``; NotFound when no such task was issued.

    With ``actor`` of scope ``own``, a task that is neither about one of their submissions nor their own
    work is NotFound too.
    """
    with get_db().session() as session:
        row = task_runs.find(session, task_id)
        if row is not None and actor is not None and actor.scope == "own":
            mine = row.user_id == actor.user_id if row.submission_id is None else \
                may_see(session, actor, row.submission_id)
            row = row if mine else None
    if row is None:
        raise NotFound(f"there is no task {task_id!r}: task ids come from the Location of a 202 response")
    return view_of(row)


def accepted(task_id: str, **headers: str) -> Response:
    """Returns 202 Accepted with the task's representation and its Location."""
    view = load_view(task_id)
    return json_response(view, 202, {"Location": view["links"]["self"], **headers})


@bp.get("/<task_id>")
@operation(tag="tasks", errors=(404,), responses={200: ("The task", "Task")})
@require("read")
def get_task(task_id: str) -> Response:
    """Read a background task: its state, progress, and its result or error once it ended.

    `state` is PENDING (queued), PROGRESS (running: `progress.current` of `progress.total` steps done),
    SUCCESS (`result`) or FAILURE (`error`, a problem object). Poll until SUCCESS or FAILURE; a task id
    never issued by this service is 404.
    """
    return json_response(load_view(task_id, current_actor()))

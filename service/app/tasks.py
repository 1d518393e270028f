"""Background work: issuing a task for work the service accepted, sending it, and reading its state.

Shared by every operation that accepts work (comparisons, searches, remedies, record PDFs), whether the API, a
reviewer page or the command line asked for it. The task table (service/tasks/task_runs.py) is the source of
truth, and the Celery result backend adds the live progress of a running task and the end of one whose worker
died before it could record it, which is then written to the row (``reconcile``). A task is written with the
request's audit event and sent after the commit (service/tasks/task_outbox.py): a broker that cannot take it
leaves it PENDING in the outbox.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from flask import current_app, url_for
from sqlalchemy.exc import IntegrityError

from service.accounts.actors import Actor
from service.accounts.visibility import may_see
from service.errors import NotFound, ServiceUnavailable
from service.persistence import audit
from service.persistence.audit import timestamp
from service.persistence.db import get_db
from service.persistence.models import TaskRun
from service.tasks import task_outbox, task_runs
from service.tasks.tasks_port import task_queue


def key_for(actor: Actor, key: str) -> tuple[str, bool]:
    """Returns the key the work ``key`` is issued under for ``actor``, and whether the work is private to them.

    A vendor's work (a token of scope ``own``) is theirs alone: bound to their user, it is neither shared
    with nor found by another user asking for the same work.
    """
    if actor.scope != "own":
        return key, False
    return bound_key(key, actor.user_id), True


def bound_key(key: str, user_id: int | None) -> str:
    """Returns the key the work ``key`` is issued under when it is private to user ``user_id`` (see key_for)."""
    return "sha256:" + hashlib.sha256(f"{key}\nuser:{user_id}".encode()).hexdigest()


def issue(actor: Actor, kind: str, key: str, total: int, now: datetime, args: list[Any],
          event: dict[str, Any] | None = None, submission_id: str | None = None,
          private: bool = False) -> tuple[TaskRun, bool]:
    """Returns the task for the work ``key`` and whether it must be sent now (see task_runs.issue).

    ``args``: the task's message (JSON), kept in the outbox until it is sent and the task ends. ``event``:
    the audit event to append with it (``action``, ``detail`` and other audit.append arguments);
    ``detail`` gains ``task_id`` and ``sent`` (whether this request queued the work). ``submission_id``:
    the submission the work is about; ``private``: the work is the actor's own (its key must then name the
    actor's user). Either lets a token of scope ``own`` read the task. TooManyTasks (429) when the work would
    queue a task and the actor's user has MAX_ACTIVE_TASKS_PER_USER queued or running (task_runs.Quota).
    A task that has not ended is first brought in line with the result backend (``reconcile``), so that one
    that failed where it could not record it runs again.
    """
    db = get_db()
    with db.session() as session:
        existing = task_runs.find_by_key(session, kind, key)
    if existing is not None and existing.state not in task_runs.FINISHED:
        reconcile(existing)
    stale_s = task_runs.stale_after_s(current_app.config)
    for attempt in (1, 2):
        try:
            with db.session() as session:
                row, send = task_runs.issue(session, kind, key, total, actor.name, now, args, stale_s,
                                            submission_id=submission_id, user_id=actor.user_id if private else None,
                                            quota=task_runs.quota_of(current_app.config, actor.user_id))
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


def send(row: TaskRun) -> None:
    """Hands the task of ``row`` (issued and committed) to the queue, or runs it now with no broker.

    A broker that cannot take it leaves it in the outbox (PENDING, sent when the broker is back: see
    service/tasks/task_outbox.py); the request is answered 202 all the same. ServiceUnavailable (503), with the
    task recorded as failed, only when this service runs no background tasks at all (TASK_QUEUE is None).
    """
    try:
        task_queue()
    except ServiceUnavailable as problem:
        task_runs.fail(row.id, problem)
        raise
    task_outbox.send(row.id)


def dispatch_pending() -> task_outbox.DispatchReport:
    """Sends every task accepted but not yet handed to the broker, oldest first, until the broker refuses one
    (service/tasks/task_outbox.py); the command line and every worker's dispatcher run it."""
    return task_outbox.dispatch_pending()


def _live(task_id: str) -> tuple[str, Any] | None:
    """Returns the result backend's (state, meta) of a task, or None when the backend cannot say."""
    try:
        return task_queue().state(task_id)
    except Exception as error:
        current_app.logger.warning("the result backend could not report task %s: %s", task_id, error)
        return None


def reconcile(row: TaskRun) -> tuple[TaskRun, tuple[int, int] | None]:
    """Returns ``row`` as it is once an end the result backend knows of was written to it, and the live progress.

    Only a sent task that has not ended asks the backend: for its live progress (``(current, total)``, shown
    but not written), or its end where the task could not record it (killed at the hard time limit, or its
    database write failed), which is written so that the row and the backend agree and asking again runs
    a failed task again.
    """
    if row.state in task_runs.FINISHED or not row.sent:
        return row, None
    live = _live(row.id)
    if live is None:
        return row, None
    status, meta = live
    if status == "PROGRESS" and isinstance(meta, dict):
        total = int(meta.get("total", row.progress_total)) or row.progress_total
        return row, (max(row.progress_current, int(meta.get("current", 0))), total)
    if status == "SUCCESS" and isinstance(meta, dict):
        ended = {"state": task_runs.SUCCESS, "result": meta, "progress_current": row.progress_total}
    elif status == "FAILURE":
        ended = {"state": task_runs.FAILURE, "error": {
            "type": current_app.config["PROBLEM_TYPE_BASE"] + "task-failed", "title": "Task failed", "status": 500,
            "detail": f"the task ended with {type(meta).__name__} where it could not record its outcome (stopped "
                      "at the hard time limit, or the database was unreachable); ask again to run it again"}}
    else:
        return row, None
    task_runs.record_end(row.id, ended["state"], result=ended.get("result"), error=ended.get("error"))
    with get_db().session() as session:
        return task_runs.find(session, row.id) or row, None


def view_of(row: TaskRun) -> dict[str, Any]:
    """Returns the representation of a task: state, progress, and its result or error once it ended."""
    row, live = reconcile(row)
    state, current, total, result, error = row.state, row.progress_current, row.progress_total, row.result, row.error
    if live is not None and state not in task_runs.FINISHED:
        state, (current, total) = task_runs.PROGRESS, live
    link = url_for("tasks.get_task", task_id=row.id)
    view: dict[str, Any] = {"id": row.id, "kind": row.kind, "state": state,
                            "progress": {"current": current, "total": total},
                            "created_at": timestamp(row.created_at), "updated_at": timestamp(row.updated_at),
                            "links": {"self": link}}
    if state == task_runs.SUCCESS:
        view["result"] = result
        if isinstance(result, dict) and isinstance(result.get("href"), str):
            view["links"]["result"] = result["href"]
        if row.kind == task_runs.QUOTE_COMPARISON and isinstance(result, dict) and "passing" in result:
            view["links"]["csv"] = url_for("tasks.get_task", task_id=row.id, format="csv")
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

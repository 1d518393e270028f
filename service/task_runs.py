"""The task table: which background tasks were issued, their state, progress and outcome.

The API inserts a row before it sends a task, and the task (in a worker, or in-process when no broker is
configured) moves it along: PENDING → PROGRESS → SUCCESS | FAILURE. The database is shared by every API
process and worker, so any of them answers ``GET /api/v1/tasks/{id}``, after restarts too; the Celery
result backend only adds the live state of a task whose worker died before it could write here.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from flask import current_app
from sqlalchemy import case, update
from sqlmodel import Session, col, select

from rules.errors import QuotecheckError
from service.config import clock_of
from service.db import get_db
from service.errors import dependency_failure, status_of
from service.models import TaskRun

PENDING, PROGRESS, SUCCESS, FAILURE = "PENDING", "PROGRESS", "SUCCESS", "FAILURE"
STATES = (PENDING, PROGRESS, SUCCESS, FAILURE)
FINISHED = (SUCCESS, FAILURE)

COMPARISON = "comparison"  # quotecheck.compare_configurations
QUOTE_COMPARISON = "quote-comparison"  # quotecheck.compare_quotes
RECORD_PDF = "record-pdf"  # quotecheck.render_record_pdf
SEARCH = "search"  # quotecheck.search_layouts
REMEDIES = "remedies"  # quotecheck.find_remedies


def find(session: Session, task_id: str) -> TaskRun | None:
    """Returns the task ``task_id``, or None when no such task was issued."""
    return session.get(TaskRun, task_id, populate_existing=True)


def find_by_key(session: Session, kind: str, key: str) -> TaskRun | None:
    """Returns the task that does the work ``key`` identifies, if one was issued."""
    return session.exec(select(TaskRun).where(TaskRun.kind == kind, TaskRun.key == key)
                        .execution_options(populate_existing=True)).first()


def issue(session: Session, kind: str, key: str, total: int, requested_by: str | None, now: datetime,
          submission_id: str | None = None, user_id: int | None = None) -> tuple[TaskRun, bool]:
    """Returns the task for the work ``key`` and whether the caller must send it now. The caller commits.

    The same work asked for again gets the task issued first (queued, running or done), which is not sent
    again; a failed one is reset to PENDING under its id and sent again. Raises IntegrityError at flush
    when a concurrent request issued the same work first (read it again with ``find_by_key``).
    ``submission_id`` and ``user_id`` say who may read the task with a token of scope ``own`` (models.TaskRun).
    """
    existing = find_by_key(session, kind, key)
    if existing is not None:
        if existing.state != FAILURE:
            return existing, False
        # Only one of two requests retrying the same failed task wins the reset, and only it sends it.
        reset = session.execute(update(TaskRun).where(col(TaskRun.id) == existing.id, col(TaskRun.state) == FAILURE)
                                .values(state=PENDING, progress_current=0, progress_total=total, result=None,
                                        error=None, requested_by=requested_by, updated_at=now)
                                .execution_options(synchronize_session=False))
        return find(session, existing.id) or existing, reset.rowcount == 1
    row = TaskRun(id=str(uuid.uuid4()), kind=kind, key=key, state=PENDING, progress_current=0,
                  progress_total=total, requested_by=requested_by, created_at=now, updated_at=now,
                  submission_id=submission_id, user_id=user_id)
    session.add(row)
    session.flush()
    return row, True


# --- written by the tasks (inside the Flask app context of the process that runs them) -------------------

def _now() -> datetime:
    return clock_of(current_app.config)()


def _update(task_id: str, **values: Any) -> None:
    with get_db().session() as session:
        session.execute(update(TaskRun).where(col(TaskRun.id) == task_id)
                        .values(updated_at=_now(), **values).execution_options(synchronize_session=False))
        session.commit()


def begin(task_id: str, kind: str, key: str, total: int) -> TaskRun:
    """Returns the task's row, marked running; created when the task was sent without the API (no row yet).

    A row already SUCCESS is returned unchanged: the task was delivered again (late acknowledgement after a
    lost worker) or sent twice, and its stored result stands.
    """
    with get_db().session() as session:
        row = find(session, task_id)
        if row is None:
            moment = _now()
            row = TaskRun(id=task_id, kind=kind, key=key, state=PROGRESS, progress_current=0, progress_total=total,
                          created_at=moment, updated_at=moment)
            session.add(row)
            session.commit()
            return row
        if row.state == SUCCESS:
            return row
    _update(task_id, state=PROGRESS, progress_current=0, progress_total=total, error=None)
    with get_db().session() as session:
        return find(session, task_id) or row


def progress(task_id: str, current: int, total: int) -> None:
    """Records that ``current`` of ``total`` steps are done."""
    _update(task_id, state=PROGRESS, progress_current=current, progress_total=total)


def advance(task_id: str) -> int:
    """Records one more step done of a running task and returns the steps done now (never beyond the total).

    For a task whose steps run side by side in several workers (the chunks of a search): the increment is
    one UPDATE, so two steps ending at once both count. A task that ended (a step failed, or it was merged)
    is left as it is. A step delivered twice counts twice, which the cap at the total keeps within bounds.
    """
    current = col(TaskRun.progress_current)
    with get_db().session() as session:
        session.execute(update(TaskRun).where(col(TaskRun.id) == task_id, col(TaskRun.state).not_in(FINISHED))
                        .values(state=PROGRESS, updated_at=_now(),
                                progress_current=case((current < col(TaskRun.progress_total), current + 1),
                                                      else_=current))
                        .execution_options(synchronize_session=False))
        # Read before committing: the UPDATE holds the row (PostgreSQL) or the database (SQLite) until then, so
        # this is the count this step made, not one a step ending meanwhile made.
        row = find(session, task_id)
        done = row.progress_current if row is not None else 0
        session.commit()
        return done


def succeed(task_id: str, result: dict[str, Any]) -> None:
    """Records the task's result (JSON)."""
    with get_db().session() as session:
        row = find(session, task_id)
        total = row.progress_total if row is not None else 0
    _update(task_id, state=SUCCESS, progress_current=total, result=result, error=None)


def fail(task_id: str, error: BaseException) -> None:
    """Records the task's failure as a problem (RFC 9457 members, without ``instance``)."""
    _update(task_id, state=FAILURE, error=problem_of(error))


def problem_of(error: BaseException) -> dict[str, Any]:
    """Returns the problem+json members that describe a task's failure."""
    base = current_app.config["PROBLEM_TYPE_BASE"]
    # A database or Redis failure is told without its address (host, port), which only the log keeps.
    error = dependency_failure(error) or error
    if isinstance(error, QuotecheckError):
        problem: dict[str, Any] = {"type": base + error.type_slug, "title": error.title,
                                   "status": status_of(error), "detail": error.detail}
        if error.problems:
            problem["errors"] = [p.as_dict() for p in error.problems]
        return problem
    if isinstance(error, SoftTimeLimitExceeded):
        limit = current_app.config["CELERY_TASK_SOFT_TIME_LIMIT_S"]
        return {"type": base + "task-time-limit", "title": "Task time limit", "status": 500,
                "detail": f"the task ran past its time limit of {limit} s (CELERY_TASK_SOFT_TIME_LIMIT_S)"}
    return {"type": base + "task-failed", "title": "Task failed", "status": 500,
            "detail": f"{type(error).__name__}: {error}"}

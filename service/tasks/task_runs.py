"""The task table: which background tasks were issued, their state, progress and outcome.

The API inserts a row (with the task's message, unsent: the outbox, service/tasks/task_outbox.py) in the request's
transaction, and the task (in a worker, or in-process when no broker is configured) moves it along:
PENDING → PROGRESS → SUCCESS | FAILURE. The database is shared by every API process and worker, so any of
them answers ``GET /api/v1/tasks/{id}``, after restarts too; the Celery result backend only adds the live
state of a task whose worker died before it could write here.

A run begins by claiming the row (``claim``, a lease of service/persistence/leases.py): one run at a time holds
a row in PROGRESS. A row in PROGRESS not written to (``updated_at``: its start and every step) for longer than
the hard time limit is stale: the worker holding it died, since a live run is stopped at that limit. A stale
row may be claimed again, and the same work asked for again re-runs it, as it re-runs a failed one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from flask import current_app
from sqlalchemy import and_, case, func, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from rules.errors import QuotecheckError
from service.config import clock_of
from service.errors import TooManyTasks, dependency_failure, status_of
from service.persistence import leases
from service.persistence.db import get_db
from service.persistence.models import TaskRun, User

PENDING, PROGRESS, SUCCESS, FAILURE = "PENDING", "PROGRESS", "SUCCESS", "FAILURE"
STATES = (PENDING, PROGRESS, SUCCESS, FAILURE)
FINISHED = (SUCCESS, FAILURE)

COMPARISON = "comparison"  # quotecheck.compare_configurations
QUOTE_COMPARISON = "quote-comparison"  # quotecheck.compare_quotes
RECORD_PDF = "record-pdf"  # quotecheck.render_record_pdf
SEARCH = "search"  # quotecheck.search_layouts
REMEDIES = "remedies"  # quotecheck.find_remedies

# What a run that claims its row (``claim``) is to do.
RUN = "run"  # the row is this run's: do the work
DONE = "done"  # the row holds a result already: return it
BUSY = "busy"  # another run holds the row and may still be alive: look again later
ENDED = "ended"  # the row failed: only a new request runs it again (it resets the row and sends it anew)


@dataclass(frozen=True)
class Claim:
    """The outcome of claiming a task's row: what to do, the row as it is now, and (BUSY) how long to wait."""

    outcome: str
    row: TaskRun
    wait_s: float = 0.0


@dataclass(frozen=True)
class Quota:
    """Fair shares: user ``user_id`` may have at most ``limit`` tasks queued or running (MAX_ACTIVE_TASKS_PER_USER);
    a request for more is refused with Retry-After ``retry_after_s`` (TASK_LIMIT_RETRY_AFTER_S)."""

    user_id: int
    limit: int
    retry_after_s: int


def quota_of(config: Any, user_id: int | None) -> Quota | None:
    """Returns the quota of user ``user_id`` under ``config``; None for work no user asked for (the command line)."""
    if user_id is None:
        return None
    return Quota(user_id, int(config["MAX_ACTIVE_TASKS_PER_USER"]), int(config["TASK_LIMIT_RETRY_AFTER_S"]))


def active_count(session: Session, user_id: int, now: datetime, stale_s: float) -> int:
    """Returns how many tasks user ``user_id`` queued that are still to run or running: PENDING (sent or in the
    outbox), or PROGRESS and not stale (a stale one's worker died: ``is_stale``). Ended tasks do not count."""
    active = or_(col(TaskRun.state) == PENDING,
                 and_(col(TaskRun.state) == PROGRESS, ~leases.stale(col(TaskRun.updated_at), now, stale_s)))
    return int(session.execute(select(func.count()).select_from(TaskRun)
                               .where(col(TaskRun.requester_id) == user_id, active)).scalar_one())


def _check_quota(session: Session, quota: Quota | None, now: datetime, stale_s: float) -> None:
    """Raises TooManyTasks when the user of ``quota`` may not queue one more task now.

    The user's row is locked first (PostgreSQL: SELECT … FOR UPDATE, held to the caller's commit), so that two of
    their requests at once are counted one after the other; SQLite runs one writing transaction at a time anyway.
    """
    if quota is None:
        return
    session.execute(select(col(User.id)).where(col(User.id) == quota.user_id).with_for_update())
    active = active_count(session, quota.user_id, now, stale_s)
    if active >= quota.limit:
        raise TooManyTasks(f"you have {active} background tasks queued or running, and one user may have at most "
                           f"{quota.limit} (MAX_ACTIVE_TASKS_PER_USER): ask again once one of them has ended "
                           f"(GET /api/v1/tasks/{{id}} says when), after {quota.retry_after_s} s at the earliest",
                           retry_after_s=quota.retry_after_s)


def oldest_waiting(session: Session) -> datetime | None:
    """Returns since when the task waiting longest to be started has waited (the ``updated_at`` of the oldest
    PENDING row: when it was issued, or reset to run again), or None when no task waits."""
    return session.execute(select(func.min(col(TaskRun.updated_at))).where(col(TaskRun.state) == PENDING)).scalar_one()


def runs_written_since(session: Session, since: datetime) -> bool:
    """Returns whether a run began, made a step or ended after ``since`` (a row not PENDING written since then):
    whether some worker consumed the queue in that time."""
    written = select(TaskRun.id).where(col(TaskRun.state).in_((PROGRESS, SUCCESS, FAILURE)),
                                       col(TaskRun.updated_at) > since).limit(1)
    return session.execute(written).first() is not None


def stale_after_s(config: Any) -> float:
    """Returns how long a row in PROGRESS may go unwritten before it is stale: the tasks' hard time limit."""
    return float(config["CELERY_TASK_TIME_LIMIT_S"])


def is_stale(row: TaskRun, now: datetime, stale_s: float) -> bool:
    """Returns whether ``row`` is a run in PROGRESS that nothing wrote to for longer than ``stale_s``."""
    return row.state == PROGRESS and leases.is_stale(row.updated_at, now, stale_s)


def find(session: Session, task_id: str) -> TaskRun | None:
    """Returns the task ``task_id``, or None when no such task was issued."""
    return session.get(TaskRun, task_id, populate_existing=True)


def find_by_key(session: Session, kind: str, key: str) -> TaskRun | None:
    """Returns the task that does the work ``key`` identifies, if one was issued."""
    return session.exec(select(TaskRun).where(TaskRun.kind == kind, TaskRun.key == key)
                        .execution_options(populate_existing=True)).first()


def issue(session: Session, kind: str, key: str, total: int, requested_by: str | None, now: datetime,
          args: list[Any] | None = None, stale_s: float | None = None, submission_id: str | None = None,
          user_id: int | None = None, quota: Quota | None = None) -> tuple[TaskRun, bool]:
    """Returns the task for the work ``key`` and whether the caller must send it now. The caller commits.

    The row is written unsent with its message ``args`` (the outbox): the caller sends it after the commit
    (service/tasks/task_outbox.py), and so does any dispatcher should that fail. The same work asked for again
    gets the task issued first (queued, running or done), which is not sent again unless it is still in
    the outbox (then the caller tries to send it too; one sender at a time wins); a failed or stale one
    (``is_stale`` after ``stale_s``, by default the app's ``stale_after_s``) is reset to PENDING under its
    id, to be sent again. Raises
    IntegrityError at flush when a concurrent request issued the same work first (read it again with
    ``find_by_key``). ``submission_id`` and ``user_id`` say who may read the task with a token of scope
    ``own`` (models.TaskRun). ``quota``: the requesting user's (``quota_of``); work that queues a task (a new one,
    or one reset) raises TooManyTasks when they have ``quota.limit`` queued or running already, and the task
    counts as theirs (``requester_id``); work that finds its task queued, running or done is never refused.
    """
    stale_s = stale_after_s(current_app.config) if stale_s is None else stale_s
    requester_id = quota.user_id if quota is not None else None
    existing = find_by_key(session, kind, key)
    if existing is not None:
        if existing.state == PENDING and not existing.sent:
            return existing, True  # still in the outbox (the broker was unreachable): this request sends it too
        if existing.state != FAILURE and not is_stale(existing, now, stale_s):
            return existing, False
        _check_quota(session, quota, now, stale_s)
        # Only one of two requests retrying the same task wins the reset, and only it sends it.
        retry = or_(col(TaskRun.state) == FAILURE,
                    and_(col(TaskRun.state) == PROGRESS, leases.stale(col(TaskRun.updated_at), now, stale_s)))
        reset = leases.take(session, TaskRun, col(TaskRun.id) == existing.id, retry,
                            state=PENDING, progress_current=0, progress_total=total, result=None, error=None,
                            requested_by=requested_by, requester_id=requester_id, updated_at=now, args=args,
                            sent=False, send_lease_until=None, claimed_by=None)
        return find(session, existing.id) or existing, reset
    _check_quota(session, quota, now, stale_s)
    row = TaskRun(id=str(uuid.uuid4()), kind=kind, key=key, state=PENDING, progress_current=0,
                  progress_total=total, requested_by=requested_by, created_at=now, updated_at=now,
                  submission_id=submission_id, user_id=user_id, requester_id=requester_id, args=args, sent=False)
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


def claim(task_id: str, kind: str, key: str, total: int, delivery_tag: str | None) -> Claim:
    """Returns what the run of task ``task_id`` delivered as message ``delivery_tag`` is to do (RUN, DONE, BUSY, ENDED).

    RUN: the row is now this run's, in PROGRESS at 0 of ``total`` with one more attempt counted; a row is
    taken when it is PENDING, stale, or held by the same message (redelivered after its worker died: its
    first run is over). A task sent without the API gets its row here. DONE: the row holds a result
    (delivered again, or sent twice). BUSY: another run holds the row, which becomes stale after
    ``wait_s``. ENDED: the row failed; a message for it is a leftover.
    """
    now = _now()
    stale_s = stale_after_s(current_app.config)
    taken_over = leases.stale(col(TaskRun.updated_at), now, stale_s)
    if delivery_tag is not None:  # (compared with None, SQL would match every row no message holds)
        taken_over = or_(taken_over, col(TaskRun.claimed_by) == delivery_tag)
    claimable = or_(col(TaskRun.state) == PENDING, and_(col(TaskRun.state) == PROGRESS, taken_over))
    with get_db().session() as session:
        if find(session, task_id) is None:
            session.add(TaskRun(id=task_id, kind=kind, key=key, state=PROGRESS, progress_current=0,
                                progress_total=total, created_at=now, updated_at=now, attempts=1,
                                claimed_by=delivery_tag))
            try:
                session.commit()
                return Claim(RUN, find(session, task_id))  # type: ignore[arg-type]
            except IntegrityError:  # created meanwhile by a run of the same task: claim it as any other
                session.rollback()
        claimed = leases.take(session, TaskRun, col(TaskRun.id) == task_id, claimable,
                              state=PROGRESS, progress_current=0, progress_total=total, error=None,
                              attempts=col(TaskRun.attempts) + 1, claimed_by=delivery_tag, sent=True,
                              send_lease_until=None, updated_at=now)
        session.commit()
        row = find(session, task_id)
    assert row is not None
    if claimed:
        return Claim(RUN, row)
    if row.state == SUCCESS:
        return Claim(DONE, row)
    if row.state == FAILURE:
        return Claim(ENDED, row)
    held_s = (now - row.updated_at).total_seconds()
    return Claim(BUSY, row, wait_s=max(1.0, stale_s - held_s + 1.0))


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
    _update(task_id, state=SUCCESS, progress_current=total, result=result, error=None, args=None)


def fail(task_id: str, error: BaseException) -> None:
    """Records the task's failure as a problem (RFC 9457 members, without ``instance``)."""
    _update(task_id, state=FAILURE, error=problem_of(error), args=None)


def record_end(task_id: str, state: str, result: dict[str, Any] | None = None,
               error: dict[str, Any] | None = None) -> bool:
    """Returns whether the end the result backend knows of (``state`` SUCCESS or FAILURE) was written to the row.

    Only a sent row that has not ended takes it: the task ended where it could not write here (killed at
    the hard time limit, or the database was unreachable when it ended), so that the row and the backend
    agree and the same work asked for again runs again after a failure.
    """
    with get_db().session() as session:
        written = session.execute(update(TaskRun)
                                  .where(col(TaskRun.id) == task_id, col(TaskRun.state).not_in(FINISHED),
                                         col(TaskRun.sent).is_(True))
                                  .values(state=state, result=result, error=error, args=None, updated_at=_now(),
                                          progress_current=col(TaskRun.progress_total if state == SUCCESS
                                                               else TaskRun.progress_current))
                                  .execution_options(synchronize_session=False))
        session.commit()
        return written.rowcount == 1


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

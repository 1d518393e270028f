"""The task outbox: tasks the API accepted are sent to the broker after the request's commit, or later.

A request that accepts work writes the task's row in its own transaction, with the message to send
(``task_run.args``) and ``sent`` false (service/tasks/task_runs.py ``issue``). After the commit the API sends it
(``send``). When the broker cannot take it (Redis down or hung, within the socket timeouts of
workers/celery_app.py) the row stays unsent and the request is still answered 202: the task is PENDING
and is queued when the broker is back, by whichever dispatcher (``dispatch_pending``) gets there first:
every worker at start and every TASK_DISPATCH_INTERVAL_S (workers/dispatcher.py), and
``quotecheck tasks dispatch``. Nothing is lost with Redis, and nothing is run twice: a message sent twice
(a publish that timed out yet reached Redis) runs once, since each run first claims its row
(``task_runs.claim``).

One sender at a time: a sender takes a lease on the row (``send_lease_until``, service/persistence/leases.py) before it
publishes, so two dispatchers do not both send it; a sender that died holding one is replaced once it ran
out.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

from flask import current_app
from sqlalchemy import update
from sqlmodel import col, select

from service.config import clock_of
from service.persistence import leases
from service.persistence.db import get_db
from service.persistence.models import TaskRun
from service.tasks import task_runs
from service.tasks.tasks_port import (
    COMPARE_CONFIGURATIONS,
    COMPARE_QUOTES,
    FIND_REMEDIES,
    RENDER_RECORD_PDF,
    SEARCH_LAYOUTS,
    task_queue,
)

logger = logging.getLogger(__name__)

TASK_NAMES = {task_runs.COMPARISON: COMPARE_CONFIGURATIONS, task_runs.QUOTE_COMPARISON: COMPARE_QUOTES,
              task_runs.RECORD_PDF: RENDER_RECORD_PDF, task_runs.SEARCH: SEARCH_LAYOUTS,
              task_runs.REMEDIES: FIND_REMEDIES}
# How long a sender holds a row: longer than clearing the result backend's state and publishing can take
# within the broker's socket timeouts (workers/celery_app.py), so that no second sender starts meanwhile.
SEND_LEASE_S = 60
# How many unsent rows one pass of a dispatcher reads at a time.
DISPATCH_BATCH = 100


@dataclass
class DispatchReport:
    """What a pass of the dispatcher did: rows sent, rows the broker refused (the pass stops at the first)."""

    sent: int = 0
    failed: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def send(task_id: str) -> bool:
    """Returns whether task ``task_id`` was handed to the task queue now (False: not unsent, or the broker refused).

    Run in-process when no broker is configured. A task that ran before (a failed or stale one issued
    again) has its last run's state cleared from the result backend first, so it does not show meanwhile;
    if that cannot be done, nothing is sent. ServiceUnavailable when the app has no task queue.
    """
    queue = task_queue()
    now = clock_of(current_app.config)()
    with get_db().session() as session:
        leased = leases.take(session, TaskRun, col(TaskRun.id) == task_id, col(TaskRun.sent).is_(False),
                             col(TaskRun.state) == task_runs.PENDING,
                             leases.lapsed(col(TaskRun.send_lease_until), now, null_is_free=True),
                             send_lease_until=leases.until(now, SEND_LEASE_S))
        session.commit()
        row = task_runs.find(session, task_id) if leased else None
    if row is None:
        return False
    try:
        if row.attempts:
            queue.forget(row.id)
        queue.send(TASK_NAMES[row.kind], list(row.args or []), row.id)
    except Exception as error:  # kombu.exceptions.OperationalError, redis.TimeoutError, …: left for a dispatcher
        logger.warning("task %s (%s) stays in the outbox: the broker did not take it: %s", row.id, row.kind, error)
        _set(task_id, send_lease_until=None)
        return False
    _set(task_id, sent=True, send_lease_until=None)
    return True


def _set(task_id: str, **values: object) -> None:
    with get_db().session() as session:
        session.execute(update(TaskRun).where(col(TaskRun.id) == task_id, col(TaskRun.sent).is_(False))
                        .values(**values).execution_options(synchronize_session=False))
        session.commit()


def unsent(limit: int = DISPATCH_BATCH) -> list[str]:
    """Returns the ids of the oldest ``limit`` tasks accepted but not yet taken by the broker."""
    with get_db().session() as session:
        return list(session.exec(select(TaskRun.id).where(col(TaskRun.sent).is_(False),
                                                          col(TaskRun.state) == task_runs.PENDING)
                                 .order_by(col(TaskRun.created_at)).limit(limit)))


def dispatch_pending(limit: int | None = None) -> DispatchReport:
    """Returns what sending every unsent task (at most ``limit``) did; stops at the first the broker refuses.

    One refusal says the broker is unreachable: the rest would each wait out the same socket timeout.
    """
    report = DispatchReport()
    while limit is None or report.sent < limit:
        batch = unsent(DISPATCH_BATCH if limit is None else min(DISPATCH_BATCH, limit - report.sent))
        if not batch:
            break
        before = report.sent
        for task_id in batch:
            if send(task_id):
                report.sent += 1
            elif outbox_holds(task_id):  # still unsent: the broker refused it (not: sent meanwhile by another)
                report.failed += 1
                return report
        if report.sent == before:  # every row of the batch was taken by another sender
            break
    return report


def outbox_holds(task_id: str) -> bool:
    """Returns whether task ``task_id`` is still waiting in the outbox, unleased (no sender is on it)."""
    with get_db().session() as session:
        row = task_runs.find(session, task_id)
        return row is not None and not row.sent and row.state == task_runs.PENDING and row.send_lease_until is None

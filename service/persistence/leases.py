"""Leases on claimed rows: how a process takes a row it is to work on, so that no other process does meanwhile.

A row is taken by compare-and-set (``take``): one ``UPDATE … SET <the lease> WHERE <the row> AND <it is free>``,
and the caller holds the row when that statement changed exactly one row; of two processes that try at once, one
does. A lease is a timestamp column of one of two kinds:

- an end: the column says until when the row is held (``task_run.send_lease_until``, a webhook delivery's
  ``next_attempt_at``), written as ``until(now, hold_s)``; the row is free once that moment passed (``lapsed``);
- a start: the column says when the holder took the row or last wrote to it (``task_run.updated_at``,
  ``draft_pdf.claimed_at``); the row is free once that is older than ``stale_s`` (``stale``, and ``is_stale``
  for a row already read).

Every moment is computed here, in Python, from the app's clock and bound as a parameter: no database clock and no
interval arithmetic, so the SQL is the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, or_, update
from sqlmodel import Session


def until(now: datetime, hold_s: float) -> datetime:
    """Returns the end of a lease taken at ``now`` for ``hold_s`` seconds."""
    return now + timedelta(seconds=hold_s)


def lapsed(column: Any, now: datetime, *, null_is_free: bool = False, at_end: bool = False) -> ColumnElement[bool]:
    """Returns the SQL condition that the lease ending at ``column`` is over at ``now``.

    Over once its end is past (``column < now``); with ``at_end``, already at its end (``column <= now``: a moment
    that says when a row is due). With ``null_is_free``, a row with no lease (NULL) is free too.
    """
    over = column <= now if at_end else column < now
    return or_(column.is_(None), over) if null_is_free else over


def stale(column: Any, now: datetime, stale_s: float) -> ColumnElement[bool]:
    """Returns the SQL condition that the lease taken at ``column`` is older than ``stale_s`` at ``now``."""
    return column < now - timedelta(seconds=stale_s)


def is_stale(taken_at: datetime, now: datetime, stale_s: float) -> bool:
    """Returns whether a lease taken at ``taken_at`` (read from its row) is older than ``stale_s`` at ``now``."""
    return taken_at < now - timedelta(seconds=stale_s)


def take(session: Session, table: type, *where: ColumnElement[bool], **values: Any) -> bool:
    """Returns whether this session took the row of ``table`` that ``where`` picks, writing ``values`` to it.

    ``where`` names one row and says it is free (``lapsed``, ``stale``, and whatever else the table needs);
    ``values`` is the lease (and whatever else taking the row writes). The caller commits. Objects of the session
    are not refreshed: read the row again (``populate_existing``) to see what was written.
    """
    taken = session.execute(update(table).where(*where).values(**values)
                            .execution_options(synchronize_session=False))
    return bool(taken.rowcount == 1)

"""Running a background task: what a worker does to the task's row while it runs the work the service accepted.

A run claims its row first (``claim``: RUN, DONE, BUSY or ENDED), so a task delivered again returns its stored
result and one sent twice runs once; it then reports progress and records its end (``succeed`` or ``fail``). The
row lives in the task table (service/tasks/task_runs.py); the work's kinds are named there too. A record's signed
PDF is issued here for a worker as for a request (``render_signed_pdf``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from flask import current_app

from service.accounts.actors import Actor
from service.app import evaluation
from service.approval import record_store
from service.config import clock_of
from service.persistence.db import get_db
from service.persistence.models import Record
from service.record import signing_keys
from service.tasks import task_runs
from service.tasks.task_runs import (
    BUSY,
    COMPARISON,
    DONE,
    ENDED,
    QUOTE_COMPARISON,
    RECORD_PDF,
    REMEDIES,
    RUN,
    SEARCH,
    SUCCESS,
    Claim,
)

__all__ = ["BUSY", "COMPARISON", "DONE", "ENDED", "QUOTE_COMPARISON", "RECORD_PDF", "REMEDIES", "RUN", "SEARCH",
           "SUCCESS", "Claim", "advance", "claim", "fail", "finished_result", "pdf_work", "progress", "remedies_of",
           "render_signed_pdf", "succeed", "PdfWork"]


def claim(task_id: str, kind: str, key: str, total: int, delivery_tag: str | None) -> Claim:
    """Returns this run's claim of the row of task ``task_id`` (see service.tasks.task_runs.claim)."""
    return task_runs.claim(task_id, kind, key, total, delivery_tag)


def progress(task_id: str, current: int, total: int) -> None:
    """Records that the run of ``task_id`` did ``current`` steps of ``total``."""
    task_runs.progress(task_id, current, total)


def advance(task_id: str) -> int:
    """Returns the steps done of ``task_id`` once one more step (a chunk of a search) was counted."""
    return task_runs.advance(task_id)


def succeed(task_id: str, result: dict[str, Any]) -> None:
    """Records that ``task_id`` ended with ``result``."""
    task_runs.succeed(task_id, result)


def fail(task_id: str, error: BaseException) -> None:
    """Records that ``task_id`` failed with ``error`` (as a problem)."""
    task_runs.fail(task_id, error)


def finished_result(task_id: str) -> dict[str, Any] | None:
    """Returns the result of task ``task_id`` when its row holds a successful end, else None."""
    with get_db().session() as session:
        row = task_runs.find(session, task_id)
    return row.result if row is not None and row.state == SUCCESS and row.result is not None else None


def remedies_of(document: dict[str, Any], on_progress: Callable[[int, int], None]) -> dict[str, Any]:
    """Returns the remediation search of ``document`` under the app's policy (service.app.evaluation.find_remedies),
    the layout candidate read from a finished search of the same document where there is one."""
    with get_db().session() as session:
        return evaluation.find_remedies(session, document, on_progress=on_progress)


class PdfWork(NamedTuple):
    """An approved record's signed PDF to render: the record read once, and the key its rendering is claimed under."""
    record: Record
    key: str


def pdf_work(record_id: str) -> PdfWork:
    """Returns the work of rendering the signed PDF of record ``record_id``; NotFound when there is none."""
    with get_db().session() as session:
        record = record_store.get_record(session, record_id)
    return PdfWork(record, record_store.record_pdf_key(record.id, record.digest))


def render_signed_pdf(actor: Actor, work: PdfWork) -> dict[str, Any]:
    """Returns where the signed PDF of ``work``'s record is (digest and size, never its bytes), issuing it first if
    needed, as ``actor`` (``record_store.issue_signed_pdf``, as when the API renders it for a request).

    WorkflowConflict when the record is not an approved final record.
    """
    record = work.record
    stored = record_store.issue_signed_pdf(actor, record, signing_keys(), clock_of(current_app.config)())
    return {"record_id": record.id, "record_digest": record.digest, "record_status": "signed",
            "pdf_digest": stored.pdf_digest, "bytes": len(stored.pdf), "href": f"/api/v1/records/{record.id}.pdf"}

"""Heavy work: plain functions with JSON-friendly arguments, and the Celery tasks that run them.

The plain functions (``render_record_pdf``, ``compare_configurations``) need no Celery and are what the
API calls in-process. The tasks (``quotecheck.render_record_pdf``, ``quotecheck.compare_configurations``)
wrap them for a worker: they run inside the Flask app context (workers/celery_app.py), keep their state,
progress and outcome in the task table (service/task_runs.py), report progress with
``update_state(state="PROGRESS", meta={"current", "total"})``, and are idempotent: a task delivered again
returns its stored result. Only JSON crosses the broker, so no task returns bytes: a PDF is stored in the
database (``record_pdf``) and the result says where to fetch it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import rfc8785
from celery import Task, shared_task

COMPARE_CONFIGURATIONS = "quotecheck.compare_configurations"
RENDER_RECORD_PDF = "quotecheck.render_record_pdf"
# Options every task shares; the app-wide settings (workers/celery_app.py) say the same, but a task
# should not depend on a worker's configuration for its delivery guarantees.
TASK_OPTIONS: dict[str, Any] = {"bind": True, "acks_late": True, "reject_on_worker_lost": True}


# --- plain functions ---------------------------------------------------------------------------------------

def render_record_pdf(record_json: str, signed: bool, instance_dir: str | None = None,
                      envelope_json: str | None = None) -> bytes:
    """Returns the PDF of the record in ``record_json``: signed when ``signed`` (the record must be approved).

    ``signed`` False gives the DRAFT (watermarked, unsigned). The keys come from ``instance_dir`` when given,
    else from the Flask app of the current app context (``service.record.signing_keys``). ``envelope_json``:
    the record's signed envelope as the service issued it, attached unchanged (else the record is signed
    now). Idempotent: the same record renders to the same content (the PDF signature's time aside).
    """
    from service.record import SigningKeys, signing_keys
    from service.record.render import draft_pdf, signed_pdf

    record: dict[str, Any] = json.loads(record_json)
    if not signed:
        return draft_pdf(record)
    keys = SigningKeys.load_or_create(instance_dir) if instance_dir else signing_keys()
    envelope = json.loads(envelope_json) if envelope_json is not None else None
    return signed_pdf(record, keys, envelope=envelope)


def compare_configurations(submission_json: str, variants: list[dict[str, Any]], policy: Any = None,
                           on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Returns the comparison of the submission in ``submission_json`` under each ``{"name", "patch"}`` variant.

    Each patch is an RFC 7396 JSON merge patch of the submission; see rules.compare for the row of figures
    per variant. ``policy``: a rules.policy.Policy (default: the bundled one). ``on_progress(done, total)``
    after each variant. InvalidSubmission when a patched submission breaks the schema.
    """
    from rules.compare import compare

    return compare(json.loads(submission_json), variants, policy, on_progress=on_progress)


def record_pdf_key(record_id: str, record_digest: str) -> str:
    """Returns the idempotency key of rendering one issued record (its id and content digest)."""
    identity = {"record_id": record_id, "record_digest": record_digest}
    return "sha256:" + hashlib.sha256(rfc8785.dumps(identity)).hexdigest()


# --- tasks -------------------------------------------------------------------------------------------------

def _report(task: Task, current: int, total: int) -> None:
    """Reports progress to the result backend (Celery's PROGRESS state) and to the task table."""
    from service import task_runs

    task_id = task.request.id
    if not task_id:  # called as a plain function: nobody to tell
        return
    task.update_state(state="PROGRESS", meta={"current": current, "total": total})
    if current:
        task_runs.progress(task_id, current, total)


@shared_task(name=COMPARE_CONFIGURATIONS, **TASK_OPTIONS)
def compare_configurations_task(self: Task, submission_json: str, variants: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns the comparison (see ``compare_configurations``) under the app's policy, keeping it in the task table."""
    from rules.compare import comparison_key
    from rules.evaluate import engine_version
    from service import task_runs
    from service.evaluation import policy

    task_id = self.request.id
    if task_id:
        key = comparison_key(json.loads(submission_json), variants, engine_version(), policy().identity()["digest"])
        row = task_runs.begin(task_id, task_runs.COMPARISON, key, len(variants))
        if row.state == task_runs.SUCCESS and row.result is not None:
            return row.result
    _report(self, 0, len(variants))
    try:
        result = compare_configurations(submission_json, variants, policy(),
                                        on_progress=lambda done, total: _report(self, done, total))
    except Exception as error:
        if task_id:
            task_runs.fail(task_id, error)
        raise
    if task_id:
        task_runs.succeed(task_id, result)
    return result


@shared_task(name=RENDER_RECORD_PDF, **TASK_OPTIONS)
def render_record_pdf_task(self: Task, record_id: str, actor: dict[str, Any]) -> dict[str, Any]:
    """Returns where the signed PDF of approved record ``record_id`` is, rendering and storing it first if needed.

    ``actor`` (``{"name", "role", "token_id", "token_prefix"}``) is who asked: the audit event that issues the
    PDF names them. The PDF itself stays in the database (``record_pdf``, served by
    ``GET /api/v1/records/{id}.pdf``); the result carries its digest and size, never its bytes.
    WorkflowConflict when the record is not an approved final record (a draft is rendered per request).
    """
    from flask import current_app
    from sqlalchemy.exc import IntegrityError

    from service import store, task_runs
    from service.audit import Actor
    from service.config import clock_of
    from service.db import get_db
    from service.errors import WorkflowConflict
    from service.record import signing_keys

    task_id = self.request.id
    who = Actor(**actor)
    db = get_db()
    try:
        with db.session() as session:
            record = store.get_record(session, record_id)
        if task_id:
            row = task_runs.begin(task_id, task_runs.RECORD_PDF, record_pdf_key(record.id, record.digest), 1)
            if row.state == task_runs.SUCCESS and row.result is not None:
                return row.result
        _report(self, 0, 1)
        if not store.is_signed_record(record):
            raise WorkflowConflict(f"record {record_id} is not an approved final record: only an approved record's "
                                   "signed PDF is rendered by a task; GET its .pdf for the DRAFT")
        now = clock_of(current_app.config)()
        with db.session() as session:
            envelope = store.signed_envelope(session, who, record, signing_keys(), now)
            session.commit()
            stored = store.stored_pdf(session, record)
        if stored is None:
            pdf = render_record_pdf(json.dumps(record.document), True, envelope_json=json.dumps(envelope))
            try:
                with db.session() as session:
                    store.store_pdf(session, who, record, pdf, now)
                    session.commit()
            except IntegrityError:
                pass  # another render stored it first; that one stands
            with db.session() as session:
                stored = store.stored_pdf(session, record)
            if stored is None:
                raise RuntimeError(f"the PDF of record {record_id} was rendered but is not stored")
        result = {"record_id": record.id, "record_digest": record.digest, "record_status": "signed",
                  "pdf_digest": stored.pdf_digest, "bytes": len(stored.pdf),
                  "href": f"/api/v1/records/{record.id}.pdf"}
    except Exception as error:
        if task_id:
            task_runs.fail(task_id, error)
        raise
    _report(self, 1, 1)
    if task_id:
        task_runs.succeed(task_id, result)
    return result

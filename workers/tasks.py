"""Heavy work as Celery tasks, registered under the names the service sends them by (service/tasks/tasks_port.py).

``quotecheck.compare_configurations`` runs ``compare_configurations`` (rules.advice.compare, no Celery, no
database); ``quotecheck.compare_quotes`` ranks stored quotes at their best layouts (rules.advice.compare_quotes);
``quotecheck.render_record_pdf`` issues an approved record's signed PDF with ``service.app.runs.render_signed_pdf``
(``service.approval.record_store.issue_signed_pdf``), the function the API calls when it renders one for a request.
The tasks run inside the Flask app context (workers/celery_app.py), keep their state, progress and
outcome in the task table (service/tasks/task_runs.py, through service/app/runs.py), report progress with
``update_state(state="PROGRESS", meta={"current", "total"})``, and are idempotent: each run claims its
row first (``claim_run``), so a task delivered again returns its stored result, one redelivered after its
worker died runs again, and one sent twice runs once. Only JSON crosses the broker, so no task returns
bytes: a PDF is stored in the database (``record_pdf``) and the result says where to fetch it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from celery import Task, shared_task
from celery.utils.log import get_task_logger

from rules.advice.compare import compare, comparison_key
from rules.advice.compare_quotes import compare_quotes, quotes_key
from rules.evaluate import engine_version
from service.accounts.actors import Actor
from service.app import evaluation, runs
from service.tasks.tasks_port import COMPARE_CONFIGURATIONS, COMPARE_QUOTES, RENDER_RECORD_PDF

# Options every task shares; the app-wide settings (workers/celery_app.py) say the same, but a task
# should not depend on a worker's configuration for its delivery guarantees.
TASK_OPTIONS: dict[str, Any] = {"bind": True, "acks_late": True, "reject_on_worker_lost": True}
# How many times a run whose row another run holds looks again (each once that run would be stale) before it
# leaves the row to that run and to the next request for the same work.
BUSY_RETRIES = 3

logger = get_task_logger(__name__)


def compare_configurations(submission_json: str, variants: list[dict[str, Any]], policy: Any = None,
                           on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Returns the comparison of the submission in ``submission_json`` under each ``{"name", "patch"}`` variant.

    Each patch is an RFC 7396 JSON merge patch of the submission; see rules.advice.compare for the row of figures
    per variant. ``policy``: a rules.policy.Policy (default: the bundled one). ``on_progress(done, total)``
    after each variant. InvalidSubmission when a patched submission breaks the schema.
    """
    return compare(json.loads(submission_json), variants, policy, on_progress=on_progress)


# --- tasks -------------------------------------------------------------------------------------------------

def publish_progress(task: Task, current: int, total: int, task_id: str | None = None) -> None:
    """Stores ``PROGRESS {current, total}`` in the result backend under ``task_id`` (default: the task's own id).

    The backend only shows live progress (the task table is the record), so a Redis that is down or hangs
    costs the step its socket timeout and is logged, but does not fail the task.
    """
    try:
        task.update_state(task_id=task_id, state="PROGRESS", meta={"current": current, "total": total})
    except Exception as error:  # redis.TimeoutError, redis.ConnectionError, …
        logger.warning("task %s: progress %d/%d not published: %s", task_id or task.request.id, current, total,
                       error)


def report_progress(task: Task, current: int, total: int) -> None:
    """Reports progress to the result backend (Celery's PROGRESS state) and to the task table."""
    task_id = task.request.id
    if not task_id:  # called as a plain function: nobody to tell
        return
    publish_progress(task, current, total)
    if current:
        runs.progress(task_id, current, total)


def delivery_tag(task: Task) -> str | None:
    """Returns the broker's tag of the message being run (kept when a message is redelivered); None in-process."""
    properties = getattr(task.request, "properties", None) or {}
    tag = properties.get("delivery_tag")
    return str(tag) if tag is not None else None


def claim_run(task: Task, kind: str, key: str, total: int) -> runs.Claim:
    """Returns the claim of the task's row (runs.claim): RUN, DONE or ENDED.

    While another run holds the row the task is retried (a new message, this one acknowledged) for when
    that run would be stale; after BUSY_RETRIES it gives up with ENDED, leaving the row to that run.
    """
    claim = runs.claim(task.request.id, kind, key, total, delivery_tag(task))
    if claim.outcome != runs.BUSY:
        return claim
    if task.request.retries >= BUSY_RETRIES:
        logger.warning("task %s is held by another run; leaving it to that run", task.request.id)
        return runs.Claim(runs.ENDED, claim.row)
    raise task.retry(countdown=claim.wait_s, max_retries=BUSY_RETRIES)


def run_keyed(task: Task, kind: str, key: str, total: int,
              work: Callable[[Callable[[int, int], None]], dict[str, Any]]) -> dict[str, Any] | None:
    """Returns ``work(on_progress)``'s result, kept in the task table under ``key``; a finished run's result at once.

    Progress goes to the result backend and the table (``report_progress``); a failure is recorded and raised.
    A message for a row that failed (a leftover) returns None without running. Called as a plain function
    (no task id), it only runs ``work``.
    """
    task_id = task.request.id
    if task_id:
        claim = claim_run(task, kind, key, total)
        if claim.outcome == runs.DONE:
            return claim.row.result
        if claim.outcome == runs.ENDED:
            return None
    report_progress(task, 0, total)
    try:
        result = work(lambda done, of: report_progress(task, done, of))
    except Exception as error:
        if task_id:
            runs.fail(task_id, error)
        raise
    if task_id:
        runs.succeed(task_id, result)
    return result


@shared_task(name=COMPARE_CONFIGURATIONS, **TASK_OPTIONS)
def compare_configurations_task(self: Task, submission_json: str,
                                variants: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Returns the comparison (see ``compare_configurations``) under the app's policy, keeping it in the task table."""
    policy = evaluation.policy()
    key = comparison_key(json.loads(submission_json), variants, engine_version(), policy.identity()["digest"])
    return run_keyed(self, runs.COMPARISON, key, len(variants), lambda progress: compare_configurations(
        submission_json, variants, policy, on_progress=progress))


@shared_task(name=COMPARE_QUOTES, **TASK_OPTIONS)
def compare_quotes_task(self: Task, quotes_json: str, waived: dict[str, list[str]] | None = None
                        ) -> dict[str, Any] | None:
    """Returns stored quotes compared at their best layouts and ranked if they pass (rules.advice.compare_quotes)
    under the app's policy.

    ``quotes_json``: a JSON array of ``[submission id, submission document]`` pairs, in the order requested;
    ``waived``: submission id → the ids of its checks an active waiver covered when the comparison was asked for
    (none for a message queued before waivers were sent).
    """
    quotes = [(name, document) for name, document in json.loads(quotes_json)]
    policy = evaluation.policy()
    key = quotes_key(quotes, engine_version(), policy.identity()["digest"], waived)
    return run_keyed(self, runs.QUOTE_COMPARISON, key, len(quotes),
                     lambda progress: compare_quotes(quotes, policy, waived=waived, on_progress=progress))


@shared_task(name=RENDER_RECORD_PDF, **TASK_OPTIONS)
def render_record_pdf_task(self: Task, record_id: str, actor: dict[str, Any]) -> dict[str, Any] | None:
    """Returns where the signed PDF of approved record ``record_id`` is, rendering and storing it first if needed.

    ``actor`` (``{"name", "role", "token_id", "token_prefix"}``) is who asked: the audit event that issues the
    PDF names them. The PDF itself stays in the database (``record_pdf``, served by
    ``GET /api/v1/records/{id}.pdf``); the result carries its digest and size, never its bytes.
    WorkflowConflict when the record is not an approved final record (the API renders a draft, once:
    service/approval/draft_pdfs.py). The PDF is issued by ``record_store.issue_signed_pdf``, as when the API
    renders it for a request.
    """
    task_id = self.request.id
    who = Actor(**actor)
    try:
        work = runs.pdf_work(record_id)
        if task_id:
            claim = claim_run(self, runs.RECORD_PDF, work.key, 1)
            if claim.outcome != runs.RUN:
                return claim.row.result
        report_progress(self, 0, 1)
        result = runs.render_signed_pdf(who, work)
    except Exception as error:
        if task_id:
            runs.fail(task_id, error)
        raise
    report_progress(self, 1, 1)
    if task_id:
        runs.succeed(task_id, result)
    return result

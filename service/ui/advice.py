"""The advice of the submission page: search the layouts of the quoted GPUs, find the remedies of the checks that
fail or warn, and make a revision from one remedy.

The buttons start the tasks the API starts (``POST /api/v1/searches``, ``GET /api/v1/submissions/{id}/remedies``,
through service/app/searches.py) and send the browser to the task's page, which shows its progress while it runs
(answered with ``Refresh``, so it reloads itself without script) and its result once it has ended. Applying a
remedy revises the quote as ``POST /api/v1/submissions/{id}/remedies/{remedy}/revision`` does, with the version
the page was rendered from standing in for If-Match.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from flask import Response, redirect, url_for

from rules.errors import QuotecheckError
from service.accounts.actors import Actor
from service.accounts.auth import authorize
from service.app import advice, searches
from service.http import now
from service.ui.actions import expect_version, refused
from service.ui.blueprint import bp
from service.ui.render import TASK_REFRESH_S, current_visitor, page, reloading, signed_in

# The task's state in words, as its page says it.
TASK_STATE_WORDS = {"PENDING": "queued", "PROGRESS": "running", "SUCCESS": "done", "FAILURE": "failed"}


def _task_page(template: str, found: advice.SearchOf, **context: Any) -> Response:
    """Returns a task's page; while the task runs, one that reloads itself every TASK_REFRESH_S seconds."""
    response = page(template, found=found, task=found.task, submission=found.submission, running=found.running,
                    state_words=TASK_STATE_WORDS, refresh_s=TASK_REFRESH_S, **context)
    return reloading(response) if found.running else response


def _started(submission_id: str, start: Callable[[Actor, str, datetime], str], endpoint: str) -> Response:
    """Starts a task of the current revision with ``start`` for the visitor; then sends the browser to its page."""
    actor = current_visitor().actor
    authorize(actor, "read")
    task_id = start(actor, submission_id, now())
    return redirect(url_for(endpoint, submission_id=submission_id, task_id=task_id), 303)


def _mfu(row: dict[str, Any] | None) -> str:
    mfu = (row or {}).get("mfu")
    return f"{mfu:.1%}" if isinstance(mfu, int | float) else "—"


@bp.post("/ui/submissions/<submission_id>/searches")
@signed_in
def start_search(submission_id: str) -> Response:
    """Search the layouts of the current revision's quoted GPUs in a background task; then the task's page."""
    return _started(submission_id, searches.request_search, "ui.layout_search")


@bp.get("/ui/submissions/<submission_id>/searches/<task_id>")
@signed_in
def layout_search(submission_id: str, task_id: str) -> Response:
    """A layout search: its progress while it runs; then the best layout with its days and MFU, and the next best."""
    found = advice.layout_search_of(current_visitor().actor, submission_id, task_id, now().date())
    return _task_page("search.html", found, layouts=advice.layouts(found), mfu=_mfu)


@bp.post("/ui/submissions/<submission_id>/remedies")
@signed_in
def start_remedies(submission_id: str) -> Response:
    """Find the remedies of the current revision in a background task; then the task's page."""
    return _started(submission_id, searches.start_remedies, "ui.remedies")


@bp.get("/ui/submissions/<submission_id>/remedies/<task_id>")
@signed_in
def remedies(submission_id: str, task_id: str) -> Response:
    """A remedy search: its progress while it runs; then each remedy with its verdict, days, added cost, the
    decisions it asks and its changes, and a button that applies it for a user who may revise the quote."""
    found = advice.remedies_of(current_visitor().actor, submission_id, task_id, now().date())
    return _task_page("remedies.html", found, result=found.result)


@bp.post("/ui/submissions/<submission_id>/remedies/<remedy_id>/revision")
@signed_in
def apply_remedy(submission_id: str, remedy_id: str) -> Response:
    """Revise the quote by one remedy of its current revision (its original submitter, or an admin); then its page."""
    actor = current_visitor().actor
    try:
        authorize(actor, "revise")
        searches.revise_from_remedy(actor, submission_id, remedy_id, now, expect_version)
    except QuotecheckError as error:
        return refused(submission_id, error)
    return redirect(url_for("ui.submission", submission_id=submission_id, done="remedy-applied") + "#revisions-h",
                    303)


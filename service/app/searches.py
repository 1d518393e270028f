"""The layout search of a stored submission, and its remediation search: background tasks these operations issue.

The API (``POST /api/v1/searches``, ``GET …/remedies`` and a revision made from a remedy) calls them; the
workers run the tasks (workers/search_tasks.py, workers/remedy_tasks.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlmodel import Session

from rules.advice.compare import merge_patch
from rules.advice.remedies import remedies_key
from rules.advice.search import NothingToSearch, default_chunks, prepare, search_key
from rules.errors import Problem
from rules.evaluate import engine_version, submission_digest, validate_submission
from service.accounts.actors import Actor
from service.accounts.visibility import ensure_visible
from service.app import evaluation, intake, tasks
from service.app.evaluation import policy
from service.approval import store
from service.approval.store import Snapshot
from service.errors import InvalidRequest, NotFound
from service.persistence.db import get_db
from service.persistence.models import TaskRun
from service.tasks import task_runs

_INDEX = re.compile(r"^[0-9]{1,6}$")


def _visible_document(actor: Actor, submission_id: str) -> dict[str, Any]:
    with get_db().session() as session:
        ensure_visible(session, actor, submission_id)
        return store.current_document(session, submission_id)


def request_search(actor: Actor, submission_id: str, now: datetime) -> str:
    """Issues the layout search of the current revision of a submission ``actor`` may see; returns its task's id.

    InvalidRequest (at ``/submission``) when the submission has nothing to search.
    """
    document = _visible_document(actor, submission_id)
    app_policy = policy()
    try:
        prepare(document, app_policy)
    except NothingToSearch as error:
        raise InvalidRequest(f"submission {submission_id!r} has nothing to search: {error}",
                             [Problem("/submission", str(error))]) from None
    identity = app_policy.identity()
    key, private = tasks.key_for(actor, search_key(document, engine_version(), identity["digest"]))
    event = {"action": "search.requested", "submission_id": submission_id, "input_digest": submission_digest(document),
             "engine_version": engine_version(), "policy_version": identity["version"], "detail": {"key": key}}
    row, send = tasks.issue(actor, task_runs.SEARCH, key, len(default_chunks()), now, [json.dumps(document)],
                            event=event, submission_id=submission_id, private=private)
    if send:
        tasks.send(row)
    return row.id


def _key(actor: Actor, document: dict[str, Any]) -> tuple[str, bool]:
    return tasks.key_for(actor, remedies_key(document, engine_version(), policy().identity()["digest"]))


def _finished_row(session: Session, key: str) -> TaskRun | None:
    row = task_runs.find_by_key(session, task_runs.REMEDIES, key)
    return row if row is not None and row.state == task_runs.SUCCESS and row.result is not None else None


def _finished(session: Session, key: str) -> dict[str, Any] | None:
    row = _finished_row(session, key)
    return row.result if row is not None else None


def start_remedies(actor: Actor, submission_id: str, now: datetime) -> str:
    """Returns the id of the task that searches the remedies of the current revision of a submission ``actor`` may
    see: one that has finished, or one issued now (it has finished already when the service runs tasks in-process).

    TooManyTasks (429) when the search would queue a task and the actor's user has as many as they may.
    """
    document = _visible_document(actor, submission_id)
    key, private = _key(actor, document)
    with get_db().session() as session:
        finished = _finished_row(session, key)
    if finished is not None:
        return finished.id
    identity = policy().identity()
    event = {"action": "remedies.requested", "submission_id": submission_id,
             "input_digest": submission_digest(document), "engine_version": engine_version(),
             "policy_version": identity["version"], "detail": {"key": key}}
    row, send = tasks.issue(actor, task_runs.REMEDIES, key, int(policy().value("remedies.max_evaluations")), now,
                            [json.dumps(document)], event=event, submission_id=submission_id, private=private)
    if send:
        tasks.send(row)
    return row.id


def request_remedies(actor: Actor, submission_id: str, now: datetime) -> tuple[dict[str, Any] | None, str | None]:
    """Returns the remedies of the current revision of a submission ``actor`` may see when a search of them has
    finished (or finishes now, run in-process), else None and the id of the task issued to search them."""
    task_id = start_remedies(actor, submission_id, now)
    view = tasks.load_view(task_id)
    if view["state"] == task_runs.SUCCESS:
        return view["result"], None
    return None, task_id


def _chosen(found: dict[str, Any], remedy: str, submission_id: str, revision: int) -> dict[str, Any]:
    """Returns the remedy named ``remedy`` (its id, or its index in the list, 0 the best); NotFound otherwise."""
    listed = found["remedies"]
    if _INDEX.match(remedy) and int(remedy) < len(listed):
        return listed[int(remedy)]
    match = next((r for r in listed if r["id"] == remedy), None)
    if match is None:
        names = ", ".join(f"{i} ({r['id']})" for i, r in enumerate(listed)) or "none"
        raise NotFound(f"revision {revision} of submission {submission_id!r} has no remedy {remedy!r}; its "
                       f"remedies: {names}")
    return match


def revise_from_remedy(actor: Actor, submission_id: str, remedy: str, clock: Callable[[], datetime],
                       check: Callable[[Snapshot], None]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Revises a submission by one of its current revision's remedies (its id, or its index in the list); returns
    the submission's representation, the diff of its checks and the remedy ``{id, changes}``.

    The remedies are the finished search's, or searched now when none has finished. ``check``: the caller's
    checks of the snapshot first (the version it expects).
    """
    with get_db().session() as session:
        snap = store.load_visible(session, actor, submission_id)
        check(snap)
        document = store.current_document(session, submission_id)
        found = _finished(session, _key(actor, document)[0]) or evaluation.find_remedies(
            session, document, snap.record.document)
        chosen = _chosen(found, remedy, submission_id, snap.submission.revision)
        revised = merge_patch(document, chosen["patch"])
        validate_submission(revised, f"the submission with remedy {chosen['id']}")
        origin = {"remedy": chosen["id"], "changes": chosen["changes"]}
        view, diff = intake.revise_snapshot(session, actor, snap, revised, clock(), origin)
        session.commit()
    return view, diff, {"id": chosen["id"], "changes": chosen["changes"]}

"""A submission's layout search and remedy search as its pages show them: the task, the revision whose document it
searched (with that revision's evaluation record), and the searched layouts with their days to result.

The tasks are issued by service/app/searches.py (``request_search``, ``start_remedies``), as the API issues them. A
task is a search of a submission when its key is the key of one of the submission's revisions (the same document,
engine version and policy); the revision it names is the one whose remedies a revision may be made from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

from sqlmodel import col, select

from rules.advice.best_layout import layout_search_section, timing_at
from rules.advice.remedies import remedies_key
from rules.advice.search import search_key
from rules.evaluate import engine_version
from service.accounts.actors import Actor
from service.app import history, tasks
from service.app.evaluation import policy
from service.app.review import forms_for
from service.approval import store
from service.errors import NotFound
from service.persistence.db import get_db
from service.persistence.models import Revision, Submission, TaskRun
from service.tasks import task_runs

# The key of each kind of search a page shows, from a document, the engine version and the policy's digest.
KEYS: dict[str, Callable[[dict[str, Any], str, str], str]] = {
    task_runs.SEARCH: lambda document, engine, digest: search_key(document, engine, digest),
    task_runs.REMEDIES: remedies_key,
}
# How many of the fastest layouts a search's page lists (the best among them).
LAYOUTS_SHOWN = 5


@dataclass(frozen=True)
class SearchOf:
    """A search task of a submission: its representation, the submission now, and the revision the task searched."""

    task: dict[str, Any]  # service.app.tasks.view_of
    submission: Submission
    # The revision whose document was searched; None when none is (searched under another engine version or policy).
    revision: int | None
    document: dict[str, Any] | None  # that revision's document and evaluation record
    record: dict[str, Any] | None
    may_revise: bool  # the visitor may revise the submission now (role, workflow, original submitter)

    @property
    def of_current(self) -> bool:
        """Returns whether the task searched the submission's current revision."""
        return self.revision == self.submission.revision

    @property
    def running(self) -> bool:
        """Returns whether the task is queued or running (it has not ended)."""
        return self.task["state"] not in task_runs.FINISHED

    @property
    def result(self) -> dict[str, Any] | None:
        """Returns the task's result once it has succeeded, else None."""
        result = self.task.get("result")
        return result if self.task["state"] == task_runs.SUCCESS and isinstance(result, dict) else None


def _key_matches(row: TaskRun, key: str) -> bool:
    return row.key == (tasks.bound_key(key, row.user_id) if row.user_id is not None else key)


def layout_search_of(actor: Actor, submission_id: str, task_id: str, today: date) -> SearchOf:
    """Returns task ``task_id`` as a layout search of submission ``submission_id`` (see ``search_of``)."""
    return search_of(actor, submission_id, task_id, task_runs.SEARCH, today)


def remedies_of(actor: Actor, submission_id: str, task_id: str, today: date) -> SearchOf:
    """Returns task ``task_id`` as the remedy search of submission ``submission_id`` (see ``search_of``)."""
    return search_of(actor, submission_id, task_id, task_runs.REMEDIES, today)


def search_of(actor: Actor, submission_id: str, task_id: str, kind: str, today: date) -> SearchOf:
    """Returns task ``task_id`` as a search of kind ``kind`` (task_runs.SEARCH, task_runs.REMEDIES) of the submission
    ``submission_id``, which ``actor`` may see.

    NotFound, as for no such task, when ``actor`` may see neither, when the task is of another kind, or when it
    searched no revision of this submission (nor was issued for it).
    """
    task = tasks.load_view(task_id, actor)
    with get_db().session() as session:
        snap = store.load_visible(session, actor, submission_id)
        row = task_runs.find(session, task_id)
        assert row is not None  # load_view found it
        if task["kind"] != kind:
            raise NotFound(f"task {task_id!r} is a {task['kind']} task, not a {kind} of submission {submission_id!r}")
        digest = policy().identity()["digest"]
        revisions = session.exec(select(Revision).where(Revision.submission_id == submission_id)
                                 .order_by(col(Revision.number).desc())).all()
        searched = next((r for r in revisions if _key_matches(row, KEYS[kind](r.document, engine_version(), digest))),
                        None)
        if searched is None and row.submission_id != submission_id:
            raise NotFound(f"task {task_id!r} is not a {kind} of submission {submission_id!r}")
        record = history.evaluation_record(session, submission_id, searched.number) if searched else None
        may_revise = bool(forms_for(actor, snap, today)["revise"])
        return SearchOf(task, snap.submission, searched.number if searched else None,
                        searched.document if searched else None, record, may_revise)


def layouts(found: SearchOf) -> dict[str, Any] | None:
    """Returns a finished layout search as its page shows it, None before it has finished.

    ``{"searched": {layouts_searched, fitting, layouts_skipped, skipped, submitted_vs_best}, "best", "submitted",
    "top": [the fastest LAYOUTS_SHOWN, best first], "checks": the layout-dependent checks at the submitted and the
    best layout, "verdict_at_best", "changes"}``; each layout has ``timing``: time-to-result's days (expected,
    p50, p90) with the job run at it (rules.advice.best_layout), None where the check does not model the run or
    the searched revision is unknown.
    """
    result = found.result
    if result is None:
        return None
    searched = {name: result.get(name) for name in ("layouts_searched", "fitting", "layouts_skipped",
                                                     "submitted_vs_best")}
    searched["skipped"] = result.get("skipped") or {}
    top = result.get("top") or []
    shown = {"searched": searched, "best": result.get("best"), "submitted": result.get("submitted"),
             "top": [{**row, "timing": None} for row in top[:LAYOUTS_SHOWN]], "checks": [],
             "verdict_at_best": None, "changes": []}
    if found.document is None or found.record is None:
        return shown
    section = layout_search_section(found.document, found.record, result, policy())
    timing = section.get("time_to_result") or {}
    shown["submitted"] = {**result["submitted"], "timing": timing.get("submitted")}
    if result.get("best") is None:
        return shown
    shown["best"] = {**result["best"], "timing": timing.get("best")}
    shown["top"] = [shown["best"]] + [{**row, "timing": timing_at(found.document, found.record, row, policy())}
                                      for row in top[1:LAYOUTS_SHOWN]]
    shown.update(checks=section.get("checks") or [], verdict_at_best=section.get("verdict_at_best"),
                 changes=section.get("changes") or [])
    return shown

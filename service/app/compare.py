"""Comparisons: one submission under what-if variants, or stored quotes for the same workload side by side.

Both are background tasks (rules/advice/compare.py, rules/advice/compare_quotes.py): these operations issue them and
return the
task's id, for the API (``POST /api/v1/comparisons``) and the reviewer pages (the Compare page's ranking).
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

from sqlmodel import Session

from rules.advice.compare import comparison_key, variant_documents
from rules.advice.compare_quotes import check_same_workload, quotes_key
from rules.errors import InvalidSubmission
from rules.evaluate import engine_version, submission_digest
from service.accounts.actors import Actor
from service.accounts.visibility import ensure_visible
from service.app import tasks
from service.app.evaluation import policy
from service.approval import store
from service.errors import InvalidRequest, ParameterProblem, WorkflowConflict
from service.exports.comparisons import comparison_csv
from service.persistence.db import get_db
from service.tasks import task_runs


def stored_quotes(session: Session, actor: Actor, ids: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Returns ``(id, current document)`` of each stored submission ``ids``; NotFound for one ``actor`` may not see."""
    quotes = []
    for submission_id in ids:
        ensure_visible(session, actor, submission_id)
        quotes.append((submission_id, store.current_document(session, submission_id)))
    return quotes


def compare_variants(actor: Actor, submission: dict[str, Any], variants: list[dict[str, Any]], now: datetime) -> str:
    """Issues the comparison of ``submission`` under ``variants`` (``{name, patch}``) and returns its task's id.

    The caller has checked that ``actor`` may evaluate documents of their own (the role that may submit).
    """
    variant_documents(submission, variants)
    identity = policy().identity()
    key, private = tasks.key_for(actor, comparison_key(submission, variants, engine_version(), identity["digest"]))
    event = {"action": "comparison.requested", "input_digest": submission_digest(submission),
             "engine_version": engine_version(), "policy_version": identity["version"],
             "detail": {"key": key, "variants": [v["name"] for v in variants]}}
    row, send = tasks.issue(actor, task_runs.COMPARISON, key, len(variants), now, [json.dumps(submission), variants],
                            event=event, private=private)
    if send:
        tasks.send(row)
    return row.id


def waived_checks(session: Session, ids: list[str], today: date) -> dict[str, list[str]]:
    """Returns submission id → the ids of its checks an active waiver covers ``today`` (the detail view's rule:
    a waiver that binds to its check's current result and has not expired), for each of ``ids``."""
    return {submission_id: sorted(store.load(session, submission_id).active_waivers(today)) for submission_id in ids}


def compare_stored(actor: Actor, ids: list[str], now: datetime) -> str:
    """Issues the comparison of stored quotes ``ids`` (their current revisions) and returns its task's id.

    The checks waived on each (active at ``now``) go with the quotes: a quote whose failed and incomplete checks are
    all waived is ranked (rules/advice/quote_ranking.py). InvalidRequest when the quotes do not quote for the same
    workload; NotFound for one ``actor`` may not see.
    """
    with get_db().session() as session:
        quotes = stored_quotes(session, actor, ids)
        waived = waived_checks(session, ids, now.date())
    try:
        check_same_workload(quotes)
    except InvalidSubmission as error:
        raise InvalidRequest(str(error), error.problems) from None
    identity = policy().identity()
    key, private = tasks.key_for(actor, quotes_key(quotes, engine_version(), identity["digest"], waived))
    event = {"action": "comparison.requested", "engine_version": engine_version(),
             "policy_version": identity["version"], "detail": {"key": key, "submissions": ids, "waived": waived}}
    row, send = tasks.issue(actor, task_runs.QUOTE_COMPARISON, key, len(quotes), now, [json.dumps(quotes), waived],
                            event=event, private=private)
    if send:
        tasks.send(row)
    return row.id


def is_quote_comparison(task: dict[str, Any]) -> bool:
    """Returns whether ``task`` (a task's representation) is a comparison of stored quotes."""
    return task["kind"] == task_runs.QUOTE_COMPARISON


def comparison_table(task: dict[str, Any]) -> str:
    """Returns the CSV of a comparison of stored quotes (service/exports/comparisons.py), ``task`` its
    representation.

    InvalidRequest (naming the ``format`` parameter) for another kind of task; WorkflowConflict for a comparison
    that has not succeeded, or one made before comparisons decided which quotes pass.
    """
    if not is_quote_comparison(task):
        raise InvalidRequest(f"task {task['id']} is a {task['kind']}: only a comparison of stored quotes "
                             "(quote-comparison) has a CSV",
                             [ParameterProblem("", "csv is offered for quote-comparison tasks only", "format")])
    if task["state"] != task_runs.SUCCESS:
        raise WorkflowConflict(f"the comparison {task['id']} has no result to export: it is {task['state']}; poll "
                               "the task until SUCCESS")
    result = task["result"] or {}
    if "passing" not in result:
        raise WorkflowConflict(f"the comparison {task['id']} was made before comparisons decided which quotes pass: "
                               "ask for it again (POST /api/v1/comparisons) to export it")
    return comparison_csv(result)

"""The evaluation subsystem: the policy the app decides under, and the rules engine, warmed at start-up."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from flask import Flask, current_app
from sqlmodel import Session

from rules.advice.best_layout import with_layout_search
from rules.advice.remedies import needs_remedies, remedies_key, search_remedies
from rules.advice.search import NothingToSearch, search_key, search_submission
from rules.evaluate import default_engine, engine_version, evaluate
from rules.policy import Policy, default_policy, load_policy
from service.monitoring import metrics
from service.tasks import task_runs

EXTENSION = "quotecheck.policy"


def policy() -> Policy:
    """Returns the policy of the current app (POLICY_FILE, or the bundled default)."""
    return current_app.extensions[EXTENSION]


def required_approvers() -> int:
    """Returns how many distinct approvers an approval needs under the app's policy."""
    return int(policy().value("approval.required_approvers"))


def evaluate_submission(document: dict[str, Any], now: datetime) -> dict[str, Any]:
    """Returns the engine's record of ``document``, a request body its declaration validated (SUBMISSION_BODY in
    service/api/submissions.py, rules.evaluate.validate_submission), under the app's policy."""
    record = evaluate(document, policy(), now=now, validated=True)
    metrics.observe_evaluation(record)
    return record


def layout_search(session: Session, document: dict[str, Any]) -> dict[str, Any] | None:
    """Returns the layout search of ``document`` under the app's engine and policy; None when it has nothing to search.

    A search task that finished for the same document, engine version and policy (``POST /api/v1/searches``,
    not one private to a vendor's token) gives its stored result; otherwise the search runs here.
    """
    key = search_key(document, engine_version(), policy().identity()["digest"])
    row = task_runs.find_by_key(session, task_runs.SEARCH, key)
    if row is not None and row.state == task_runs.SUCCESS and row.result is not None:
        return row.result
    try:
        return search_submission(document, policy())
    except NothingToSearch:
        return None


def with_search(session: Session, document: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """Returns ``record`` (the evaluation of ``document``) with its ``layout_search`` member where one applies."""
    return with_layout_search(document, record, layout_search(session, document), policy())


def find_remedies(session: Session, document: dict[str, Any], record: dict[str, Any] | None = None,
                  on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Returns the remediation search of ``document`` (rules/advice/remedies.py) under the app's policy.

    ``record``: its evaluation, when the caller has it. The layout candidate comes from the record's layout
    search, else from a finished search task of the same document, else from a search run here.
    """
    searched = (record or {}).get("layout_search") or layout_search(session, document) or {}
    return search_remedies(document, policy(), record=record, layout_search=searched, on_progress=on_progress)


def remedies(session: Session, document: dict[str, Any], record: dict[str, Any]) -> dict[str, Any] | None:
    """Returns the remedies of ``document``, whose evaluation is ``record``, when one of its checks fails or warns.

    A remediation task that finished for the same document, engine version and policy (GET
    /api/v1/submissions/{id}/remedies, not one private to a vendor's token) gives its stored result;
    otherwise the search runs here. None when every check passes (waived checks count by their original status).
    """
    if not needs_remedies(record):
        return None
    key = remedies_key(document, engine_version(), policy().identity()["digest"])
    row = task_runs.find_by_key(session, task_runs.REMEDIES, key)
    if row is not None and row.state == task_runs.SUCCESS and row.result is not None:
        return row.result
    return find_remedies(session, document, record)


def init_app(app: Flask) -> None:
    """Loads the policy and builds the rules engine now, before the first request.

    The engine is built lazily by rules.evaluate on first use, and building it is not safe when two
    request threads do it at once; start-up is single-threaded.
    """
    policy_file = app.config["POLICY_FILE"]
    app.extensions[EXTENSION] = load_policy(policy_file) if policy_file else default_policy()
    default_engine()

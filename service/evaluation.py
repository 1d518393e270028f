"""The evaluation subsystem: the policy the app decides under, and the rules engine, warmed at start-up."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import Flask, current_app

from rules.evaluate import default_engine, evaluate
from rules.policy import Policy, default_policy, load_policy

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
    return evaluate(document, policy(), now=now, validated=True)


def init_app(app: Flask) -> None:
    """Loads the policy and builds the rules engine now, before the first request.

    The engine is built lazily by rules.evaluate on first use, and building it is not safe when two
    request threads do it at once; start-up is single-threaded.
    """
    policy_file = app.config["POLICY_FILE"]
    app.extensions[EXTENSION] = load_policy(policy_file) if policy_file else default_policy()
    default_engine()

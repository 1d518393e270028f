"""The remediation search as a Celery task: ``quotecheck.find_remedies`` (rules/advice/remedies.py,
service/app/evaluation.py).

Sent by ``GET /api/v1/submissions/{id}/remedies`` with the submission as JSON text. It keeps its state,
progress (one step per full evaluation of the policy's budget, ``remedies.max_evaluations``) and result in
the task table, and is idempotent as the other tasks are (workers/tasks.py, ``run_keyed``): a delivered-again
task whose row is SUCCESS returns the stored result. A finished layout search of the same document (a
search task) gives the layout candidate, so the layouts are not searched twice.
"""

from __future__ import annotations

import json
from typing import Any

from celery import Task, shared_task

from rules.advice.remedies import remedies_key
from rules.evaluate import engine_version
from service.app import evaluation, runs
from service.tasks.tasks_port import FIND_REMEDIES
from workers.tasks import TASK_OPTIONS, run_keyed


@shared_task(name=FIND_REMEDIES, **TASK_OPTIONS)
def find_remedies_task(self: Task, submission_json: str) -> dict[str, Any]:
    """Returns the remedies of the submission in ``submission_json`` under the app's policy, kept in the task table."""
    submission = json.loads(submission_json)
    policy = evaluation.policy()
    key = remedies_key(submission, engine_version(), policy.identity()["digest"])
    return run_keyed(self, runs.REMEDIES, key, int(policy.value("remedies.max_evaluations")),
                     lambda progress: runs.remedies_of(submission, on_progress=progress))

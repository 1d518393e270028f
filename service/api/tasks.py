"""Tasks: the state, progress and outcome of background work the API accepted (202 + Location here).

Issuing, sending and reading tasks is the application layer's (service/app/tasks.py); a broker that cannot
take a task leaves it PENDING in the outbox, still 202.
"""

from __future__ import annotations

from flask import Blueprint, Response

from service.accounts.auth import current_actor, require
from service.app.tasks import load_view
from service.http import json_response
from service.openapi import operation

bp = Blueprint("tasks", __name__, url_prefix="/api/v1/tasks")


@bp.get("/<task_id>")
@operation(tag="tasks", errors=(404,), responses={200: ("The task", "Task")})
@require("read")
def get_task(task_id: str) -> Response:
    """Read a background task: its state, progress, and its result or error once it ended.

    `state` is PENDING (queued), PROGRESS (running: `progress.current` of `progress.total` steps done),
    SUCCESS (`result`) or FAILURE (`error`, a problem object). Poll until SUCCESS or FAILURE; a task id
    never issued by this service is 404.
    """
    return json_response(load_view(task_id, current_actor()))

"""Tasks: the state, progress and outcome of background work the API accepted (202 + Location here).

Issuing, sending and reading tasks is the application layer's (service/app/tasks.py); a broker that cannot
take a task leaves it PENDING in the outbox, still 202.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from service.accounts.auth import current_actor, require
from service.app.compare import comparison_table, is_quote_comparison
from service.app.responses import LIST_FORMATS
from service.app.tasks import load_view
from service.http import json_response, negotiated_format, text_response
from service.inputs import Query, accepts
from service.openapi import operation

bp = Blueprint("tasks", __name__, url_prefix="/api/v1/tasks")

TASK_QUERY = Query({"type": "object", "properties": {
    "format": {"description": "json (default) or csv, the CSV of a finished comparison of stored quotes "
                              "(kind quote-comparison) only; without it the Accept header chooses (text/csv)",
               "enum": list(LIST_FORMATS)},
}})


@bp.get("/<task_id>")
@operation(tag="tasks", errors=(404, 409),
           responses={200: ("The task; of a finished comparison of stored quotes, as CSV when asked for", "Task")},
           alternatives={200: {"text/csv": "Csv"}}, response_headers={200: ("Content-Disposition",)})
@require("read")
@accepts(TASK_QUERY)
def get_task(task_id: str, query: dict[str, Any]) -> Response:
    """Read a background task: its state, progress, and its result or error once it ended.

    `state` is PENDING (queued), PROGRESS (running: `progress.current` of `progress.total` steps done),
    SUCCESS (`result`) or FAILURE (`error`, a problem object). Poll until SUCCESS or FAILURE; a task id
    never issued by this service is 404.

    A finished comparison of stored quotes (kind `quote-comparison`) is also served as CSV (`format=csv`, or
    `Accept: text/csv`; its `links.csv`): one row per quote, the ranked ones first by rank, then those not ranked
    with an empty rank and the checks that stop them (`stopped_by`); numbers are plain decimals, units in the column
    names (docs/workers.md). `format=csv` on another kind of task is 422; on a comparison that has not succeeded,
    409.
    """
    view = load_view(task_id, current_actor())
    offered = LIST_FORMATS if is_quote_comparison(view) else {"json": LIST_FORMATS["json"]}
    if query["format"] == "csv" or negotiated_format(query["format"], offered) == "csv":
        name = f"quote-comparison-{view['id']}.csv"
        return text_response(comparison_table(view), LIST_FORMATS["csv"],
                             {"Content-Disposition": f'attachment; filename="{name}"'})
    return json_response(view)

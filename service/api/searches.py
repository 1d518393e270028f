"""Searches: the layout search of a stored submission, in background tasks (a task per chunk of the space)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from service.accounts.auth import current_actor, require
from service.api_schemas.searches import SEARCH_REQUEST
from service.app import searches
from service.app.responses import accepted
from service.http import now
from service.inputs import Body, accepts
from service.openapi import operation

bp = Blueprint("searches", __name__, url_prefix="/api/v1/searches")

SEARCH_BODY = Body("SearchRequest", "search", SEARCH_REQUEST)


@bp.post("")
@operation(tag="searches", errors=(404, 429, 503),
           responses={202: ("Accepted: the task that searches the layouts (`Location`); it has finished already "
                            "when the service runs tasks in-process", "Task")},
           response_headers={202: ("Location",)})
@require("read")
@accepts(SEARCH_BODY)
def create_search(body: dict[str, Any]) -> Response:
    """Search the parallel layouts of a submission's quoted GPUs, in background tasks.

    The current revision of `submission` is searched as `quotecheck search` does: tensor × pipeline ×
    virtual stages × context × data × micro-batch × recompute × sharding × precision on the quoted GPU
    count, keeping the layouts that fit the memory budget, ranked by modelled step time. The answer is
    always 202 with the task (`Location`); the space is cut into chunks searched side by side by the
    workers, and `GET /api/v1/tasks/{id}` reports the chunks done, then the result: layouts searched and
    fitting, `best`, `submitted`, `top` and `submitted_vs_best`. A submission without a training workload,
    its architecture or a catalogued GPU has nothing to search (422 naming `/submission`); one the token
    may not see is 404. The same document, engine version and policy give the same task: a repeated
    request is answered with the task (and result) of the first, a failed one is run again.
    """
    return accepted(searches.request_search(current_actor(), body["submission"], now()))

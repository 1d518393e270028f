"""Health, readiness and the API's own description (OpenAPI document and HTML docs)."""

from __future__ import annotations

from flask import Blueprint, Response, current_app

from service.accounts.auth import public
from service.errors import ServiceUnavailable, problem_type, render_problem, with_retry_after
from service.http import json_response
from service.inputs import Query, accepts
from service.monitoring import readiness
from service.openapi import build_document, operation, render_docs

bp = Blueprint("meta", __name__)

_DOCUMENT = "quotecheck.openapi"


def openapi_document() -> dict:
    """Returns the app's OpenAPI document, built once (the URL map does not change after start-up)."""
    if _DOCUMENT not in current_app.extensions:
        current_app.extensions[_DOCUMENT] = build_document(current_app)
    return current_app.extensions[_DOCUMENT]


@bp.get("/healthz")
@operation(tag="meta", responses={200: ("The process is up", "Health")})
@public
def healthz() -> Response:
    """Report that the process is up (touches nothing else)."""
    return json_response({"status": "ok"})


READY_QUERY = Query({"type": "object", "properties": {
    "exclude": {"description": "a check to leave out (`workers`: the API serves reads while no worker runs; a load "
                               "balancer's probe may leave the workers to monitoring)",
                "type": "string", "enum": list(readiness.CHECKS)}}})


@bp.get("/readyz")
@operation(tag="meta", errors=(503,), responses={200: ("The database answers, and with a broker the broker and at "
                                                       "least one worker, and queued tasks are being started",
                                                       "Health")})
@public
@accepts(READY_QUERY)
def readyz(query: dict) -> Response:
    """Report whether this process can work now: the database, and with a broker the broker and a live worker.

    Every check that ran is in `checks` (the 503 problem carries them too); the workers' answer to a ping is
    kept for a few seconds (READINESS_CACHE_S). The workers check also fails, with `oldest_queued_s`, when a task
    has waited longer than READINESS_MAX_QUEUED_AGE_S to be started and no run was written meanwhile (read from the
    task table: workers that answer pings but consume nothing).
    """
    checks = readiness.check(frozenset([query["exclude"]]) if query["exclude"] else frozenset())
    failed = sorted(name for name, result in checks.items() if result["status"] != readiness.OK)
    if failed:
        return render_problem(503, problem_type(ServiceUnavailable.type_slug), ServiceUnavailable.title,
                              f"not ready: {', '.join(failed)} failed", headers=with_retry_after(503, None),
                              checks=checks)
    return json_response({"status": "ready", "checks": checks})


@bp.get("/api/v1/openapi.json")
@operation(tag="meta", responses={200: ("The OpenAPI 3.1 document", None)})
@public
def openapi_json() -> Response:
    """Read the OpenAPI 3.1 document, built from the routes this server serves."""
    return json_response(openapi_document())


@bp.get("/api/v1/docs")
@operation(tag="meta", media_type="text/html", responses={200: ("The API reference as one HTML page", None)})
@public
def docs() -> Response:
    """Read the API reference as a self-contained HTML page."""
    return Response(render_docs(openapi_document()), mimetype="text/html")

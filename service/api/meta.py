"""Health, readiness and the API's own description (OpenAPI document and HTML docs)."""

from __future__ import annotations

from flask import Blueprint, Response, current_app
from sqlalchemy.exc import SQLAlchemyError

from service.auth import public
from service.db import get_db
from service.errors import ServiceUnavailable
from service.http import json_response
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


@bp.get("/readyz")
@operation(tag="meta", errors=(503,), responses={200: ("The database answers", "Health")})
@public
def readyz() -> Response:
    """Report whether the database is reachable."""
    try:
        get_db().ping()
    except SQLAlchemyError as error:
        current_app.logger.warning("readiness check failed: %s", error)
        raise ServiceUnavailable("the database is not reachable") from None
    return json_response({"status": "ready"})


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

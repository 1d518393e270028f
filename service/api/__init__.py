"""The HTTP API: one blueprint per resource."""

from __future__ import annotations

from flask import Flask, request

from service.api import (
    addenda,
    comparisons,
    contract,
    exports,
    keys,
    meta,
    metrics,
    records,
    remedies,
    reviews,
    searches,
    submissions,
    tasks,
)
from service.api import webhooks as webhook_api
from service.errors import NotFound


def refuse_nul_in_path() -> None:
    """Answers 404 for a path holding U+0000 (``%00``): no resource is named so, and PostgreSQL cannot even
    compare such text with an id (psycopg refuses NUL), which would otherwise surface as a 500."""
    if "\x00" in request.path:
        raise NotFound("there is no resource whose URL contains U+0000 (%00)")


def init_app(app: Flask) -> None:
    """Registers every blueprint of the API."""
    app.before_request(refuse_nul_in_path)
    for blueprint in (submissions.bp, reviews.bp, records.bp, addenda.bp, comparisons.bp, searches.bp, remedies.bp,
                      tasks.bp, keys.bp, contract.bp, meta.bp, exports.bp, webhook_api.bp, metrics.bp):
        app.register_blueprint(blueprint)

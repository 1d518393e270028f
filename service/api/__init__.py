"""The HTTP API: one blueprint per resource."""

from __future__ import annotations

from flask import Flask

from service.api import comparisons, contract, keys, meta, records, reviews, submissions, tasks


def init_app(app: Flask) -> None:
    """Registers every blueprint of the API."""
    for blueprint in (submissions.bp, reviews.bp, records.bp, comparisons.bp, tasks.bp, keys.bp, contract.bp, meta.bp):
        app.register_blueprint(blueprint)

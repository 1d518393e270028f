"""GET /metrics: the service's Prometheus metrics (service/monitoring/metrics.py), for a scraper that holds a token."""

from __future__ import annotations

import hmac
from functools import wraps
from typing import Any

from flask import Blueprint, Response, current_app, request

from service.accounts.auth import require
from service.monitoring import metrics
from service.openapi import operation

bp = Blueprint("metrics", __name__)


def scraper_or_admin(view: Any) -> Any:
    """Returns ``view`` open to ``Authorization: Bearer <METRICS_TOKEN>`` (when set) and to admin API tokens.

    The metrics token is compared in constant time and needs no database, so a scrape still answers while the
    database is down (the metrics then say so); an admin's API token is checked as on every other endpoint.
    """
    guarded = require("read-metrics")(view)

    @wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        token = current_app.config.get("METRICS_TOKEN")
        sent = request.headers.get("Authorization", "").encode()
        if token and hmac.compare_digest(sent, f"Bearer {token}".encode()):
            return view(*args, **kwargs)
        return guarded(*args, **kwargs)

    wrapped.openapi = guarded.openapi  # type: ignore[attr-defined]
    return wrapped


@bp.get("/metrics")
@operation(tag="meta", media_type="text/plain",
           responses={200: ("The metrics in the Prometheus text format (version 0.0.4)", None)})
@scraper_or_admin
def get_metrics() -> Response:
    """Read the service's metrics in the Prometheus text format.

    Requests and latency by route, evaluations by verdict, check results by check and status, tasks by kind
    and state with the time from request to end of the finished ones, the broker queue's depth and the
    webhook outbox by state. Send `Authorization: Bearer <METRICS_TOKEN>` (the scraper's token, when the
    setting is set) or an admin's API token.
    """
    return Response(metrics.exposition(), mimetype=None, content_type=metrics.MEDIA_TYPE)

"""Webhooks: admins subscribe URLs to workflow events and read each subscription's delivery log.

Only admins manage webhooks: a subscription makes the service send requests to a URL of its creator's
choosing, from the service's network position (docs/webhooks.md, "SSRF").
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, url_for

from service.accounts.auth import current_actor, require
from service.api_schemas.webhooks import DELIVERY_STATES, WEBHOOK_REQUEST
from service.app import webhooks
from service.http import json_response, now
from service.inputs import Body, Query, accepts
from service.openapi import operation

bp = Blueprint("webhooks", __name__, url_prefix="/api/v1/webhooks")

WEBHOOK_BODY = Body("WebhookRequest", "webhook", WEBHOOK_REQUEST)
MAX_PAGE = 1_000_000
DELIVERIES_QUERY = Query({"type": "object", "properties": {
    "state": {"description": "only deliveries in this state", "enum": list(DELIVERY_STATES)},
    "page": {"description": "page number, from 1", "type": "integer", "minimum": 1, "maximum": MAX_PAGE,
             "default": 1},
    "per_page": {"description": "items per page", "type": "integer", "minimum": 1},
}}, configured={"per_page": {"maximum": "MAX_PAGE_SIZE", "default": "DEFAULT_PAGE_SIZE"}})


@bp.post("")
@operation(tag="webhooks", responses={201: ("Subscribed; the secret is shown this once", "WebhookCreated")},
           response_headers={201: ("Location",)})
@require("manage-webhooks")
@accepts(WEBHOOK_BODY)
def create_webhook(body: dict[str, Any]) -> Response:
    """Subscribe a URL to workflow events; returns the subscription with its signing secret, shown this once.

    Each event is POSTed as JSON, signed as Standard Webhooks sign (`webhook-id`, `webhook-timestamp`,
    `webhook-signature: v1,<base64 HMAC-SHA256 of id.timestamp.body>` with the secret), and retried with
    backoff until the receiver answers 2xx (docs/webhooks.md). The URL must be http or https, name a host,
    and carry no credentials or fragment.
    """
    view = webhooks.subscribe(current_actor(), body["url"], body["events"], body.get("description"), now())
    return json_response(view, 201, {"Location": view["links"]["self"]})


@bp.get("")
@operation(tag="webhooks", responses={200: ("The subscriptions, oldest first", "WebhookList")})
@require("manage-webhooks")
def list_webhooks() -> Response:
    """List the webhook subscriptions (never their secrets), each with its deliveries counted by state."""
    return json_response({"items": webhooks.list_webhooks()})


@bp.get("/<int:webhook_id>")
@operation(tag="webhooks", errors=(404,), responses={200: ("The subscription", "Webhook")})
@require("manage-webhooks")
def get_webhook(webhook_id: int) -> Response:
    """Read a webhook subscription (without its secret)."""
    return json_response(webhooks.read_webhook(webhook_id))


@bp.delete("/<int:webhook_id>")
@operation(tag="webhooks", errors=(404,), responses={204: ("Deleted; its pending deliveries are cancelled", None)})
@require("manage-webhooks")
def delete_webhook(webhook_id: int) -> Response:
    """Delete a webhook subscription: nothing more is sent to it, and its pending deliveries are cancelled.

    Its delivery log stays in the database (the audit log records the deletion); the API no longer serves it.
    """
    webhooks.unsubscribe(current_actor(), webhook_id, now())
    return Response(status=204)


@bp.get("/<int:webhook_id>/deliveries")
@operation(tag="webhooks", errors=(404,),
           responses={200: ("A page of the subscription's deliveries, newest first", "WebhookDeliveryPage")})
@require("manage-webhooks")
@accepts(DELIVERIES_QUERY)
def list_deliveries(webhook_id: int, query: dict[str, Any]) -> Response:
    """Read a subscription's delivery log: every event sent to it, its state, and each attempt's outcome.

    A delivery is `pending` (due at `next_attempt_at`), `delivered` (a 2xx answer), `failed` (every attempt
    failed) or `cancelled` (the subscription was deleted first); `log` lists its attempts with the receiver's
    status code or the error.
    """
    page, per_page = query["page"], query["per_page"]
    total, items = webhooks.deliveries(webhook_id, query["state"], page, per_page)

    def page_url(number: int) -> str:
        filters = {"state": query["state"]} if query["state"] else {}
        return url_for("webhooks.list_deliveries", webhook_id=webhook_id, **filters, page=number, per_page=per_page)

    links = {"self": page_url(page)}
    if page * per_page < total:
        links["next"] = page_url(page + 1)
    if page > 1:
        links["prev"] = page_url(page - 1)
    return json_response({"webhook_id": webhook_id, "items": items, "page": page, "per_page": per_page,
                          "total": total, "links": links})

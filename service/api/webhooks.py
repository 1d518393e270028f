"""Webhooks: admins subscribe URLs to workflow events and read each subscription's delivery log.

Only admins manage webhooks: a subscription makes the service send requests to a URL of its creator's
choosing, from the service's network position (docs/webhooks.md, "SSRF").
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, url_for
from sqlmodel import Session, col, func, select

from service.accounts.auth import current_actor, require
from service.api_schemas.webhooks import DELIVERY_STATES, WEBHOOK_REQUEST
from service.http import json_response, now
from service.inputs import Body, Query, accepts
from service.openapi import operation
from service.persistence.audit import timestamp
from service.persistence.db import get_db
from service.persistence.webhook_models import WebhookAttempt, WebhookDelivery, WebhookSubscription
from service.webhooks import subscriptions as webhooks

bp = Blueprint("webhooks", __name__, url_prefix="/api/v1/webhooks")

WEBHOOK_BODY = Body("WebhookRequest", "webhook", WEBHOOK_REQUEST)
MAX_PAGE = 1_000_000
DELIVERIES_QUERY = Query({"type": "object", "properties": {
    "state": {"description": "only deliveries in this state", "enum": list(DELIVERY_STATES)},
    "page": {"description": "page number, from 1", "type": "integer", "minimum": 1, "maximum": MAX_PAGE,
             "default": 1},
    "per_page": {"description": "items per page", "type": "integer", "minimum": 1},
}}, configured={"per_page": {"maximum": "MAX_PAGE_SIZE", "default": "DEFAULT_PAGE_SIZE"}})


def _time(moment: Any) -> str | None:
    return timestamp(moment) if moment is not None else None


def webhook_view(session: Session, subscription: WebhookSubscription) -> dict[str, Any]:
    """Returns a subscription without its secret, with the count of its deliveries in each state."""
    counts = dict(session.exec(select(WebhookDelivery.state, func.count())
                               .where(WebhookDelivery.subscription_id == subscription.id)
                               .group_by(col(WebhookDelivery.state))).all())
    return {"id": subscription.id, "url": subscription.url, "events": subscription.events,
            "description": subscription.description, "created_by": subscription.created_by,
            "created_at": timestamp(subscription.created_at),
            "deliveries": {state: counts.get(state, 0) for state in DELIVERY_STATES},
            "links": {"self": url_for("webhooks.get_webhook", webhook_id=subscription.id),
                      "deliveries": url_for("webhooks.list_deliveries", webhook_id=subscription.id)}}


def delivery_view(delivery: WebhookDelivery, attempts: list[WebhookAttempt]) -> dict[str, Any]:
    """Returns a delivery with the log of its attempts."""
    return {"id": delivery.id, "event_id": delivery.event_id, "event_type": delivery.event_type,
            "state": delivery.state, "attempts": delivery.attempts, "next_attempt_at": _time(delivery.next_attempt_at),
            "last_status_code": delivery.last_status_code, "last_error": delivery.last_error,
            "submission_id": delivery.submission_id, "audit_event_id": delivery.audit_event_id,
            "created_at": timestamp(delivery.created_at), "delivered_at": _time(delivery.delivered_at),
            "log": [{"number": a.number, "attempted_at": timestamp(a.attempted_at), "duration_ms": a.duration_ms,
                     "status_code": a.status_code, "error": a.error} for a in attempts]}


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
    with get_db().session() as session:
        subscription = webhooks.create_subscription(session, current_actor(), body["url"], body["events"],
                                                    body.get("description"), now())
        view = {**webhook_view(session, subscription), "secret": subscription.secret}
        session.commit()
    return json_response(view, 201, {"Location": view["links"]["self"]})


@bp.get("")
@operation(tag="webhooks", responses={200: ("The subscriptions, oldest first", "WebhookList")})
@require("manage-webhooks")
def list_webhooks() -> Response:
    """List the webhook subscriptions (never their secrets), each with its deliveries counted by state."""
    with get_db().session() as session:
        items = [webhook_view(session, s) for s in webhooks.active_subscriptions(session)]
    return json_response({"items": items})


@bp.get("/<int:webhook_id>")
@operation(tag="webhooks", errors=(404,), responses={200: ("The subscription", "Webhook")})
@require("manage-webhooks")
def get_webhook(webhook_id: int) -> Response:
    """Read a webhook subscription (without its secret)."""
    with get_db().session() as session:
        return json_response(webhook_view(session, webhooks.get_subscription(session, webhook_id)))


@bp.delete("/<int:webhook_id>")
@operation(tag="webhooks", errors=(404,), responses={204: ("Deleted; its pending deliveries are cancelled", None)})
@require("manage-webhooks")
def delete_webhook(webhook_id: int) -> Response:
    """Delete a webhook subscription: nothing more is sent to it, and its pending deliveries are cancelled.

    Its delivery log stays in the database (the audit log records the deletion); the API no longer serves it.
    """
    with get_db().session() as session:
        webhooks.delete_subscription(session, current_actor(), webhook_id, now())
        session.commit()
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
    conditions = [col(WebhookDelivery.subscription_id) == webhook_id]
    if query["state"]:
        conditions.append(col(WebhookDelivery.state) == query["state"])
    with get_db().session() as session:
        webhooks.get_subscription(session, webhook_id)
        total = session.exec(select(func.count()).select_from(WebhookDelivery).where(*conditions)).one()
        rows = session.exec(select(WebhookDelivery).where(*conditions)
                            .order_by(col(WebhookDelivery.created_at).desc(), col(WebhookDelivery.id))
                            .offset((page - 1) * per_page).limit(per_page)).all()
        attempts: dict[str, list[WebhookAttempt]] = {row.id: [] for row in rows}
        for attempt in session.exec(select(WebhookAttempt).where(col(WebhookAttempt.delivery_id).in_(list(attempts)))
                                    .order_by(col(WebhookAttempt.number))):
            attempts[attempt.delivery_id].append(attempt)
        items = [delivery_view(row, attempts[row.id]) for row in rows]

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

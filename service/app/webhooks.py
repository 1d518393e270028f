"""Webhooks: subscriptions to workflow events, their delivery logs, and sending the deliveries due.

The API (``/api/v1/webhooks``, admins only) manages subscriptions here; the command line (``quotecheck webhook
deliver``) and the worker's task (``quotecheck.deliver_webhooks``) drain the outbox here
(service/webhooks/delivery.py).
"""

from __future__ import annotations

from typing import Any

from flask import current_app, url_for
from sqlmodel import Session, col, func, select

from service.accounts.actors import Actor
from service.api_schemas.webhooks import DELIVERY_STATES
from service.persistence.audit import timestamp
from service.persistence.db import get_db
from service.persistence.webhook_models import WebhookAttempt, WebhookDelivery, WebhookSubscription
from service.webhooks import subscriptions
from service.webhooks.delivery import DrainReport, Outbox


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


def subscribe(actor: Actor, url: str, events: list[str], description: str | None, now: Any) -> dict[str, Any]:
    """Stores a subscription and returns it with its signing secret (shown this once)."""
    with get_db().session() as session:
        subscription, secret = subscriptions.create_subscription(session, actor, url, events, description, now)
        view = {**webhook_view(session, subscription), "secret": secret}
        session.commit()
    return view


def list_webhooks() -> list[dict[str, Any]]:
    """Returns the active subscriptions, oldest first, without their secrets."""
    with get_db().session() as session:
        return [webhook_view(session, s) for s in subscriptions.active_subscriptions(session)]


def read_webhook(webhook_id: int) -> dict[str, Any]:
    """Returns a subscription without its secret; NotFound when there is none."""
    with get_db().session() as session:
        return webhook_view(session, subscriptions.get_subscription(session, webhook_id))


def unsubscribe(actor: Actor, webhook_id: int, now: Any) -> None:
    """Deletes a subscription and cancels its pending deliveries (the audit log records it)."""
    with get_db().session() as session:
        subscriptions.delete_subscription(session, actor, webhook_id, now)
        session.commit()


def deliveries(webhook_id: int, state: str | None, page: int, per_page: int) -> tuple[int, list[dict[str, Any]]]:
    """Returns how many deliveries of a subscription are in ``state`` (None: any) and page ``page`` of them,
    newest first, each with the log of its attempts; NotFound when there is no such subscription."""
    conditions = [col(WebhookDelivery.subscription_id) == webhook_id]
    if state:
        conditions.append(col(WebhookDelivery.state) == state)
    with get_db().session() as session:
        subscriptions.get_subscription(session, webhook_id)
        total = session.exec(select(func.count()).select_from(WebhookDelivery).where(*conditions)).one()
        rows = session.exec(select(WebhookDelivery).where(*conditions)
                            .order_by(col(WebhookDelivery.created_at).desc(), col(WebhookDelivery.id))
                            .offset((page - 1) * per_page).limit(per_page)).all()
        attempts: dict[str, list[WebhookAttempt]] = {row.id: [] for row in rows}
        for attempt in session.exec(select(WebhookAttempt).where(col(WebhookAttempt.delivery_id).in_(list(attempts)))
                                    .order_by(col(WebhookAttempt.number))):
            attempts[attempt.delivery_id].append(attempt)
        return total, [delivery_view(row, attempts[row.id]) for row in rows]


def reseal_secrets() -> int:
    """Returns how many webhook secrets were sealed again under the current WEBHOOK_SECRET_KEY (after a rotation)."""
    with get_db().session() as session:
        resealed = subscriptions.reseal_secrets(session)
        session.commit()
    return resealed


def deliver_due() -> DrainReport:
    """Sends every webhook delivery due now (first attempts and retries) and says what happened; safe to repeat
    and to run in several processes at once (each delivery is claimed before it is sent)."""
    return Outbox(get_db(), current_app.config).drain()

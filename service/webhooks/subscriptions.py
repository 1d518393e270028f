"""Webhooks: admins subscribe URLs to workflow events, which are written to an outbox with their audit events.

Every audit event is offered here as it is appended (``signals.audit_appended``, sent by ``audit.append``
inside the caller's transaction). An event a subscription names becomes one ``webhook_delivery`` row per
subscription in that same transaction: it commits with the audit event or not at all (a transactional
outbox), so no event is announced that did not happen and none that happened is lost. After the commit the
outbox is drained (service/webhooks/delivery.py): by the task queue's ``quotecheck.deliver_webhooks`` task, in
the API process when there is no broker. docs/webhooks.md describes the events, the body and the signature.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, current_app, has_app_context
from sqlalchemy import event as sqlalchemy_event
from sqlalchemy import update
from sqlmodel import Session, col, select

from rules.errors import Problem
from service.accounts.actors import Actor
from service.errors import InvalidRequest, NotFound
from service.identifiers import new_id
from service.persistence.audit import append, timestamp
from service.persistence.models import AuditEvent, Submission
from service.persistence.webhook_models import WebhookDelivery, WebhookSubscription
from service.signals import audit_appended
from service.tasks import tasks_port
from service.webhooks.addresses import IpNetwork, allowed_networks, host_refusal
from service.webhooks.secret_box import secret_box, validate_settings

logger = logging.getLogger(__name__)

# The events a subscription may name, and what each reports.
EVENT_TYPES = {
    "submission.submitted": "a new quote was submitted and evaluated (the body carries its verdict)",
    "submission.revised": "a revised quote was submitted and evaluated",
    "waiver.added": "a reviewer waived a check result",
    "submission.changes_requested": "a reviewer or approver asked the vendor for a revised quote",
    "submission.approved": "the quote was approved (its final record is issued, signed)",
    "submission.rejected": "the quote was rejected",
    "purchase_order.linked": "a purchase order was linked to the approved record (a new issue of it)",
}
# Audit actions that are reported as they are; evaluation.completed and decision.approve depend on the state.
_BY_ACTION = {"waiver.created": "waiver.added", "decision.request-changes": "submission.changes_requested",
              "decision.reject": "submission.rejected", "purchase_order.linked": "purchase_order.linked"}
_BY_EVALUATED_STATE = {"submitted": "submission.submitted", "revised": "submission.revised"}

PENDING, DELIVERED, FAILED, CANCELLED = "pending", "delivered", "failed", "cancelled"
SECRET_PREFIX = "whsec_"  # Standard Webhooks' form of a secret: the prefix and the key in base64
SECRET_BYTES = 24
MAX_URL_LENGTH = 2000
SCHEMES = ("http", "https")
_DRAIN_PENDING = "quotecheck.webhooks.drain_after_commit"


def event_type_of(event: AuditEvent) -> str | None:
    """Returns the webhook event an audit event reports, or None when it reports none.

    A quote counts as submitted (or revised) when its evaluation is stored, so the body carries its verdict;
    an approval counts when it makes the quote approved (the last approver the policy requires).
    """
    if event.action == "evaluation.completed":
        return _BY_EVALUATED_STATE.get(event.before_state or "")
    if event.action == "decision.approve":
        return "submission.approved" if event.after_state == "approved" else None
    return _BY_ACTION.get(event.action)


def new_secret() -> str:
    """Returns a new subscription secret: ``whsec_`` and 24 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def url_problems(url: str, allowed: Sequence[IpNetwork] = ()) -> list[Problem]:
    """Returns what makes ``url`` unfit for a webhook: not http(s), no host, credentials, a fragment, a bad port, a
    host that is this host or a metadata service (service/webhooks/addresses.py)."""
    problems = []
    parts = urlsplit(url)
    refused = host_refusal(parts.hostname, allowed) if parts.hostname else None
    if refused is not None:
        problems.append(Problem("/url", f"webhooks may not be sent to {refused}: the service would post from "
                                        "inside its own network (server-side request forgery)"))
    if parts.scheme not in SCHEMES:
        problems.append(Problem("/url", f"the scheme must be http or https, found {parts.scheme or 'none'!r}"))
    if not parts.hostname:
        problems.append(Problem("/url", "the URL names no host"))
    if parts.username is not None or parts.password is not None:
        problems.append(Problem("/url", "the URL must not carry credentials (they would show in every listing); "
                                        "authenticate the sender by the signature instead"))
    if parts.fragment:
        problems.append(Problem("/url", "the URL must not have a fragment (#…): it is never sent"))
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as error:
        problems.append(Problem("/url", f"the port is not valid: {error}"))
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        problems.append(Problem("/url", "the URL must not contain blanks or control characters"))
    return problems


def origin(url: str) -> str:
    """Returns the scheme, host and port of ``url``: what the audit log keeps (a path may hold a receiver's token)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


# --- subscriptions -------------------------------------------------------------------------------------------

def create_subscription(session: Session, actor: Actor, url: str, events: list[str], description: str | None,
                        now: datetime) -> tuple[WebhookSubscription, str]:
    """Returns the stored subscription, audited as webhook.created, and its signing secret in plain text (shown to
    the caller once; the row keeps it encrypted). ConfigurationError when no key may encrypt it."""
    refuse = url_problems(url, allowed_networks(current_app.config.get("WEBHOOK_ALLOWED_NETWORKS", ())))
    if refuse:
        raise InvalidRequest("the webhook URL is not acceptable", refuse)
    secret = new_secret()
    key_id, sealed = secret_box().seal(secret)
    subscription = WebhookSubscription(url=url, events=list(events), description=description, secret=sealed,
                                       secret_key_id=key_id, created_by=actor.name, created_at=now)
    session.add(subscription)
    session.flush()
    append(session, action="webhook.created", actor=actor, occurred_at=now,
           detail={"webhook_id": subscription.id, "origin": origin(url), "events": list(events)})
    return subscription, secret


def active_subscriptions(session: Session) -> list[WebhookSubscription]:
    """Returns the subscriptions not deleted, oldest first."""
    return list(session.exec(select(WebhookSubscription).where(col(WebhookSubscription.deleted_at).is_(None))
                             .order_by(col(WebhookSubscription.id))).all())


# Subscription ids are an INTEGER column (32-bit in PostgreSQL).
MAX_SUBSCRIPTION_ID = 2**31 - 1


def get_subscription(session: Session, webhook_id: int) -> WebhookSubscription:
    """Returns the subscription ``webhook_id``; NotFound when there is none, or it was deleted."""
    if not 1 <= webhook_id <= MAX_SUBSCRIPTION_ID:
        # No such row, and the database could not even compare it (PostgreSQL INTEGER, SQLite 64-bit): 404, not 500.
        raise NotFound(f"there is no webhook {webhook_id}")
    subscription = session.get(WebhookSubscription, webhook_id)
    if subscription is None or subscription.deleted_at is not None:
        raise NotFound(f"there is no webhook {webhook_id}")
    return subscription


def delete_subscription(session: Session, actor: Actor, webhook_id: int, now: datetime) -> int:
    """Returns how many pending deliveries were cancelled after deleting subscription ``webhook_id`` (audited)."""
    subscription = get_subscription(session, webhook_id)
    subscription.deleted_at = now
    session.add(subscription)
    cancelled = session.execute(
        update(WebhookDelivery).where(col(WebhookDelivery.subscription_id) == webhook_id,
                                      col(WebhookDelivery.state) == PENDING)
        .values(state=CANCELLED, next_attempt_at=None, last_error="the subscription was deleted")
        .execution_options(synchronize_session=False)).rowcount
    append(session, action="webhook.deleted", actor=actor, occurred_at=now,
           detail={"webhook_id": webhook_id, "origin": origin(subscription.url), "cancelled_deliveries": cancelled})
    return cancelled


def reseal_secrets(session: Session) -> int:
    """Returns how many subscriptions' secrets (deleted ones included) were sealed again under the current key:
    those another key sealed, each opened with its own key (WEBHOOK_SECRET_PREVIOUS_KEYS) first."""
    box = secret_box()
    resealed = 0
    for subscription in session.exec(select(WebhookSubscription)
                                     .where(col(WebhookSubscription.secret_key_id) != box.current_id)):
        secret = box.open(subscription.secret_key_id, subscription.secret, f"the secret of webhook {subscription.id}")
        subscription.secret_key_id, subscription.secret = box.seal(secret)
        session.add(subscription)
        resealed += 1
    return resealed


# --- the outbox ----------------------------------------------------------------------------------------------

def event_body(session: Session, event: AuditEvent, event_type: str, event_id: str) -> dict[str, Any]:
    """Returns the JSON body of a webhook event: what happened, to which submission, by whom, and its audit event."""
    body: dict[str, Any] = {"id": event_id, "type": event_type, "occurred_at": timestamp(event.occurred_at)}
    if event.submission_id is not None:
        # Read as columns, not through the session's identity map: the workflow updates the row in SQL.
        row = session.exec(select(Submission.state, Submission.revision, Submission.vendor, Submission.quote_id,
                                  Submission.verdict).where(Submission.id == event.submission_id)).first()
        state, revision, vendor, quote_id, verdict = row if row is not None else (None,) * 5
        body["submission"] = {"id": event.submission_id, "state": state, "revision": revision, "vendor": vendor,
                              "quote_id": quote_id, "verdict": verdict,
                              "path": f"/api/v1/submissions/{event.submission_id}"}
    record_id = (event.detail or {}).get("record_id")
    if record_id:
        body["record"] = {"id": record_id, "digest": event.detail.get("record_digest"),
                          "path": f"/api/v1/records/{record_id}.json"}
    body["actor"] = {"name": event.actor, "role": event.actor_role} if event.actor else None
    body["audit_event"] = {"id": event.id, "action": event.action, "hash": event.hash}
    body["detail"] = event.detail or {}
    return body


_SUBSCRIPTIONS = WebhookSubscription.__table__  # type: ignore[attr-defined]
# The id and events of each subscription not deleted, oldest first: what an event's enqueue decides on. On the
# table, not the model: every audit event asks, and loading no objects costs less than the ORM's query path.
_ACTIVE_EVENTS = (select(_SUBSCRIPTIONS.c.id, _SUBSCRIPTIONS.c.events).where(_SUBSCRIPTIONS.c.deleted_at.is_(None))
                  .order_by(_SUBSCRIPTIONS.c.id))


def enqueue(session: Session, event: AuditEvent) -> list[WebhookDelivery]:
    """Returns the deliveries of ``event`` written to the outbox in the caller's transaction, one per subscription."""
    event_type = event_type_of(event)
    if event_type is None:
        return []
    subscriptions = [subscription_id for subscription_id, events in session.connection().execute(_ACTIVE_EVENTS)
                     if event_type in events]
    if not subscriptions:
        return []
    event_id = new_id()
    text = json.dumps(event_body(session, event, event_type, event_id), ensure_ascii=False, separators=(",", ":"))
    deliveries = [WebhookDelivery(id=new_id(), subscription_id=s, event_id=event_id, event_type=event_type,
                                  audit_event_id=event.id, submission_id=event.submission_id, body=text,
                                  state=PENDING, attempts=0, next_attempt_at=event.occurred_at,
                                  created_at=event.occurred_at) for s in subscriptions]
    session.add_all(deliveries)
    session.flush()
    _drain_after_commit(session)
    return deliveries


def _on_audit_appended(session: Session, event: AuditEvent) -> None:
    enqueue(session, event)


audit_appended.connect(_on_audit_appended)


def _drain_after_commit(session: Session) -> None:
    """Asks for the outbox to be drained once this session's transaction has committed (never before)."""
    if session.info.get(_DRAIN_PENDING):
        return
    session.info[_DRAIN_PENDING] = True
    sqlalchemy_event.listen(session, "after_commit", _request_drain, once=True)


def _request_drain(session: Session) -> None:
    # Called after the commit: whatever goes wrong here must not turn a committed request into an error. The
    # deliveries wait in the outbox for the next drain (the periodic one, or `quotecheck webhook deliver`).
    session.info.pop(_DRAIN_PENDING, None)
    if not has_app_context():
        return
    queue = current_app.extensions.get(tasks_port.EXTENSION)
    if queue is None:
        return
    try:
        queue.send(tasks_port.DELIVER_WEBHOOKS, [], new_id())
    except Exception:
        logger.warning("could not queue %s; the outbox keeps the deliveries for the next drain",
                       tasks_port.DELIVER_WEBHOOKS, exc_info=True)


# The settings of deliveries, each a positive number (docs/settings.md).
SETTINGS = ("WEBHOOK_TIMEOUT_S", "WEBHOOK_MAX_ATTEMPTS", "WEBHOOK_BACKOFF_BASE_S", "WEBHOOK_BACKOFF_MAX_S",
            "WEBHOOK_DRAIN_INTERVAL_S")


def init_app(app: Flask) -> None:
    """Checks the webhook settings, so a bad one stops the start rather than the first delivery."""
    for name in SETTINGS:
        value = app.config[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise InvalidRequest(f"{name} must be a positive number, found {value!r}")
    attempts = app.config["WEBHOOK_MAX_ATTEMPTS"]
    if not isinstance(attempts, int):
        raise InvalidRequest(f"WEBHOOK_MAX_ATTEMPTS must be a whole number, found {attempts!r}")
    validate_settings(app.config)
    networks = app.config["WEBHOOK_ALLOWED_NETWORKS"]
    try:
        if isinstance(networks, str) or not all(isinstance(value, str) for value in networks):
            raise ValueError("not a list of strings")
        allowed_networks(networks)
    except (TypeError, ValueError) as error:
        raise InvalidRequest(f"WEBHOOK_ALLOWED_NETWORKS must be a list of CIDR networks such as [\"10.20.0.0/16\"], "
                             f"found {networks!r} ({error})") from None

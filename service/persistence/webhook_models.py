"""The SQLModel tables of the webhook outbox (service/webhooks/subscriptions.py, service/webhooks/delivery.py).

Kept beside service/persistence/models.py, whose conventions they follow; service/migrations/env.py imports both.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from service.persistence.models import SUBMISSION_FK


class WebhookSubscription(SQLModel, table=True):
    """An admin's webhook: the URL that is sent the events it names, signed with its secret
    (service/webhooks/subscriptions.py).

    ``secret`` is the signing secret sealed (AES-256-GCM) with the key ``secret_key_id`` names
    (service/webhooks/secret_box.py): the service signs with it, so it keeps it encrypted, not hashed, and never
    in plain text. A deleted subscription keeps its row and delivery log, ``deleted_at`` set, and is sent nothing
    more.
    """

    __tablename__ = "webhook_subscription"

    id: int | None = Field(default=None, primary_key=True)
    url: str = Field(max_length=2000)
    events: list[str] = Field(sa_type=JSON)
    description: str | None = Field(default=None, max_length=200)
    secret: str = Field(max_length=200)
    secret_key_id: str = Field(max_length=64)
    created_by: str = Field(max_length=200)
    created_at: datetime
    deleted_at: datetime | None = None


class WebhookDelivery(SQLModel, table=True):
    """One event for one subscription in the outbox, written in the transaction of the audit event it reports.

    ``id`` is the ``webhook-id`` header, the same on every attempt (receivers drop repeats by it); ``event_id``
    is the body's ``id``, shared by the deliveries of one event to several subscriptions. ``body`` is the JSON
    text every attempt sends, byte for byte. ``state``: pending → delivered, or failed after the last attempt,
    or cancelled when the subscription is deleted first; ``next_attempt_at`` is when a pending one is due.
    """

    __tablename__ = "webhook_delivery"
    __table_args__ = (Index("ix_webhook_delivery_due", "state", "next_attempt_at"),)

    id: str = Field(primary_key=True, max_length=36)
    subscription_id: int = Field(foreign_key="webhook_subscription.id", index=True)
    event_id: str = Field(max_length=36)
    event_type: str = Field(max_length=64)
    audit_event_id: int = Field(foreign_key="audit_event.id")
    submission_id: str | None = Field(default=None, foreign_key=SUBMISSION_FK, max_length=36)
    body: str = Field(sa_type=Text)
    state: str = Field(max_length=16)
    attempts: int = 0
    next_attempt_at: datetime | None = None
    last_status_code: int | None = None
    last_error: str | None = Field(default=None, max_length=500)
    created_at: datetime
    delivered_at: datetime | None = None


class WebhookAttempt(SQLModel, table=True):
    """One attempt to send a delivery: when, how long it took, and the receiver's status code or the error."""

    __tablename__ = "webhook_attempt"
    __table_args__ = (UniqueConstraint("delivery_id", "number"),)

    id: int | None = Field(default=None, primary_key=True)
    delivery_id: str = Field(foreign_key="webhook_delivery.id", max_length=36, index=True)
    number: int
    attempted_at: datetime
    duration_ms: int
    status_code: int | None = None
    error: str | None = Field(default=None, max_length=500)

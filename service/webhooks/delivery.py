"""Draining the webhook outbox: each due delivery is claimed, signed, sent, and its attempt logged.

A delivery is claimed with a lease (service/persistence/leases.py: ``UPDATE … SET attempts = attempts + 1,
next_attempt_at = now + lease WHERE id = … AND state = 'pending' AND next_attempt_at <= now``): of two drains that
see it due, one sends it. A drain that dies mid-send leaves it pending, due again when the lease ends. A 2xx answer
delivers it; anything else (another status, a redirect, which is never followed, a refused connection, a
timeout) is a failed attempt, retried after an exponential backoff read from the app's clock, until
WEBHOOK_MAX_ATTEMPTS attempts failed. Signatures follow Standard Webhooks (``webhook-id``,
``webhook-timestamp``, ``webhook-signature: v1,<base64 HMAC-SHA256>``), as docs/webhooks.md explains.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import update
from sqlmodel import col, select

from service.config import clock_of
from service.errors import ConfigurationError
from service.persistence import leases
from service.persistence.db import Database
from service.persistence.webhook_models import WebhookAttempt, WebhookDelivery, WebhookSubscription
from service.webhooks.addresses import IpNetwork, allowed_networks, resolved_refusal
from service.webhooks.secret_box import SecretBox, secret_box
from service.webhooks.subscriptions import CANCELLED, DELIVERED, FAILED, PENDING, SECRET_PREFIX

logger = logging.getLogger(__name__)
# A claimed delivery is due again this long after its send's timeout, should its drain have died meanwhile.
CLAIM_MARGIN_S = 60
DRAIN_BATCH = 100
MAX_ERROR_LENGTH = 500
USER_AGENT = "quotecheck-webhooks/1"


def signature(secret: str, message_id: str, timestamp_s: int, body: bytes) -> str:
    """Returns the ``webhook-signature`` value: ``v1,`` and the base64 HMAC-SHA256 of ``id.timestamp.body``.

    The key is the secret's bytes (its base64 after ``whsec_``), as Standard Webhooks signs.
    """
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp_s}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def signed_headers(delivery: WebhookDelivery, secret: str, moment: datetime) -> dict[str, str]:
    """Returns the headers of one attempt to send ``delivery``: content type, event, id, timestamp, signature."""
    timestamp_s = int(moment.timestamp())
    return {"Content-Type": "application/json", "User-Agent": USER_AGENT,
            "X-Quotecheck-Event": delivery.event_type, "webhook-id": delivery.id,
            "webhook-timestamp": str(timestamp_s),
            "webhook-signature": signature(secret, delivery.id, timestamp_s, delivery.body.encode("utf-8"))}


def backoff_s(attempts: int, base_s: float, max_s: float) -> float:
    """Returns the wait after the ``attempts``-th failed attempt: ``base_s`` doubled per attempt, at most ``max_s``."""
    return min(base_s * 2 ** (attempts - 1), max_s)


@dataclass(frozen=True)
class Outcome:
    """What one attempt got: the receiver's status code, or the error that kept it from answering."""

    status_code: int | None
    error: str | None
    duration_ms: int

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def destination_refusal(url: str, allowed: Sequence[IpNetwork] = ()) -> str | None:
    """Returns why ``url`` may not receive a POST now (its host, or an address its name resolves to), else None."""
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return resolved_refusal(parts.hostname, port, allowed)


# The longest a watchdog waits for the sending thread after closing its socket at the deadline.
_CLOSE_GRACE_S = 1.0


def send(url: str, headers: Mapping[str, str], body: bytes, timeout_s: float) -> Outcome:
    """Returns the outcome of POSTing ``body`` to ``url`` (never raises for what the network or receiver does).

    ``timeout_s`` bounds the whole attempt, connecting, sending and reading the answer together, not each socket
    read: a receiver that answers one byte every few seconds would otherwise hold the worker for as long as it
    likes. The POST runs in a thread; at the deadline the watchdog shuts its socket down, which ends any read.
    http.client sends where the URL says (no proxy from the environment) and follows no redirect (a redirect is
    the receiver's answer, a failed attempt); only the status code is kept, never the body.
    """
    started = time.monotonic()

    def elapsed_ms() -> int:
        return int((time.monotonic() - started) * 1000)

    parts = urlsplit(url)
    try:
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        connection = kind(parts.hostname or "", parts.port, timeout=timeout_s)
    except (ValueError, http.client.HTTPException) as error:
        return Outcome(None, f"{type(error).__name__}: {error}"[:MAX_ERROR_LENGTH], elapsed_ms())
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    result: dict[str, Any] = {}

    def post() -> None:
        try:
            connection.request("POST", target, body=body, headers=dict(headers))
            response = connection.getresponse()
            result["answer"] = (response.status, response.reason)
            response.close()
        except (OSError, http.client.HTTPException, ValueError) as error:
            result["error"] = error

    worker = threading.Thread(target=post, name="webhook-post", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        _shut(connection)
        worker.join(_CLOSE_GRACE_S)
        return Outcome(None, f"TimeoutError: no complete answer within {timeout_s:g} s"[:MAX_ERROR_LENGTH],
                       elapsed_ms())
    connection.close()
    if "answer" in result:
        status, reason = result["answer"]
        if 200 <= status < 300:
            return Outcome(status, None, elapsed_ms())
        words = "redirects are not followed" if 300 <= status < 400 else reason
        return Outcome(status, f"HTTP {status}: {words}"[:MAX_ERROR_LENGTH], elapsed_ms())
    error = result.get("error")
    return Outcome(None, f"{type(error).__name__}: {error}"[:MAX_ERROR_LENGTH], elapsed_ms())


def _shut(connection: http.client.HTTPConnection) -> None:
    """Ends the connection's socket for reading and writing, so that a thread blocked on it returns."""
    sock = connection.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    connection.close()


@dataclass
class DrainReport:
    """What one drain did: attempts made, deliveries delivered, failed for good, and cancelled."""

    attempted: int = 0
    delivered: int = 0
    failed: int = 0
    cancelled: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"attempted": self.attempted, "delivered": self.delivered, "failed": self.failed,
                "cancelled": self.cancelled}


@dataclass(frozen=True)
class _Claimed:
    delivery: WebhookDelivery
    url: str
    sealed_secret: str
    secret_key_id: str
    subscription_id: int
    number: int
    at: datetime


class Outbox:
    """The outbox of one database, drained under one configuration and clock."""

    def __init__(self, db: Database, config: Mapping[str, Any], clock: Callable[[], datetime] | None = None,
                 sender: Callable[[str, Mapping[str, str], bytes, float], Outcome] = send,
                 box: SecretBox | None = None) -> None:
        self.db, self.config, self.sender = db, config, sender
        self.clock = clock or clock_of(dict(config))
        # The keys that open the subscriptions' secrets; None: the current app's (service/webhooks/secret_box.py).
        self.box = box

    def due(self, limit: int = DRAIN_BATCH) -> list[str]:
        """Returns the ids of the pending deliveries due now, the longest waiting first."""
        with self.db.session() as session:
            return list(session.exec(
                select(WebhookDelivery.id).where(col(WebhookDelivery.state) == PENDING,
                                                 col(WebhookDelivery.next_attempt_at) <= self.clock())
                .order_by(col(WebhookDelivery.next_attempt_at), col(WebhookDelivery.id)).limit(limit)).all())

    def drain(self, limit: int = DRAIN_BATCH) -> DrainReport:
        """Returns the report of attempting every delivery due now (at most ``limit``)."""
        report = DrainReport()
        for delivery_id in self.due(limit):
            self.attempt(delivery_id, report)
        return report

    def _claim(self, delivery_id: str, report: DrainReport) -> _Claimed | None:
        now = self.clock()
        with self.db.session() as session:
            claimed = leases.take(session, WebhookDelivery, col(WebhookDelivery.id) == delivery_id,
                                  col(WebhookDelivery.state) == PENDING,
                                  leases.lapsed(col(WebhookDelivery.next_attempt_at), now, at_end=True),
                                  attempts=WebhookDelivery.attempts + 1,
                                  next_attempt_at=leases.until(now, self.config["WEBHOOK_TIMEOUT_S"] + CLAIM_MARGIN_S))
            if not claimed:  # another drain took it first
                return None
            delivery = session.get(WebhookDelivery, delivery_id, populate_existing=True)
            assert delivery is not None
            subscription = session.get(WebhookSubscription, delivery.subscription_id)
            assert subscription is not None  # a foreign key
            if subscription.deleted_at is not None:
                delivery.state, delivery.next_attempt_at = CANCELLED, None
                delivery.last_error = "the subscription was deleted"
                session.add(delivery)
                session.commit()
                report.cancelled += 1
                return None
            session.commit()
            return _Claimed(delivery, subscription.url, subscription.secret, subscription.secret_key_id,
                            delivery.subscription_id, delivery.attempts, now)

    def attempt(self, delivery_id: str, report: DrainReport | None = None) -> Outcome | None:
        """Returns the outcome of sending one delivery now, logged; None when it was not due or was taken."""
        report = report if report is not None else DrainReport()
        claimed = self._claim(delivery_id, report)
        if claimed is None:
            return None
        delivery = claimed.delivery
        try:
            secret = (self.box or secret_box()).open(claimed.secret_key_id, claimed.sealed_secret,
                                                     f"the secret of webhook {claimed.subscription_id}")
        except ConfigurationError as error:  # a missing or wrong key: nothing can be signed, so nothing is sent
            logger.error("webhook delivery %s not sent: %s", delivery.id, error.detail)
            secret, unsigned = None, Outcome(None, f"not sent: {error.detail}"[:MAX_ERROR_LENGTH], 0)
        refused = destination_refusal(claimed.url, allowed_networks(self.config.get("WEBHOOK_ALLOWED_NETWORKS", ())))
        if secret is None:
            outcome = unsigned
        elif refused is not None:  # checked again at each attempt: a name may resolve elsewhere now
            outcome = Outcome(None, f"not sent: {refused}"[:MAX_ERROR_LENGTH], 0)
        else:
            outcome = self.sender(claimed.url, signed_headers(delivery, secret, claimed.at),
                                  delivery.body.encode("utf-8"), self.config["WEBHOOK_TIMEOUT_S"])
        finished = self.clock()
        values: dict[str, Any] = {"last_status_code": outcome.status_code, "last_error": outcome.error}
        if outcome.delivered:
            values.update(state=DELIVERED, delivered_at=finished, next_attempt_at=None)
            report.delivered += 1
        elif claimed.number >= self.config["WEBHOOK_MAX_ATTEMPTS"]:
            values.update(state=FAILED, next_attempt_at=None)
            report.failed += 1
        else:
            wait = backoff_s(claimed.number, self.config["WEBHOOK_BACKOFF_BASE_S"],
                             self.config["WEBHOOK_BACKOFF_MAX_S"])
            values["next_attempt_at"] = finished + timedelta(seconds=wait)
        report.attempted += 1
        with self.db.session() as session:
            session.add(WebhookAttempt(delivery_id=delivery.id, number=claimed.number, attempted_at=claimed.at,
                                       duration_ms=outcome.duration_ms, status_code=outcome.status_code,
                                       error=outcome.error))
            # Only while the claim is still this drain's (its lease did not end and let another attempt begin).
            session.execute(update(WebhookDelivery)
                            .where(col(WebhookDelivery.id) == delivery.id,
                                   col(WebhookDelivery.attempts) == claimed.number)
                            .values(**values).execution_options(synchronize_session=False))
            session.commit()
        return outcome

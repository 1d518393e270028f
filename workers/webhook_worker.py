"""The Celery app a webhook worker runs: ``celery -A workers.webhook_worker worker -B``, the webhook queue only.

Webhook deliveries (``quotecheck.deliver_webhooks``) are routed to a queue of their own (``webhook_queue``:
CELERY_WEBHOOK_QUEUE, default ``<CELERY_QUEUE>-webhooks``), and this worker consumes that queue and nothing else,
whatever ``-Q`` says: a receiver that answers slowly holds this worker's pool (each attempt up to
WEBHOOK_TIMEOUT_S), never the pool of the workers that run searches, comparisons and PDFs (``workers.worker``,
which consumes CELERY_QUEUE only). One Celery worker has one pool, so a pool of its own is a worker of its own.

The app is the one ``workers.worker`` creates (same settings, database, dispatcher of the task outbox); with
``-B`` it also runs Celery beat, which sends the retries every WEBHOOK_DRAIN_INTERVAL_S: start one such worker.
"""

from __future__ import annotations

from typing import Any

from celery.signals import celeryd_after_setup

from workers.celery_app import webhook_queue
from workers.worker import celery, flask_app

__all__ = ["celery"]


@celeryd_after_setup.connect(weak=False)
def _consume_the_webhook_queue_only(instance: Any = None, **_: Any) -> None:
    # Sent after -Q was applied, before the consumer starts: what Celery's documentation offers for changing the
    # queues a worker consumes.
    instance.app.amqp.queues.select([webhook_queue(flask_app.config)])

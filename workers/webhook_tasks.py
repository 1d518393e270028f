"""``quotecheck.deliver_webhooks``: drains the webhook outbox (service/webhooks/delivery.py) inside the app context.

It is sent after every commit that wrote deliveries (service/webhooks/subscriptions.py) and, for the retries, run every
WEBHOOK_DRAIN_INTERVAL_S by Celery beat (``celery -A workers.worker beat``, or a worker started with ``-B``;
workers/celery_app.py schedules it). Without a broker it runs in the API process when it is sent. Draining
is safe to repeat and to run in several workers at once: each delivery is claimed before it is sent.
"""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from service.app.webhooks import deliver_due
from service.tasks.tasks_port import DELIVER_WEBHOOKS


@shared_task(name=DELIVER_WEBHOOKS, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def deliver_webhooks_task(self: Task) -> dict[str, Any]:
    """Returns what the drain did (attempted, delivered, failed, cancelled) after sending every delivery due now."""
    return deliver_due().as_dict()

"""`quotecheck webhook deliver`: send the webhook deliveries due now, where no worker's beat does it."""

from __future__ import annotations

import click

from service.app.webhooks import deliver_due
from service.cli.common import SERVICE_EXIT_CODES, service_app


@click.group()
def webhook() -> None:
    """Webhook deliveries (subscriptions are managed over the API: /api/v1/webhooks)."""


@webhook.command("deliver", epilog=SERVICE_EXIT_CODES)
def webhook_deliver() -> None:
    """Send every webhook delivery due now (first attempts and retries) and say what happened.

    Celery beat does this every WEBHOOK_DRAIN_INTERVAL_S where workers run; without a broker, run this from
    cron (or a systemd timer) so that deliveries whose receiver was down are retried.
    """
    app = service_app()
    with app.app_context():
        report = deliver_due()
    click.echo(f"webhook deliveries: {report.attempted} attempted, {report.delivered} delivered, "
               f"{report.failed} failed for good, {report.cancelled} cancelled")

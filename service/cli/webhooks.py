"""`quotecheck webhook deliver`: send the webhook deliveries due now, where no worker's beat does it."""

from __future__ import annotations

import click

from service.app.webhooks import deliver_due, reseal_secrets
from service.cli.common import SERVICE_EXIT_CODES, service_app


@click.group()
def webhook() -> None:
    """Webhook deliveries (subscriptions are managed over the API: /api/v1/webhooks)."""


@webhook.command("rekey", epilog=SERVICE_EXIT_CODES)
def webhook_rekey() -> None:
    """Encrypt every webhook signing secret again with the current WEBHOOK_SECRET_KEY.

    After a rotation (the new key in WEBHOOK_SECRET_KEY, the old one in WEBHOOK_SECRET_PREVIOUS_KEYS), run this
    once; then the old key may be dropped from WEBHOOK_SECRET_PREVIOUS_KEYS. The secrets themselves are unchanged:
    receivers keep verifying with the ones they were given.
    """
    app = service_app()
    with app.app_context():
        resealed = reseal_secrets()
    click.echo(f"webhook secrets encrypted again with the current key: {resealed}")


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

"""`quotecheck records retimestamp`: a new document timestamp on every stored signed PDF."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import click

from rules.errors import QuotecheckError
from service.cli.common import EXIT_FAILED, EXIT_OK, fail_input, service_app

RETIMESTAMP_EXIT_CODES = """\b
Exit codes:
  0  every stored signed PDF has a new document timestamp
  1  the TSA, an OCSP responder or a CRL failed for at least one PDF (it keeps its bytes; run again)
  2  no TSA is configured (TSA_URL, TSA_TRUST_ROOT_FILE)"""


@click.group()
def records() -> None:
    """Signed records as stored by the service."""


@records.command("retimestamp", epilog=RETIMESTAMP_EXIT_CODES)
def retimestamp() -> None:
    """Add a new document timestamp to every stored signed PDF (records and as-built addenda).

    Run it before the latest document timestamp's TSA certificate expires: the PDF's validation data gains
    that TSA's revocation status, and a new document timestamp from the configured TSA covers all of it. The
    signed bytes do not change; the stored PDF grows by an incremental update, and its new digest is audited.
    """
    from service.app.retimestamp import retimestamp_stored_pdfs

    app = service_app()
    try:
        with app.app_context():
            outcomes = retimestamp_stored_pdfs(app, datetime.now(UTC))
    except QuotecheckError as error:
        fail_input(error)
    for outcome in outcomes:
        if outcome.error is None:
            click.echo(f"ok {outcome.kind} {outcome.id}: {outcome.previous_digest} -> {outcome.digest}")
        else:
            click.echo(f"x {outcome.kind} {outcome.id}: {outcome.error}")
    failed = sum(outcome.error is not None for outcome in outcomes)
    click.echo(f"{len(outcomes) - failed} of {len(outcomes)} stored signed PDFs timestamped anew")
    sys.exit(EXIT_FAILED if failed else EXIT_OK)

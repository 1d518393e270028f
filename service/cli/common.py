"""What the command groups share: exit codes, the error exit, and the app a service command acts on."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from rules.errors import QuotecheckError
from service import create_app

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2

EXIT_CODES = """\b
Exit codes:
  0  every check passed, warned, or was not applicable (no check failed, none undecided)
  1  a check failed, or one was left undecided (verdict INCOMPLETE: quotecheck fails closed;
     `evaluate --allow-incomplete` exits 0 for it)
  2  the input is invalid (unreadable file, bad JSON, schema violation, bad policy)"""

# The service commands act on the database of the app create_app() configures.
SERVICE_EXIT_CODES = """\b
Exit codes:
  0  done (for `audit verify`: every link of the chain holds)
  1  `audit verify` found a broken link
  2  bad input (unknown role, name taken, invalid configuration)"""


def fail_input(error: QuotecheckError) -> NoReturn:
    """Prints ``error`` (its detail and every problem by pointer) and exits 2."""
    click.echo(f"error: {error}", err=True)
    sys.exit(EXIT_INVALID)


def service_app(**overrides: Any) -> Any:
    """Returns the app given in the click context object (tests), else one from create_app()."""
    ctx = click.get_current_context()
    if isinstance(ctx.obj, dict) and ctx.obj.get("app") is not None:
        return ctx.obj["app"]
    return create_app(overrides or None)

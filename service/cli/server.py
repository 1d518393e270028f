"""`quotecheck serve` and `quotecheck db`: the development server and the database schema's migrations."""

from __future__ import annotations

import click

from service.app import database
from service.cli.common import SERVICE_EXIT_CODES, service_app


@click.command(epilog=SERVICE_EXIT_CODES)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.option("--debug/--no-debug", default=False, show_default=True, help="reload on change, show tracebacks")
def serve(host: str, port: int, debug: bool) -> None:
    """Run the API on Flask's development server (production: gunicorn 'service.wsgi:app')."""
    service_app().run(host=host, port=port, debug=debug)


@click.group()
def db() -> None:
    """Database schema migrations (Alembic, shipped in service/migrations)."""


@db.command("upgrade", epilog=SERVICE_EXIT_CODES)
@click.option("--revision", default="head", show_default=True, help="migration to upgrade to")
def db_upgrade(revision: str) -> None:
    """Apply the migrations up to REVISION to the configured database."""
    migrated = database.migrate(service_app(AUTO_MIGRATE=False), revision)
    click.echo(f"database {migrated.url} is at migration {migrated.revision}")


@db.command("current", epilog=SERVICE_EXIT_CODES)
def db_current() -> None:
    """Print the migration the configured database is at, and the newest one shipped."""
    current, head = database.revisions(service_app(AUTO_MIGRATE=False))
    click.echo(f"current: {current or 'none'}   head: {head}")


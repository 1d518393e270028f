"""The quotecheck command line."""

from __future__ import annotations

import json
import string
import sys
from pathlib import Path
from typing import Any

import click

from rules.errors import InvalidPolicy, InvalidSubmission, QuotecheckError

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2

EXIT_CODES = """\b
Exit codes:
  0  every check passed, warned, or was not applicable (no check failed)
  1  a check failed (or nothing could be decided: quotecheck fails closed)
  2  the input is invalid (unreadable file, bad JSON, schema violation, bad policy)"""

STATUS_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "insufficient-data": "DATA?",
               "not-applicable": "n/a", "waived": "WAIVED"}


def _read_submission(path: str) -> dict[str, Any]:
    from rules.evaluate import MAX_SUBMISSION_BYTES, OVERSIZE_INSPECT_BYTES, parse_submission

    file = Path(path)
    try:
        size = file.stat().st_size
        if size > OVERSIZE_INSPECT_BYTES:
            raise InvalidSubmission(f"{path} is {size:,} bytes; the limit is {MAX_SUBMISSION_BYTES:,} bytes")
        raw = file.read_bytes()
    except OSError as error:
        raise InvalidSubmission(f"cannot read {path}: {error.strerror}") from None
    return parse_submission(raw, origin=path)


def _fail_input(error: QuotecheckError) -> None:
    click.echo(f"error: {error}", err=True)
    sys.exit(EXIT_INVALID)


@click.group(help="Check an AI-server quote against its workload and issue a commissioning record.\n\n" + EXIT_CODES)
@click.version_option(package_name="quotecheck")
def main() -> None:
    pass


@main.command(epilog=EXIT_CODES)
@click.argument("file", type=click.Path(dir_okay=False))
def validate(file: str) -> None:
    """Validate FILE against the submission schema without evaluating it."""
    try:
        _read_submission(file)
    except InvalidSubmission as error:
        _fail_input(error)
    click.echo(f"{file}: valid submission (schema v1)")


@main.command(epilog=EXIT_CODES)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--policy", "policy_path", type=click.Path(dir_okay=False), help="policy JSON (default: bundled)")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), help="also write the record JSON to this file")
def evaluate(file: str, policy_path: str | None, fmt: str, out: str | None) -> None:
    """Evaluate FILE and print one row per acceptance check (or the record as JSON)."""
    from rules.evaluate import evaluate as run_evaluation
    from rules.policy import load_policy

    try:
        submission = _read_submission(file)
        policy = load_policy(policy_path)
    except (InvalidSubmission, InvalidPolicy) as error:
        _fail_input(error)
    record = run_evaluation(submission, policy)
    text = json.dumps(record, indent=2, ensure_ascii=False)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n", encoding="utf-8")
    click.echo(text if fmt == "json" else render_table(record))
    sys.exit(EXIT_FAILED if record["verdict"] == "fail" else EXIT_OK)


def headline(check: dict[str, Any]) -> str:
    """Returns the deciding figure of a check result for one table row."""
    from rules.checks import CATALOGUE

    by_id = {c.id: c for c in CATALOGUE}
    template = by_id[check["id"]].headline if check["id"] in by_id else ""
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    # A figure the check could not give (no GPU count fits memory: gpus_needed is null) is explained by the message.
    if check["status"] in ("pass", "warn", "fail") and template and all(
            check["evidence"].get(name) is not None for name in fields):
        try:
            return template.format(**check["evidence"])
        except (KeyError, ValueError, IndexError):
            pass
    return check["message"]


def render_table(record: dict[str, Any]) -> str:
    """Returns the checklist as fixed-width text: check, status, basis, deciding figure, then the verdict."""
    rows = [("CHECK", "STATUS", "BASIS", "DECIDING FIGURE")]
    for check in record["checks"]:
        rows.append((check["id"], STATUS_MARK[check["status"]], check["basis"], _clip(headline(check), 90)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(widths[i]) if i < 3 else cell for i, cell in enumerate(row)) for row in rows]
    quote = record["submission"]
    lines.append("")
    lines.append(f"verdict: {record['verdict'].upper()}   vendor: {quote.get('vendor')}   quote: "
                 f"{quote.get('quote_id')}   policy: {record['policy']['id']} ({record['policy']['digest'][:19]}…)")
    for check in record["checks"]:
        if check["status"] in ("fail", "warn") and check["remediation"]:
            lines.append(f"  {check['id']}: {check['remediation']}")
    return "\n".join(lines)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


# --- service commands: they act on the database of the app create_app() configures ---------------------

SERVICE_EXIT_CODES = """\b
Exit codes:
  0  done (for `audit verify`: every link of the chain holds)
  1  `audit verify` found a broken link
  2  bad input (unknown role, name taken, invalid configuration)"""


def _app(**overrides: Any) -> Any:
    """Returns the app given in the click context object (tests), else one from create_app()."""
    ctx = click.get_current_context()
    if isinstance(ctx.obj, dict) and ctx.obj.get("app") is not None:
        return ctx.obj["app"]
    from service import create_app

    return create_app(overrides or None)


@main.command(epilog=SERVICE_EXIT_CODES)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.option("--debug/--no-debug", default=False, show_default=True, help="reload on change, show tracebacks")
def serve(host: str, port: int, debug: bool) -> None:
    """Run the API on Flask's development server (production: gunicorn 'service.wsgi:app')."""
    _app().run(host=host, port=port, debug=debug)


@main.group()
def db() -> None:
    """Database schema migrations (Alembic, shipped in service/migrations)."""


@db.command("upgrade", epilog=SERVICE_EXIT_CODES)
@click.option("--revision", default="head", show_default=True, help="migration to upgrade to")
def db_upgrade(revision: str) -> None:
    """Apply the migrations up to REVISION to the configured database."""
    from service.db import current_revision, get_db, upgrade

    app = _app(AUTO_MIGRATE=False)
    engine = get_db(app).engine
    upgrade(engine, revision)
    click.echo(f"database {engine.url.render_as_string(hide_password=True)} is at migration "
               f"{current_revision(engine)}")


@db.command("current", epilog=SERVICE_EXIT_CODES)
def db_current() -> None:
    """Print the migration the configured database is at, and the newest one shipped."""
    from service.db import current_revision, get_db, head_revision

    app = _app(AUTO_MIGRATE=False)
    click.echo(f"current: {current_revision(get_db(app).engine) or 'none'}   head: {head_revision()}")


@main.group()
def token() -> None:
    """API tokens: each has a unique name (a person, for the four-eyes rule) and one role."""


@token.command("create", epilog=SERVICE_EXIT_CODES)
@click.option("--name", required=True, help="who holds the token; unique")
@click.option("--role", required=True, type=click.Choice(["submitter", "reviewer", "approver", "admin"]))
def token_create(name: str, role: str) -> None:
    """Create a token and print it once; only its SHA-256 is stored."""
    from service.auth import create_token
    from service.config import clock_of
    from service.db import get_db

    app = _app()
    with app.app_context(), get_db(app).session() as session:
        try:
            _row, secret = create_token(session, name, role, clock_of(app.config)())
        except QuotecheckError as error:
            _fail_input(error)
        session.commit()
    click.echo(f"token for {name} ({role}); it is shown once, store it now:", err=True)
    click.echo(secret)


@token.command("revoke", epilog=SERVICE_EXIT_CODES)
@click.option("--name", required=True)
def token_revoke(name: str) -> None:
    """Revoke the token called NAME; requests with it get 401 from now on."""
    from sqlmodel import select

    from service import audit
    from service.config import clock_of
    from service.db import get_db
    from service.models import ApiToken

    app = _app()
    with app.app_context(), get_db(app).session() as session:
        row = session.exec(select(ApiToken).where(ApiToken.name == name)).first()
        if row is None:
            click.echo(f"error: there is no token named {name!r}", err=True)
            sys.exit(EXIT_INVALID)
        moment = clock_of(app.config)()
        row.revoked_at = moment
        session.add(row)
        session.flush()
        audit.append(session, action="token.revoked", actor=None, occurred_at=moment,
                     detail={"name": name, "role": row.role, "token_prefix": row.prefix})
        session.commit()
    click.echo(f"revoked token {name}")


@main.group()
def audit() -> None:
    """The append-only audit log and its hash chain."""


@audit.command("verify", epilog=SERVICE_EXIT_CODES)
def audit_verify() -> None:
    """Recompute every event's hash and link; report OK with the count, or the first broken event."""
    from service import audit as audit_log
    from service.db import get_db

    app = _app()
    with get_db(app).session() as session:
        result = audit_log.verify(session)
    if result.ok:
        click.echo(f"audit chain OK: {result.count} events, head {result.head_hash}")
        return
    click.echo(f"audit chain BROKEN at event {result.broken_at}: {result.problem} "
               f"({result.count} events before it verified)")
    sys.exit(EXIT_FAILED)


# --- signed records: verify, sign, pdf, keys (service/record/cli.py) ------------------------------------
from service.record.cli import register as _register_record_commands  # noqa: E402

_register_record_commands(main)


if __name__ == "__main__":  # pragma: no cover
    main()

"""The quotecheck command line."""

from __future__ import annotations

import json
import string
import sys
from pathlib import Path
from typing import Any, NamedTuple

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


def _service_session() -> Any:
    """Returns (app, session context) for a command that changes the configured database."""
    from service.db import get_db

    app = _app()
    return app, get_db(app).session()


def _when(moment: Any) -> str:
    from service.audit import timestamp
    from service.auth import aware

    return timestamp(aware(moment))[:19] + "Z" if moment is not None else "-"


@main.group()
def user() -> None:
    """Users: the people behind tokens. The four-eyes rule compares users, so give each person one user.

    Names are compared without case, blanks or punctuation: `Alice`, `alice ` and `alice.` are one user.
    """


@user.command("create", epilog=SERVICE_EXIT_CODES)
@click.argument("name")
def user_create(name: str) -> None:
    """Create the user NAME (unique: a name that differs from another only by case or punctuation is refused)."""
    from service import users
    from service.config import clock_of

    app, db_session = _service_session()
    with app.app_context(), db_session as session:
        try:
            created = users.create_user(session, name, clock_of(app.config)())
        except QuotecheckError as error:
            _fail_input(error)
        session.commit()
    click.echo(f"created user {created.name}")


@user.command("list", epilog=SERVICE_EXIT_CODES)
def user_list() -> None:
    """List users: name, when created, when disabled, and how many tokens are active."""
    from sqlmodel import func, select

    from service import users
    from service.config import clock_of
    from service.models import ApiToken

    app, db_session = _service_session()
    with app.app_context(), db_session as session:
        moment = clock_of(app.config)()
        rows = [("USER", "CREATED", "DISABLED", "ACTIVE TOKENS")]
        for row in users.list_users(session):
            active = session.exec(select(func.count()).select_from(ApiToken).where(
                ApiToken.user_id == row.id, ApiToken.revoked_at == None)  # noqa: E711 (SQL IS NULL)
                .where(ApiToken.expires_at > moment)).one() if row.disabled_at is None else 0
            rows.append((row.name, _when(row.created_at), _when(row.disabled_at), str(active)))
    click.echo(_columns(rows))


@user.command("disable", epilog=SERVICE_EXIT_CODES)
@click.argument("name")
def user_disable(name: str) -> None:
    """Disable the user NAME: every token of theirs gets 401 from now on. Their history stays."""
    from service import users
    from service.config import clock_of

    app, db_session = _service_session()
    with app.app_context(), db_session as session:
        try:
            disabled = users.disable_user(session, name, clock_of(app.config)())
        except QuotecheckError as error:
            _fail_input(error)
        session.commit()
    click.echo(f"disabled user {disabled.name}; their tokens get 401 from now on")


def _columns(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows)


@main.group()
def token() -> None:
    """API tokens: each belongs to one user, has one role, a scope and an expiry. Shown once, stored hashed."""


TOKEN_SCOPES = click.Choice(["all", "own"])


@token.command("create", epilog=SERVICE_EXIT_CODES)
@click.option("--user", "user_name", help="the user the token belongs to; must exist (`quotecheck user create`)")
@click.option("--name", help="the user the token belongs to, created when there is none (older form of --user)")
@click.option("--role", required=True, type=click.Choice(["submitter", "reviewer", "approver", "admin"]))
@click.option("--expires", help="lifetime in days, e.g. 30d [default: TOKEN_LIFETIME_DAYS, 90]")
@click.option("--scope", type=TOKEN_SCOPES, default="all", show_default=True,
              help="own: the token sees only its user's submissions (vendors; submitter role only)")
def token_create(user_name: str | None, name: str | None, role: str, expires: str | None, scope: str) -> None:
    """Create a token for a user and print it once; only its SHA-256 is stored."""
    from service.auth import create_token, default_lifetime, parse_lifetime
    from service.config import clock_of

    if (user_name is None) == (name is None):
        click.echo("error: give the token's user with --user NAME (or --name NAME), exactly once", err=True)
        sys.exit(EXIT_INVALID)
    app, db_session = _service_session()
    with app.app_context(), db_session as session:
        try:
            lifetime = parse_lifetime(expires) if expires is not None else default_lifetime(app.config)
            row, secret = create_token(session, user_name or name or "", role, clock_of(app.config)(),
                                       lifetime=lifetime, scope=scope, create_user=user_name is None)
        except QuotecheckError as error:
            _fail_input(error)
        session.commit()
    click.echo(f"token {row.prefix} for {row.name} ({role}, scope {scope}, expires {_when(row.expires_at)}); "
               "it is shown once, store it now:", err=True)
    click.echo(secret)


@token.command("list", epilog=SERVICE_EXIT_CODES)
@click.option("--user", "user_name", help="only this user's tokens")
@click.option("--all", "show_all", is_flag=True, help="also revoked and expired tokens (the history)")
def token_list(user_name: str | None, show_all: bool) -> None:
    """List tokens by prefix: user, role, scope, created, expires, and revoked or rotated."""
    from sqlmodel import col, select

    from service import users
    from service.auth import aware
    from service.config import clock_of
    from service.models import ApiToken, User

    app, db_session = _service_session()
    with app.app_context(), db_session as session:
        moment = clock_of(app.config)()
        query = select(ApiToken, User).join(User, col(User.id) == ApiToken.user_id).order_by(col(ApiToken.id))
        if user_name is not None:
            try:
                query = query.where(ApiToken.user_id == users.get_user(session, user_name).id)
            except QuotecheckError as error:
                _fail_input(error)
        pairs = session.exec(query).all()
        replaced = {row.rotated_from_id: row.prefix for row, _ in pairs if row.rotated_from_id is not None}
        rows = [("PREFIX", "USER", "ROLE", "SCOPE", "CREATED", "EXPIRES", "STATUS")]
        for row, owner in pairs:
            if owner.disabled_at is not None:
                status = "user disabled"
            elif row.revoked_at is not None:
                status = f"rotated to {replaced[row.id]}" if row.id in replaced else "revoked"
            elif aware(row.expires_at) <= moment:
                status = "expired"
            else:
                status = "active"
            if status != "active" and not show_all:
                continue
            rows.append((row.prefix, owner.name, row.role, row.scope, _when(row.created_at), _when(row.expires_at),
                         status))
    click.echo(_columns(rows))


@token.command("revoke", epilog=SERVICE_EXIT_CODES)
@click.argument("prefix", required=False)
@click.option("--name", help="the user whose one active token to revoke (older form; a prefix names one token)")
def token_revoke(prefix: str | None, name: str | None) -> None:
    """Revoke the token PREFIX (or a whole token's text); requests with it get 401 from now on."""
    from sqlmodel import select

    from service import users
    from service.auth import find_token, revoke_token
    from service.config import clock_of
    from service.models import ApiToken

    if (prefix is None) == (name is None):
        click.echo("error: name the token by its PREFIX (see `quotecheck token list`) or its user by --name",
                   err=True)
        sys.exit(EXIT_INVALID)
    app, db_session = _service_session()
    with app.app_context(), db_session as session:
        moment = clock_of(app.config)()
        try:
            if prefix is not None:
                row = find_token(session, prefix)
            else:
                owner = users.get_user(session, name or "")
                active = session.exec(select(ApiToken).where(ApiToken.user_id == owner.id,
                                                             ApiToken.revoked_at == None)).all()  # noqa: E711
                if len(active) != 1:
                    prefixes = ", ".join(r.prefix for r in active) or "none"
                    click.echo(f"error: user {owner.name!r} has {len(active)} unrevoked tokens ({prefixes}); "
                               "name the one to revoke by its prefix", err=True)
                    sys.exit(EXIT_INVALID)
                row = active[0]
        except QuotecheckError as error:
            _fail_input(error)
        revoke_token(session, row, moment)
        session.commit()
    click.echo(f"revoked token {row.prefix} of {row.name}")


@token.command("rotate", epilog=SERVICE_EXIT_CODES)
@click.argument("prefix")
@click.option("--expires", help="lifetime of the new token in days, e.g. 30d [default: TOKEN_LIFETIME_DAYS, 90]")
def token_rotate(prefix: str, expires: str | None) -> None:
    """Replace the token PREFIX by a new one of the same user, role and scope, printed once.

    The old token stops working at once; `token list --all` keeps it, marked as rotated to the new one.
    """
    from service.auth import default_lifetime, find_token, parse_lifetime, rotate_token
    from service.config import clock_of

    app, db_session = _service_session()
    with app.app_context(), db_session as session:
        try:
            lifetime = parse_lifetime(expires) if expires is not None else default_lifetime(app.config)
            new, secret = rotate_token(session, find_token(session, prefix), clock_of(app.config)(), lifetime)
        except QuotecheckError as error:
            _fail_input(error)
        session.commit()
    click.echo(f"token {new.prefix} replaces {prefix} for {new.name} ({new.role}, scope {new.scope}, expires "
               f"{_when(new.expires_at)}); the old one no longer works. Shown once, store it now:", err=True)
    click.echo(secret)


@main.group()
def audit() -> None:
    """The append-only audit log and its hash chain."""


AUDIT_VERIFY_EXIT_CODES = """\b
Exit codes:
  0  every link of the chain holds (and, with --against, the chain still holds what RECORD anchored)
  1  a broken link, or with --against: the chain was cut or rewritten before RECORD's anchor, or RECORD
     does not verify
  2  bad input: RECORD cannot be read, holds no signed record, or carries no audit anchor"""


@audit.command("verify", epilog=AUDIT_VERIFY_EXIT_CODES)
@click.option("--against", "record_file", type=click.Path(dir_okay=False),
              help="a signed record (its JSON envelope or its PDF): check that the chain still holds the events "
                   "the record anchored")
@click.option("--key", "key_files", multiple=True, type=click.Path(dir_okay=False),
              help="with --against: trust this public key or certificate (PEM; repeatable) instead of the "
                   "instance's signing key")
def audit_verify(record_file: str | None, key_files: tuple[str, ...]) -> None:
    """Recompute every event's hash and link; report OK with the count, or the first broken event.

    With --against RECORD, first verify RECORD's signature, then check the chain against the anchor the
    record carries (audit_anchor: the chain's length N and head hash when it was issued): event N must still
    have that hash and event N + 1 must be the one that issued the record. This catches a tail that was
    deleted, or rewritten and re-hashed wholesale, which the chain alone cannot show.
    """
    from service import audit as audit_log
    from service.db import get_db

    app = _app()
    if key_files and not record_file:
        click.echo("error: --key is used with --against RECORD only", err=True)
        sys.exit(EXIT_INVALID)
    signed = _anchored_record(app, record_file, key_files) if record_file else None
    with get_db(app).session() as session:
        result = audit_log.verify(session)
        held = (audit_log.check_anchor(session, signed.anchor, signed.record["record_id"], signed.digest)
                if signed else None)
    if result.ok:
        click.echo(f"audit chain OK: {result.count} events, head {result.head_hash}")
    else:
        click.echo(f"audit chain BROKEN at event {result.broken_at}: {result.problem} "
                   f"({result.count} events before it verified)")
    if signed is not None and held is not None:
        what = (f"record {signed.record['record_id']} (issue {signed.record.get('issue', 1)}) anchors event "
                f"{signed.anchor.events}")
        if held.ok:
            click.echo(f"anchor OK: {what}; the chain still holds it")
        else:
            click.echo(f"anchor BROKEN: {what}; the chain no longer holds it")
        click.echo("\n".join([*(f"  x {problem}" for problem in held.problems),
                               *(f"  ok {finding}" for finding in held.findings)]))
    sys.exit(EXIT_OK if result.ok and (held is None or held.ok) else EXIT_FAILED)


class AnchoredRecord(NamedTuple):
    """A record whose signature verified, the audit anchor it carries, and its digest."""

    record: dict[str, Any]
    anchor: Any  # service.audit.Anchor (imported with the database side, on use)
    digest: str | None


def _anchored_record(app: Any, path: str, key_files: tuple[str, ...]) -> AnchoredRecord:
    """Returns the record signed in ``path`` (JSON envelope or PDF) with its audit anchor and digest.

    Exits 1 when the signature does not verify (its anchor is then no evidence), 2 when the file cannot be
    read, holds no record, or the record carries no anchor.
    """
    from service.audit import Anchor
    from service.record import TrustedKeys, signing_keys, verify_document

    try:
        data = Path(path).read_bytes()
    except OSError as error:
        _fail_input(QuotecheckError(f"cannot read {path}: {error.strerror}"))
    try:
        trusted = TrustedKeys.from_files(key_files) if key_files else signing_keys(app).trusted()
        verification = verify_document(data, trusted, origin=path)
    except QuotecheckError as error:
        _fail_input(error)
    except Exception as error:  # whatever the file holds, the answer is an exit code, not a traceback
        _fail_input(QuotecheckError(f"{path} cannot be verified: {type(error).__name__}: {error}"))
    record = verification.record
    if not isinstance(record, dict) or not isinstance(record.get("record_id"), str):
        _fail_input(QuotecheckError(f"{path} holds no commissioning record with a record_id ({verification.subject}); "
                                    "give the signed record JSON or its PDF"))
    if not verification.ok:
        click.echo(f"record {record['record_id']} in {path} does NOT verify, so its audit anchor is no evidence:")
        click.echo("\n".join(f"  x {reason}" for reason in verification.all_reasons()))
        sys.exit(EXIT_FAILED)
    try:
        anchor = Anchor.of_record(record)
    except ValueError as error:
        _fail_input(QuotecheckError(f"{path}: {error}"))
    if anchor is None:
        _fail_input(QuotecheckError(f"record {record['record_id']} in {path} carries no audit_anchor: only records "
                                    "the service issues (at approval or a purchase-order link) carry one, and only "
                                    "since anchoring was introduced"))
    return AnchoredRecord(record, anchor, verification.record_digest)


# --- signed records: verify, sign, pdf, keys (service/record/cli.py) ------------------------------------
from service.record.cli import register as _register_record_commands  # noqa: E402

_register_record_commands(main)


if __name__ == "__main__":  # pragma: no cover
    main()

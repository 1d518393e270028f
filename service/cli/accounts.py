"""`quotecheck user` and `quotecheck token`: the people behind tokens, and their API tokens."""

from __future__ import annotations

import sys
from typing import Any

import click
from sqlmodel import col, func, select

from rules.errors import QuotecheckError
from service.accounts import users
from service.accounts.auth import (
    aware,
    create_token,
    default_lifetime,
    find_token,
    parse_lifetime,
    revoke_token,
    rotate_token,
)
from service.cli.common import EXIT_INVALID, SERVICE_EXIT_CODES, fail_input, service_app
from service.config import clock_of
from service.persistence.audit import timestamp
from service.persistence.db import get_db
from service.persistence.models import ApiToken, User


def _service_session() -> Any:
    """Returns (app, session context) for a command that changes the configured database."""
    app = service_app()
    return app, get_db(app).session()


def _when(moment: Any) -> str:
    return timestamp(aware(moment))[:19] + "Z" if moment is not None else "-"


def _columns(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows)


@click.group()
def user() -> None:
    """Users: the people behind tokens. The four-eyes rule compares users, so give each person one user.

    Names are compared without case, blanks or punctuation: `Alice`, `alice ` and `alice.` are one user.
    """


@user.command("create", epilog=SERVICE_EXIT_CODES)
@click.argument("name")
def user_create(name: str) -> None:
    """Create the user NAME (unique: a name that differs from another only by case or punctuation is refused)."""
    app, db_session = _service_session()
    with app.app_context(), db_session as session:
        try:
            created = users.create_user(session, name, clock_of(app.config)())
        except QuotecheckError as error:
            fail_input(error)
        session.commit()
    click.echo(f"created user {created.name}")


@user.command("list", epilog=SERVICE_EXIT_CODES)
def user_list() -> None:
    """List users: name, when created, when disabled, and how many tokens are active."""


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
    app, db_session = _service_session()
    with app.app_context(), db_session as session:
        try:
            disabled = users.disable_user(session, name, clock_of(app.config)())
        except QuotecheckError as error:
            fail_input(error)
        session.commit()
    click.echo(f"disabled user {disabled.name}; their tokens get 401 from now on")


def _columns(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows)


@click.group()
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
            fail_input(error)
        session.commit()
    click.echo(f"token {row.prefix} for {row.name} ({role}, scope {scope}, expires {_when(row.expires_at)}); "
               "it is shown once, store it now:", err=True)
    click.echo(secret)


@token.command("list", epilog=SERVICE_EXIT_CODES)
@click.option("--user", "user_name", help="only this user's tokens")
@click.option("--all", "show_all", is_flag=True, help="also revoked and expired tokens (the history)")
def token_list(user_name: str | None, show_all: bool) -> None:
    """List tokens by prefix: user, role, scope, created, expires, and revoked or rotated."""


    app, db_session = _service_session()
    with app.app_context(), db_session as session:
        moment = clock_of(app.config)()
        query = select(ApiToken, User).join(User, col(User.id) == ApiToken.user_id).order_by(col(ApiToken.id))
        if user_name is not None:
            try:
                query = query.where(ApiToken.user_id == users.get_user(session, user_name).id)
            except QuotecheckError as error:
                fail_input(error)
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
            fail_input(error)
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
    app, db_session = _service_session()
    with app.app_context(), db_session as session:
        try:
            lifetime = parse_lifetime(expires) if expires is not None else default_lifetime(app.config)
            new, secret = rotate_token(session, find_token(session, prefix), clock_of(app.config)(), lifetime)
        except QuotecheckError as error:
            fail_input(error)
        session.commit()
    click.echo(f"token {new.prefix} replaces {prefix} for {new.name} ({new.role}, scope {new.scope}, expires "
               f"{_when(new.expires_at)}); the old one no longer works. Shown once, store it now:", err=True)
    click.echo(secret)


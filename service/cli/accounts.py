"""`quotecheck user` and `quotecheck token`: the people behind tokens, and their API tokens."""

from __future__ import annotations

import sys

import click

from rules.errors import QuotecheckError
from service.app import accounts
from service.app.accounts import shown_time as _when
from service.cli.common import EXIT_INVALID, SERVICE_EXIT_CODES, fail_input, service_app


def _columns(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows)


@click.group()
def user() -> None:
    """Users: the people behind tokens. The four-eyes rule compares users, so give each person one user.

    Names are compared as they read, without case, blanks, punctuation or look-alike letters: `Alice`, `alice `,
    `alice.` and `аlice` (a Cyrillic а) are one user (Unicode Technical Standard #39's skeleton).
    """


@user.command("create", epilog=SERVICE_EXIT_CODES)
@click.argument("name")
def user_create(name: str) -> None:
    """Create the user NAME (unique: a name that reads as another user's, by case, punctuation or look-alike letters
    such as a Cyrillic а for a Latin a, is refused, as are invisible characters)."""
    try:
        created = accounts.create_user(service_app(), name)
    except QuotecheckError as error:
        fail_input(error)
    click.echo(f"created user {created}")


@user.command("list", epilog=SERVICE_EXIT_CODES)
def user_list() -> None:
    """List users: name, when created, when disabled, and how many tokens are active."""
    rows = [("USER", "CREATED", "DISABLED", "ACTIVE TOKENS")]
    rows += [(row.name, _when(row.created_at), _when(row.disabled_at), str(row.active_tokens))
             for row in accounts.list_users(service_app())]
    click.echo(_columns(rows))


@user.command("disable", epilog=SERVICE_EXIT_CODES)
@click.argument("name")
def user_disable(name: str) -> None:
    """Disable the user NAME: every token of theirs gets 401 from now on. Their history stays."""
    try:
        disabled = accounts.disable_user(service_app(), name)
    except QuotecheckError as error:
        fail_input(error)
    click.echo(f"disabled user {disabled}; their tokens get 401 from now on")


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
    try:
        row = accounts.create_token(service_app(), user_name or name or "", role, expires, scope,
                                    create_user=user_name is None)
    except QuotecheckError as error:
        fail_input(error)
    click.echo(f"token {row.prefix} for {row.user} ({role}, scope {scope}, expires {_when(row.expires_at)}); "
               "it is shown once, store it now:", err=True)
    click.echo(row.secret)


@token.command("list", epilog=SERVICE_EXIT_CODES)
@click.option("--user", "user_name", help="only this user's tokens")
@click.option("--all", "show_all", is_flag=True, help="also revoked and expired tokens (the history)")
def token_list(user_name: str | None, show_all: bool) -> None:
    """List tokens by prefix: user, role, scope, created, expires, and revoked or rotated."""
    try:
        tokens = accounts.list_tokens(service_app(), user_name)
    except QuotecheckError as error:
        fail_input(error)
    rows = [("PREFIX", "USER", "ROLE", "SCOPE", "CREATED", "EXPIRES", "STATUS")]
    rows += [(row.prefix, row.user, row.role, row.scope, _when(row.created_at), _when(row.expires_at), row.status)
             for row in tokens if show_all or row.status == "active"]
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
    try:
        revoked, owner = accounts.revoke_token(service_app(), prefix, name)
    except QuotecheckError as error:
        fail_input(error)
    click.echo(f"revoked token {revoked} of {owner}")


@token.command("rotate", epilog=SERVICE_EXIT_CODES)
@click.argument("prefix")
@click.option("--expires", help="lifetime of the new token in days, e.g. 30d [default: TOKEN_LIFETIME_DAYS, 90]")
def token_rotate(prefix: str, expires: str | None) -> None:
    """Replace the token PREFIX by a new one of the same user, role and scope, printed once.

    The old token stops working at once; `token list --all` keeps it, marked as rotated to the new one.
    """
    try:
        new = accounts.rotate_token(service_app(), prefix, expires)
    except QuotecheckError as error:
        fail_input(error)
    click.echo(f"token {new.prefix} replaces {prefix} for {new.user} ({new.role}, scope {new.scope}, expires "
               f"{_when(new.expires_at)}); the old one no longer works. Shown once, store it now:", err=True)
    click.echo(new.secret)


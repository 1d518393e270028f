"""Users and their API tokens as `quotecheck user` and `quotecheck token` manage them.

Each operation acts on the database of ``app``, inside its app context, and commits what it changed; a name or a
token it cannot find, or a request it must refuse, raises a QuotecheckError. The rules themselves (names, roles,
scopes, lifetimes, rotation) are service/accounts's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import NamedTuple

from flask import Flask
from sqlmodel import Session, col, func, select

from service.accounts import auth, users
from service.config import clock_of
from service.errors import InvalidRequest
from service.persistence.audit import timestamp
from service.persistence.db import get_db
from service.persistence.models import ApiToken, User


class UserSummary(NamedTuple):
    """A user as `quotecheck user list` shows one."""
    name: str
    created_at: datetime
    disabled_at: datetime | None
    active_tokens: int


class TokenSummary(NamedTuple):
    """A token as `quotecheck token list` shows one; ``status``: active, expired, revoked, rotated to …, or user
    disabled."""
    prefix: str
    user: str
    role: str
    scope: str
    created_at: datetime
    expires_at: datetime
    status: str


class IssuedToken(NamedTuple):
    """A token just made, and its secret (shown once, stored hashed)."""
    prefix: str
    user: str
    role: str
    scope: str
    expires_at: datetime
    secret: str


def shown_time(moment: datetime | None) -> str:
    """Returns ``moment`` in UTC to the second (``2026-01-02T03:04:05Z``), or ``-`` for none."""
    return timestamp(auth.aware(moment))[:19] + "Z" if moment is not None else "-"


@contextmanager
def _session(app: Flask) -> Iterator[Session]:
    with app.app_context(), get_db(app).session() as session:
        yield session


def create_user(app: Flask, name: str) -> str:
    """Returns the name of the user ``name`` once created (a name taken by case or punctuation is refused)."""
    with _session(app) as session:
        created = users.create_user(session, name, clock_of(app.config)())
        session.commit()
    return created.name


def list_users(app: Flask) -> list[UserSummary]:
    """Returns every user with how many tokens of theirs are active (none once disabled)."""
    with _session(app) as session:
        moment = clock_of(app.config)()
        return [UserSummary(row.name, row.created_at, row.disabled_at, session.exec(
            select(func.count()).select_from(ApiToken).where(
                ApiToken.user_id == row.id, ApiToken.revoked_at == None)  # noqa: E711 (SQL IS NULL)
            .where(ApiToken.expires_at > moment)).one() if row.disabled_at is None else 0)
                for row in users.list_users(session)]


def disable_user(app: Flask, name: str) -> str:
    """Returns the name of the user ``name`` once disabled: every token of theirs gets 401 from now on."""
    with _session(app) as session:
        disabled = users.disable_user(session, name, clock_of(app.config)())
        session.commit()
    return disabled.name


def _lifetime(app: Flask, expires: str | None) -> timedelta:
    return auth.parse_lifetime(expires) if expires is not None else auth.default_lifetime(app.config)


def create_token(app: Flask, user_name: str, role: str, expires: str | None, scope: str,
                 create_user: bool) -> IssuedToken:
    """Returns a new token of ``role`` and ``scope`` for the user ``user_name`` (made first with ``create_user``)."""
    with _session(app) as session:
        row, secret = auth.create_token(session, user_name, role, clock_of(app.config)(),
                                        lifetime=_lifetime(app, expires), scope=scope, create_user=create_user)
        session.commit()
        return IssuedToken(row.prefix, row.name, role, scope, row.expires_at, secret)


def list_tokens(app: Flask, user_name: str | None = None) -> list[TokenSummary]:
    """Returns every token (of the user ``user_name`` only, when given) by its id, with its status now."""
    with _session(app) as session:
        moment = clock_of(app.config)()
        query = select(ApiToken, User).join(User, col(User.id) == ApiToken.user_id).order_by(col(ApiToken.id))
        if user_name is not None:
            query = query.where(ApiToken.user_id == users.get_user(session, user_name).id)
        pairs = session.exec(query).all()
        replaced = {row.rotated_from_id: row.prefix for row, _ in pairs if row.rotated_from_id is not None}
        found = []
        for row, owner in pairs:
            if owner.disabled_at is not None:
                status = "user disabled"
            elif row.revoked_at is not None:
                status = f"rotated to {replaced[row.id]}" if row.id in replaced else "revoked"
            elif auth.aware(row.expires_at) <= moment:
                status = "expired"
            else:
                status = "active"
            found.append(TokenSummary(row.prefix, owner.name, row.role, row.scope, row.created_at, row.expires_at,
                                      status))
        return found


def revoke_token(app: Flask, prefix: str | None = None, user_name: str | None = None) -> tuple[str, str]:
    """Returns the prefix and the user of the token revoked: the token ``prefix``, or the one unrevoked token of the
    user ``user_name`` (InvalidRequest when they have none or several)."""
    with _session(app) as session:
        moment = clock_of(app.config)()
        if prefix is not None:
            row = auth.find_token(session, prefix)
        else:
            owner = users.get_user(session, user_name or "")
            active = session.exec(select(ApiToken).where(ApiToken.user_id == owner.id,
                                                         ApiToken.revoked_at == None)).all()  # noqa: E711
            if len(active) != 1:
                prefixes = ", ".join(r.prefix for r in active) or "none"
                raise InvalidRequest(f"user {owner.name!r} has {len(active)} unrevoked tokens ({prefixes}); "
                                     "name the one to revoke by its prefix")
            row = active[0]
        auth.revoke_token(session, row, moment)
        session.commit()
        return row.prefix, row.name


def rotate_token(app: Flask, prefix: str, expires: str | None) -> IssuedToken:
    """Returns the token that replaces the token ``prefix`` (same user, role and scope); the old one stops working."""
    with _session(app) as session:
        lifetime = _lifetime(app, expires)
        new, secret = auth.rotate_token(session, auth.find_token(session, prefix), clock_of(app.config)(), lifetime)
        session.commit()
        return IssuedToken(new.prefix, new.name, new.role, new.scope, new.expires_at, secret)

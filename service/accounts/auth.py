"""API tokens and roles: ``Authorization: Bearer qc_<prefix>_<secret>``.

Only the SHA-256 of a token is stored. The prefix finds the row; the hash is compared in constant time,
so a guess reveals nothing about how close it came.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import wraps
from typing import Any, TypeVar

from flask import Flask, current_app, g, request
from sqlalchemy import bindparam
from sqlmodel import Session, select

from service.accounts import users
from service.accounts.actors import Actor
from service.config import DEFAULT_TOKEN_LIFETIME_DAYS, clock_of
from service.errors import Forbidden, InvalidRequest, Unauthorized
from service.persistence.audit import append, timestamp
from service.persistence.db import get_db
from service.persistence.models import ApiToken, User


class Role(StrEnum):
    SUBMITTER = "submitter"  # submits quotes and their revisions
    REVIEWER = "reviewer"  # waives checks, requests changes, rejects
    APPROVER = "approver"  # approves (never their own submission), requests changes, rejects
    ADMIN = "admin"  # may do everything, but the four-eyes rule binds admins too


ALL_ROLES = frozenset(Role)

# Which roles may perform which action; reads are open to every role.
PERMISSIONS: dict[str, frozenset[Role]] = {
    "read": ALL_ROLES,
    "submit": frozenset({Role.SUBMITTER, Role.ADMIN}),
    "revise": frozenset({Role.SUBMITTER, Role.ADMIN}),
    "waive": frozenset({Role.REVIEWER, Role.ADMIN}),
    "request-changes": frozenset({Role.REVIEWER, Role.APPROVER, Role.ADMIN}),
    "reject": frozenset({Role.REVIEWER, Role.APPROVER, Role.ADMIN}),
    "approve": frozenset({Role.APPROVER, Role.ADMIN}),
    # Linking a purchase order re-issues the signed record: those accountable for the purchase decision.
    "link-purchase-order": frozenset({Role.APPROVER, Role.ADMIN}),
    # Attaching acceptance measurements re-decides the checks on measured evidence: those who judge the checks.
    "attach-as-built": frozenset({Role.REVIEWER, Role.ADMIN}),
    # Webhooks make the service send requests to URLs of the caller's choosing (SSRF): admins only.
    "manage-webhooks": frozenset({Role.ADMIN}),
    # GET /metrics with an API token (a scraper may send METRICS_TOKEN instead): counts of every user's work.
    "read-metrics": frozenset({Role.ADMIN}),
}
# Posting a decision at all; the action in the body then needs its own permission above.
PERMISSIONS["decide"] = PERMISSIONS["approve"] | PERMISSIONS["reject"] | PERMISSIONS["request-changes"]

class Scope(StrEnum):
    ALL = "all"  # reads every submission, record and task
    OWN = "own"  # reads only what its user submitted; anything else is 404, as if it did not exist


TOKEN_PATTERN = re.compile(r"^qc_(?P<prefix>[a-z0-9]{10})_(?P<secret>[A-Za-z0-9_-]{43})$")
LIFETIME_PATTERN = re.compile(r"^(?P<days>[0-9]{1,4})d$")
MAX_LIFETIME_DAYS = 3650
# Compared against when the prefix is unknown, so a miss costs the same as a wrong secret.
_DUMMY_HASH = hashlib.sha256(b"quotecheck: no such token").hexdigest()

F = TypeVar("F", bound=Callable[..., Any])


def hash_token(token: str) -> str:
    """Returns the hex SHA-256 of a token, the only form in which it is stored."""
    return hashlib.sha256(token.encode()).hexdigest()


def parse_lifetime(text: str) -> timedelta:
    """Returns the lifetime that ``text`` (``90d``: days) gives; InvalidRequest when it is not one."""
    match = LIFETIME_PATTERN.match(text.strip())
    if not match or not 1 <= int(match["days"]) <= MAX_LIFETIME_DAYS:
        raise InvalidRequest(f"--expires {text!r} must be a number of days from 1 to {MAX_LIFETIME_DAYS} "
                             "followed by d, e.g. 90d")
    return timedelta(days=int(match["days"]))


def default_lifetime(config: Mapping[str, Any]) -> timedelta:
    """Returns the configured lifetime of a new token (TOKEN_LIFETIME_DAYS)."""
    days = config.get("TOKEN_LIFETIME_DAYS", DEFAULT_TOKEN_LIFETIME_DAYS)
    if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= MAX_LIFETIME_DAYS:
        raise InvalidRequest(f"TOKEN_LIFETIME_DAYS must be a whole number of days from 1 to {MAX_LIFETIME_DAYS}, "
                             f"found {days!r}")
    return timedelta(days=days)


def aware(moment: datetime) -> datetime:
    """Returns ``moment`` timezone-aware (SQLite hands back naive UTC)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _new_row(user: User, role: str, scope: str, now: datetime, lifetime: timedelta,
             rotated_from: ApiToken | None = None) -> tuple[ApiToken, str]:
    prefix = secrets.token_hex(5)
    token = f"qc_{prefix}_{secrets.token_urlsafe(32)}"
    row = ApiToken(name=user.name, role=role, prefix=prefix, token_hash=hash_token(token), created_at=now,
                   user_id=user.id, scope=scope, expires_at=now + lifetime,
                   rotated_from_id=rotated_from.id if rotated_from is not None else None)
    return row, token


def create_token(session: Session, user_name: str, role: str, now: datetime, *,
                 lifetime: timedelta = timedelta(days=DEFAULT_TOKEN_LIFETIME_DAYS), scope: str = Scope.ALL,
                 create_user: bool = True) -> tuple[ApiToken, str]:
    """Returns the stored token row of user ``user_name`` and the token text, which exists nowhere else afterwards.

    The user is created when there is none and ``create_user`` is set (``token create --name``); otherwise
    it must exist (``token create --user``). Raises InvalidRequest for an unknown role or scope, a scope
    ``own`` on a role other than submitter, a malformed name, an unknown or disabled user.
    """
    if role not in ALL_ROLES:
        raise InvalidRequest(f"unknown role {role!r}; roles: {', '.join(Role)}")
    if scope not in set(Scope):
        raise InvalidRequest(f"unknown scope {scope!r}; scopes: {', '.join(Scope)}")
    if scope == Scope.OWN and role != Role.SUBMITTER:
        raise InvalidRequest(f"scope 'own' is for submitters (vendors); a {role} sees every submission")
    if create_user:
        user, _ = users.ensure_user(session, user_name, now)
    else:
        user = users.get_user(session, user_name)
    if user.disabled_at is not None:
        raise InvalidRequest(f"user {user.name!r} is disabled; a disabled user gets no tokens")
    row, token = _new_row(user, role, scope, now, lifetime)
    session.add(row)
    session.flush()
    append(session, action="token.created", actor=None, occurred_at=row.created_at,
           detail={"name": user.name, "user_id": user.id, "role": role, "scope": scope, "token_prefix": row.prefix,
                   "expires_at": timestamp(row.expires_at)})
    return row, token


def find_token(session: Session, reference: str) -> ApiToken:
    """Returns the token a prefix (or a whole token's text) names; InvalidRequest when none does."""
    reference = reference.strip()
    match = TOKEN_PATTERN.match(reference)
    prefix = match["prefix"] if match else reference
    row = session.exec(select(ApiToken).where(ApiToken.prefix == prefix)).first()
    if row is None:
        raise InvalidRequest(f"there is no token with prefix {prefix!r}; `quotecheck token list` shows them")
    return row


def revoke_token(session: Session, row: ApiToken, now: datetime) -> None:
    """Revokes ``row`` (requests with it get 401 from now on) and audits it; nothing when it was revoked."""
    if row.revoked_at is not None:
        return
    row.revoked_at = now
    session.add(row)
    session.flush()
    append(session, action="token.revoked", actor=None, occurred_at=now,
           detail={"name": row.name, "user_id": row.user_id, "role": row.role, "token_prefix": row.prefix})


def rotate_token(session: Session, row: ApiToken, now: datetime, lifetime: timedelta) -> tuple[ApiToken, str]:
    """Returns a new token of the same user, role and scope that replaces ``row``, which is revoked now.

    The new row names the old one (``rotated_from_id``), so the history of a token stays readable.
    """
    if row.revoked_at is not None:
        raise InvalidRequest(f"token {row.prefix} is revoked; create a new one with `quotecheck token create`")
    user = session.get(User, row.user_id)
    assert user is not None  # a foreign key
    if user.disabled_at is not None:
        raise InvalidRequest(f"user {user.name!r} is disabled; a disabled user gets no tokens")
    new, token = _new_row(user, row.role, row.scope, now, lifetime, rotated_from=row)
    row.revoked_at = now
    session.add(row)
    session.add(new)
    session.flush()
    append(session, action="token.rotated", actor=None, occurred_at=now,
           detail={"name": user.name, "user_id": user.id, "role": row.role, "scope": row.scope,
                   "token_prefix": new.prefix, "rotated_from": row.prefix, "expires_at": timestamp(new.expires_at)})
    return new, token


_TOKEN, _USER = ApiToken.__table__, User.__table__  # type: ignore[attr-defined]
# A token by its prefix, with its user. On the tables, not the models: every request asks, and the ORM's query
# path costs about as much again as the statement; the rows become (detached) model objects here.
_TOKEN_AND_USER = (select(_TOKEN, _USER).join(_USER, _USER.c.id == _TOKEN.c.user_id, isouter=True)
                   .where(_TOKEN.c.prefix == bindparam("prefix")))


def authenticate(session: Session, header: str | None, now: datetime) -> Actor:
    """Returns the Actor (user, role, scope) of a valid bearer token; Unauthorized otherwise.

    A token is valid when its secret matches, it is neither revoked nor expired, and its user is not disabled.
    """
    if not header:
        raise Unauthorized("this endpoint needs an API token: send 'Authorization: Bearer <token>'; "
                           "create one with `quotecheck token create --user NAME --role ROLE`")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("the Authorization header must use the Bearer scheme", invalid_token=True)
    token = token.strip()
    match = TOKEN_PATTERN.match(token)
    row = user = None
    if match:
        # The token's user comes with it (one round trip instead of two): every valid token needs its user.
        found = session.connection().execute(_TOKEN_AND_USER, {"prefix": match["prefix"]}).first()
        if found is not None:
            columns = found._mapping
            row = ApiToken(**{column.name: columns[column] for column in _TOKEN.columns})
            if columns[_USER.c.id] is not None:
                user = User(**{column.name: columns[column] for column in _USER.columns})
    stored = row.token_hash if row is not None else _DUMMY_HASH
    if not hmac.compare_digest(stored, hash_token(token)) or row is None:
        raise Unauthorized("the API token is not valid", invalid_token=True)
    return actor_of_token(session, row, now, user)


def actor_of_token(session: Session, row: ApiToken, now: datetime, user: User | None = None) -> Actor:
    """Returns the Actor of a token row whose secret was checked (now, or at a browser sign-in); Unauthorized
    when the token is revoked or expired, or its user is disabled, by ``now``.

    ``user``: the token's user when the caller read it with the token; otherwise it is read here.
    """
    if row.revoked_at is not None:
        successor = session.exec(select(ApiToken.prefix).where(ApiToken.rotated_from_id == row.id)).first()
        if successor is not None:
            raise Unauthorized(f"the API token {row.prefix} was rotated at {timestamp(aware(row.revoked_at))}; "
                               f"use its replacement (token {successor})", invalid_token=True)
        raise Unauthorized(f"the API token {row.prefix} of {row.name!r} was revoked", invalid_token=True)
    if aware(row.expires_at) <= now:
        raise Unauthorized(f"the API token {row.prefix} of {row.name!r} expired at "
                           f"{timestamp(aware(row.expires_at))}; ask for a new one "
                           f"(`quotecheck token rotate {row.prefix}`)", invalid_token=True)
    if user is None:
        user = session.get(User, row.user_id)
    if user is None or user.disabled_at is not None:
        raise Unauthorized(f"the user {row.name!r} of API token {row.prefix} is disabled", invalid_token=True)
    return Actor(name=user.name, role=row.role, token_id=row.id, token_prefix=row.prefix, user_id=user.id,
                 scope=row.scope)


def current_actor() -> Actor:
    """Returns the Actor that authenticated this request (set by ``require``)."""
    return g.quotecheck_actor


# How Forbidden names each action.
ACTION_WORDS = {"read": "read", "submit": "submit quotes", "revise": "revise quotes", "waive": "waive checks",
                "request-changes": "request changes", "reject": "reject quotes", "approve": "approve quotes",
                "link-purchase-order": "link purchase orders to records",
                "attach-as-built": "attach as-built measurements to records", "manage-webhooks": "manage webhooks",
                "read-metrics": "read the metrics",
                "decide": "post decisions (approve, reject, request-changes)"}


def authorize(actor: Actor, action: str) -> None:
    """Raises Forbidden unless ``actor``'s role may perform ``action``."""
    allowed = PERMISSIONS[action]
    if actor.role not in allowed:
        raise Forbidden(f"role {actor.role!r} may not {ACTION_WORDS[action]}; that needs one of: "
                        f"{', '.join(sorted(allowed))}")


def require(action: str) -> Callable[[F], F]:
    """Returns a view decorator that authenticates the request and checks that its role may ``action``."""

    def decorate(view: F) -> F:
        @wraps(view)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            # Authentication is one SELECT (two for a rotated token): no transaction needed around it.
            with get_db().autocommit_session() as session:
                actor = authenticate(session, request.headers.get("Authorization"),
                                     clock_of(current_app.config)())
            authorize(actor, action)
            g.quotecheck_actor = actor
            return view(*args, **kwargs)

        meta = dict(getattr(view, "openapi", {}))
        meta["security"] = action
        wrapped.openapi = meta  # type: ignore[attr-defined]
        return wrapped  # type: ignore[return-value]

    return decorate


def public(view: F) -> F:
    """Marks a view as open without a token (health, schemas, API description)."""
    meta = dict(getattr(view, "openapi", {}))
    meta["security"] = None
    view.openapi = meta  # type: ignore[attr-defined]
    return view


def init_app(app: Flask) -> None:
    """Checks the token lifetime setting, so a bad one stops the start rather than the first token."""
    default_lifetime(app.config)
    app.extensions["quotecheck.auth"] = PERMISSIONS

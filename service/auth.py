"""API tokens and roles: ``Authorization: Bearer qc_<prefix>_<secret>``.

Only the SHA-256 of a token is stored. The prefix finds the row; the hash is compared in constant time,
so a guess reveals nothing about how close it came.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from functools import wraps
from typing import Any, TypeVar

from flask import Flask, g, request
from sqlmodel import Session, select

from service.audit import Actor, append
from service.db import get_db
from service.errors import Forbidden, InvalidRequest, Unauthorized
from service.models import ApiToken


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
}
# Posting a decision at all; the action in the body then needs its own permission above.
PERMISSIONS["decide"] = PERMISSIONS["approve"] | PERMISSIONS["reject"] | PERMISSIONS["request-changes"]

TOKEN_PATTERN = re.compile(r"^qc_(?P<prefix>[a-z0-9]{10})_(?P<secret>[A-Za-z0-9_-]{43})$")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._@+-]{0,199}$")
# Compared against when the prefix is unknown, so a miss costs the same as a wrong secret.
_DUMMY_HASH = hashlib.sha256(b"quotecheck: no such token").hexdigest()

F = TypeVar("F", bound=Callable[..., Any])


def hash_token(token: str) -> str:
    """Returns the hex SHA-256 of a token, the only form in which it is stored."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(session: Session, name: str, role: str, now: datetime) -> tuple[ApiToken, str]:
    """Returns the stored token row and the token text, which exists nowhere else afterwards.

    Raises InvalidRequest for an unknown role, a malformed name or a name already taken.
    """
    if role not in ALL_ROLES:
        raise InvalidRequest(f"unknown role {role!r}; roles: {', '.join(Role)}")
    if not NAME_PATTERN.match(name):
        raise InvalidRequest(f"token name {name!r} must be 1-200 letters, digits, spaces or ._@+-")
    if session.exec(select(ApiToken).where(ApiToken.name == name)).first() is not None:
        raise InvalidRequest(f"a token named {name!r} exists already; names identify people for the "
                             "four-eyes rule, so each must be unique")
    prefix = secrets.token_hex(5)
    token = f"qc_{prefix}_{secrets.token_urlsafe(32)}"
    row = ApiToken(name=name, role=role, prefix=prefix, token_hash=hash_token(token), created_at=now)
    session.add(row)
    session.flush()
    append(session, action="token.created", actor=None, occurred_at=row.created_at,
           detail={"name": name, "role": role, "token_prefix": prefix})
    return row, token


def authenticate(session: Session, header: str | None) -> Actor:
    """Returns the Actor of a valid, unrevoked bearer token; Unauthorized otherwise."""
    if not header:
        raise Unauthorized("this endpoint needs an API token: send 'Authorization: Bearer <token>'; "
                           "create one with `quotecheck token create --name NAME --role ROLE`")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("the Authorization header must use the Bearer scheme", invalid_token=True)
    token = token.strip()
    match = TOKEN_PATTERN.match(token)
    row = None
    if match:
        row = session.exec(select(ApiToken).where(ApiToken.prefix == match["prefix"])).first()
    stored = row.token_hash if row is not None else _DUMMY_HASH
    if not hmac.compare_digest(stored, hash_token(token)) or row is None:
        raise Unauthorized("the API token is not valid", invalid_token=True)
    if row.revoked_at is not None:
        raise Unauthorized(f"the API token {row.name!r} was revoked", invalid_token=True)
    return Actor(name=row.name, role=row.role, token_id=row.id, token_prefix=row.prefix)


def current_actor() -> Actor:
    """Returns the Actor that authenticated this request (set by ``require``)."""
    return g.quotecheck_actor


# How Forbidden names each action.
ACTION_WORDS = {"read": "read", "submit": "submit quotes", "revise": "revise quotes", "waive": "waive checks",
                "request-changes": "request changes", "reject": "reject quotes", "approve": "approve quotes",
                "link-purchase-order": "link purchase orders to records",
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
            with get_db().session() as session:
                actor = authenticate(session, request.headers.get("Authorization"))
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
    """Nothing to set up per app yet; kept so every subsystem has the same entry point."""
    app.extensions["quotecheck.auth"] = PERMISSIONS

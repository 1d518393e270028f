"""Signing in to the pages: a user's API token opens a browser session kept in the database.

The browser holds a random cookie (``__Host-`` prefixed: Secure, HttpOnly, SameSite=Strict, path ``/``, no
domain) and the database only its SHA-256, with the token it was opened with, a per-session CSRF token and an
expiry (UI_SESSION_LIFETIME_S, never past the token's own). Each request re-checks the token, so a token
revoked, rotated or expired, or a user disabled, ends the session at once; signing out deletes the row.
The API token itself is never stored in the browser.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import Response, current_app, g, request
from sqlalchemy import delete
from sqlmodel import Session, col, select

from service.accounts.actors import Actor
from service.accounts.auth import actor_of_token, authenticate, aware
from service.errors import Forbidden, Unauthorized
from service.http import now
from service.persistence.db import get_db
from service.persistence.models import ApiToken, UiSession

COOKIE = "__Host-quotecheck-session"
# Before sign-in there is no session to hold a CSRF token: the sign-in form's token lives in its own cookie.
SIGN_IN_COOKIE = "__Host-quotecheck-sign-in"
SIGN_IN_COOKIE_S = 3600
CSRF_FIELD = "csrf_token"


@dataclass(frozen=True)
class Visitor:
    """The signed-in user of a request: who they act as, their session's CSRF token, and when it ends."""

    actor: Actor
    csrf_token: str
    expires_at: datetime


def _hash(cookie: str) -> str:
    return hashlib.sha256(cookie.encode()).hexdigest()


def lifetime() -> timedelta:
    """Returns how long a new session lasts (UI_SESSION_LIFETIME_S)."""
    return timedelta(seconds=current_app.config["UI_SESSION_LIFETIME_S"])


def sign_in(token: str) -> tuple[str, Visitor]:
    """Returns the cookie of a new session for the user of ``token`` and its visitor; Unauthorized for a bad token.

    The previous session of this browser, if any, ends first (a new cookie each time: no session fixation).
    """
    moment = now()
    with get_db().session() as session:
        actor = authenticate(session, f"Bearer {token.strip()}", moment)
        row = session.get(ApiToken, actor.token_id)
        assert row is not None  # authenticate found it
        _end(session, request.cookies.get(COOKIE))
        session.execute(delete(UiSession).where(col(UiSession.expires_at) <= moment))
        cookie = secrets.token_urlsafe(32)
        expires = min(moment + lifetime(), aware(row.expires_at))
        stored = UiSession(cookie_hash=_hash(cookie), token_id=actor.token_id, csrf_token=secrets.token_urlsafe(32),
                           created_at=moment, expires_at=expires)
        session.add(stored)
        session.commit()
        return cookie, Visitor(actor, stored.csrf_token, expires)


def _end(session: Session, cookie: str | None) -> None:
    if cookie:
        session.execute(delete(UiSession).where(col(UiSession.cookie_hash) == _hash(cookie)))


def sign_out() -> None:
    """Ends this browser's session (its row is deleted: the cookie opens nothing any more)."""
    with get_db().session() as session:
        _end(session, request.cookies.get(COOKIE))
        session.commit()
    g.ui_visitor = None


def visitor() -> Visitor | None:
    """Returns the signed-in visitor of this request, or None (no cookie, an unknown or ended session, or a token
    that is no longer valid)."""
    if "ui_visitor" in g:
        return g.ui_visitor
    g.ui_visitor = None
    cookie = request.cookies.get(COOKIE)
    if cookie:
        moment = now()
        with get_db().session() as session:
            stored = session.exec(select(UiSession).where(UiSession.cookie_hash == _hash(cookie))).first()
            row = session.get(ApiToken, stored.token_id) if stored is not None else None
            if stored is not None and row is not None and aware(stored.expires_at) > moment:
                try:
                    actor = actor_of_token(session, row, moment)
                except Unauthorized:
                    actor = None
                if actor is not None:
                    g.ui_visitor = Visitor(actor, stored.csrf_token, aware(stored.expires_at))
                    # Code shared with the API reads the acting user from here (service.accounts.auth.current_actor).
                    g.quotecheck_actor = actor
    return g.ui_visitor


def set_session_cookie(response: Response, cookie: str, expires: datetime) -> None:
    response.set_cookie(COOKIE, cookie, expires=expires, path="/", secure=True, httponly=True, samesite="Strict")


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="Strict")


def sign_in_csrf(response: Response | None = None) -> str:
    """Returns the CSRF token of the sign-in form: the one this browser's sign-in cookie holds, or a new one set
    on ``response``."""
    current = request.cookies.get(SIGN_IN_COOKIE)
    if current:
        return current
    token = secrets.token_urlsafe(32)
    if response is not None:
        response.set_cookie(SIGN_IN_COOKIE, token, max_age=SIGN_IN_COOKIE_S, path="/", secure=True, httponly=True,
                            samesite="Strict")
    return token


def check_csrf(expected: str | None) -> None:
    """Raises Forbidden unless the form's CSRF field equals ``expected`` (compared in constant time)."""
    sent = request.form.get(CSRF_FIELD, "")
    if not expected or not sent or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise Forbidden("the form was not sent from a page of this site, or its security token is out of date "
                        "(CSRF check). Nothing was changed: reload the page and send the form again.")

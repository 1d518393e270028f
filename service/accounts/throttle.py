"""Failed sign-ins to the pages, counted per client address and per token prefix, in the database.

After SIGN_IN_MAX_FAILURES failures within SIGN_IN_WINDOW_S seconds from one client address, or with tokens of one
prefix (``qc_<prefix>_…``), further sign-ins from that client or with that prefix are refused (429, Retry-After),
a right token too, until enough of those failures are older than the window. The counts live in the database
(table ``sign_in_failure``), so every gunicorn worker process sees the same ones; a refused attempt is not counted
(the limit ends when the window passes, however often a client asks meanwhile), and a sign-in that succeeds resets
no count. Each check deletes the failures older than the window, so the table holds one window's failures at most.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from flask import Flask, current_app, request
from sqlalchemy import delete
from sqlmodel import col, select

from service.accounts.auth import TOKEN_PATTERN, aware
from service.errors import InvalidRequest
from service.persistence.db import get_db
from service.persistence.models import SignInFailure

SETTINGS = ("SIGN_IN_MAX_FAILURES", "SIGN_IN_WINDOW_S")
CLIENT_LENGTH = 64  # the column's width: an IPv6 address with a zone fits


def client_address() -> str:
    """Returns the address of the client of this request: the peer's, or when the peer is one of the proxies
    FORWARDED_ALLOW_IPS trusts (``*``: any), the last address of its ``X-Forwarded-For`` (the one that proxy saw)."""
    peer = request.remote_addr or ""
    trusted = str(current_app.config.get("FORWARDED_ALLOW_IPS") or "")
    allowed = {address.strip() for address in trusted.split(",")}
    forwarded = request.headers.get("X-Forwarded-For", "").split(",")[-1].strip()
    if forwarded and ("*" in allowed or peer in allowed):
        return forwarded[:CLIENT_LENGTH]
    return peer[:CLIENT_LENGTH]


def prefix_of(token: str) -> str | None:
    """Returns the prefix of a token's text; None when the text is no token (its failure counts for the client
    only)."""
    match = TOKEN_PATTERN.match(token.strip())
    return match["prefix"] if match else None


def _window() -> timedelta:
    return timedelta(seconds=current_app.config["SIGN_IN_WINDOW_S"])


def wait_s(client: str, prefix: str | None, now: datetime) -> int:
    """Returns how many seconds a sign-in from ``client`` with ``prefix`` must wait; 0 when it may go ahead.

    Deletes the failures older than the window first (the table never holds more than one window's)."""
    limit, window = current_app.config["SIGN_IN_MAX_FAILURES"], _window()
    wait = 0
    with get_db().session() as session:
        session.execute(delete(SignInFailure).where(col(SignInFailure.failed_at) <= now - window))
        session.commit()
        keys = [(SignInFailure.client, client)] + ([(SignInFailure.token_prefix, prefix)] if prefix else [])
        for column, value in keys:
            times = session.exec(select(SignInFailure.failed_at).where(col(column) == value)
                                 .order_by(col(SignInFailure.failed_at).desc()).limit(limit)).all()
            if len(times) >= limit:
                # Allowed again once the limit-th newest failure leaves the window (a whole second at least).
                wait = max(wait, 1, math.ceil((aware(times[-1]) + window - now).total_seconds()))
    return wait


def record_failure(client: str, prefix: str | None, now: datetime) -> None:
    """Counts a failed sign-in from ``client`` with ``prefix``."""
    with get_db().session() as session:
        session.add(SignInFailure(client=client, token_prefix=prefix, failed_at=now))
        session.commit()


def check_settings(config: Mapping[str, Any]) -> None:
    """Raises InvalidRequest unless SIGN_IN_MAX_FAILURES and SIGN_IN_WINDOW_S are whole numbers of at least 1."""
    for name in SETTINGS:
        value = config.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidRequest(f"{name} must be a whole number of at least 1, found {value!r}")


def init_app(app: Flask) -> None:
    """Checks the settings, so a bad one stops the start rather than the first sign-in."""
    check_settings(app.config)

"""Failed sign-ins to the pages are counted per client address and per token prefix (service/accounts/throttle.py):
past SIGN_IN_MAX_FAILURES (20) within SIGN_IN_WINDOW_S (900 s) the sign-in form answers 429 with Retry-After."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from sqlmodel import func, select
from ui_support import csrf_of

from service.errors import InvalidRequest
from service.persistence.db import get_db
from service.persistence.models import SignInFailure

LIMIT, WINDOW_S = 20, 900  # the defaults of service/config.py, written out


def form_from(app: Flask, address: str, headers: dict[str, str] | None = None) -> Callable[[str], Any]:
    """Returns a function that posts the sign-in form with a token from a browser at ``address``."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    page = client.get("/ui/sign-in", headers=headers)
    assert page.status_code == 200
    csrf = csrf_of(page.get_data(as_text=True))
    return lambda token: client.post("/ui/sign-in", data={"csrf_token": csrf, "token": token}, headers=headers)


def wrong_secret(token: str) -> str:
    """Returns a token of the same prefix as ``token`` with another secret."""
    return f"{token[:13]}_{secrets.token_urlsafe(32)}"


def any_token() -> str:
    return f"qc_{secrets.token_hex(5)}_{secrets.token_urlsafe(32)}"


def failures(app: Flask) -> int:
    with app.app_context(), get_db(app).session() as session:
        return session.exec(select(func.count()).select_from(SignInFailure)).one()


def test_thirty_wrong_tokens_in_a_row_get_429_past_the_limit_until_the_window_passes(app, as_role, clock):
    # Given a reviewer's token, and a client that tries 30 wrong secrets of its prefix
    token = as_role("reviewer").token
    post = form_from(app, "198.51.100.7")
    statuses = [post(wrong_secret(token)) for _ in range(30)]

    # Then the first 20 are refused as wrong (403) and the 10 after them as too many (429, Retry-After, a page)
    assert [r.status_code for r in statuses] == [403] * LIMIT + [429] * 10
    refused = statuses[-1]
    assert refused.mimetype == "text/html" and "Too many failed sign-ins" in refused.get_data(as_text=True)
    assert 0 < int(refused.headers["Retry-After"]) <= WINDOW_S
    # Refused attempts are not counted: the window is not pushed further out by asking again
    assert failures(app) == LIMIT

    # And the right token is refused too while the window lasts
    assert post(token).status_code == 429

    # When the window has passed, the right token signs in, and the old failures are gone
    clock.advance(seconds=WINDOW_S + 1)
    assert post(token).status_code == 303
    assert failures(app) == 0


def test_another_client_is_not_blocked_but_the_same_prefix_from_another_client_is(app, as_role):
    # Given a client that failed 20 times with the token prefix of a reviewer
    victim, other = as_role("reviewer").token, as_role("approver").token
    attacker = form_from(app, "198.51.100.7")
    assert [attacker(wrong_secret(victim)).status_code for _ in range(LIMIT)] == [403] * LIMIT

    # Then another client signs in with another token
    assert form_from(app, "203.0.113.5")(other).status_code == 303
    # But the reviewer's prefix is refused from any client, the right token too
    elsewhere = form_from(app, "203.0.113.9")
    response = elsewhere(victim)
    assert response.status_code == 429 and int(response.headers["Retry-After"]) > 0
    # And the attacker's address is refused with any token
    assert attacker(other).status_code == 429


def test_a_successful_sign_in_does_not_reset_another_clients_count(app, as_role):
    # Given a client that failed 20 times with tokens of random prefixes, and text that is no token
    attacker = form_from(app, "2001:db8::7")
    assert {attacker(any_token() if i % 2 else "qc_nope").status_code for i in range(LIMIT)} == {403}

    # When another client signs in
    assert form_from(app, "203.0.113.5")(as_role("reviewer").token).status_code == 303

    # Then the first is still refused
    assert attacker(as_role("approver").token).status_code == 429


def test_forwarded_for_names_the_client_only_behind_a_trusted_proxy(app, as_role):
    # Given failures sent through the trusted proxy (127.0.0.1) for one client, and from an untrusted peer that
    # claims a new forwarded address each time
    proxied = form_from(app, "127.0.0.1", headers={"X-Forwarded-For": "10.1.1.1, 198.51.100.7"})
    assert {proxied(any_token()).status_code for _ in range(LIMIT)} == {403}
    direct = app.test_client()
    direct.environ_base["REMOTE_ADDR"] = "203.0.113.5"
    csrf = csrf_of(direct.get("/ui/sign-in").get_data(as_text=True))
    for i in range(LIMIT):
        headers = {"X-Forwarded-For": f"192.0.2.{i}"}
        assert direct.post("/ui/sign-in", data={"csrf_token": csrf, "token": any_token()},
                           headers=headers).status_code == 403

    # Then the proxied client is refused, another client behind the same proxy is not, and the untrusted peer is
    # counted by its own address whatever it claims
    token = as_role("reviewer").token
    assert proxied(token).status_code == 429
    assert form_from(app, "127.0.0.1", headers={"X-Forwarded-For": "198.51.100.8"})(token).status_code == 303
    assert direct.post("/ui/sign-in", data={"csrf_token": csrf, "token": token},
                       headers={"X-Forwarded-For": "192.0.2.200"}).status_code == 429


@pytest.mark.parametrize("setting", [{"SIGN_IN_MAX_FAILURES": 0}, {"SIGN_IN_WINDOW_S": "900"},
                                     {"SIGN_IN_WINDOW_S": True}])
def test_a_bad_limit_setting_stops_the_start(make_app, setting):
    with pytest.raises(InvalidRequest, match=next(iter(setting))):
        make_app(**setting)

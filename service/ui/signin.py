"""The landing page, signing in with an API token, and signing out."""

from __future__ import annotations

import math

from flask import Response, redirect, request, url_for

from service.accounts import throttle
from service.errors import Unauthorized
from service.http import now
from service.ui import session as ui_session
from service.ui.blueprint import bp
from service.ui.render import page, signed_in

# What a sign-in may return to: a page of this site, never another origin.
_SAFE_NEXT_PREFIX = "/ui/"


def _next_page(value: str | None) -> str:
    """Returns where to go after signing in: ``value`` when it is a path of these pages, else the home page.

    A value with a control character (CR or LF would split the Location header: a 500 from the server, or a
    header of the sender's choosing behind a lenient proxy), a backslash or a second leading slash (another
    host, in some browsers) is not a path of these pages."""
    if (value and value.startswith(_SAFE_NEXT_PREFIX) and not value.startswith("//") and "\\" not in value
            and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)):
        return value
    return url_for("ui.home")


@bp.get("/")
def landing() -> Response:
    """The landing page: where the reviewer pages, the API reference and the health endpoints are."""
    return page("landing.html")


@bp.get("/ui/")
@signed_in
def home() -> Response:
    """The signed-in user's first page: the queue that most likely holds their work."""
    actor = ui_session.visitor().actor  # type: ignore[union-attr]
    slug = {"reviewer": "review", "approver": "approval"}.get(actor.role, "mine")
    return redirect(url_for("ui.queue", slug=slug), 303)


def _sign_in_page(status: int = 200, error: str | None = None) -> Response:
    token = ui_session.sign_in_csrf()
    response = page("sign_in.html", status=status, error=error, sign_in_csrf=token,
                    next=_next_page(request.values.get("next")))
    if request.cookies.get(ui_session.SIGN_IN_COOKIE) != token:
        response.set_cookie(ui_session.SIGN_IN_COOKIE, token, max_age=ui_session.SIGN_IN_COOKIE_S, path="/",
                            secure=True, httponly=True, samesite="Strict")
    return response


@bp.get("/ui/sign-in")
def sign_in() -> Response:
    """The sign-in form: paste an API token (`quotecheck token create`)."""
    return _sign_in_page()


@bp.post("/ui/sign-in")
def sign_in_post() -> Response:
    token = request.form.get("token", "")
    if not token.strip():
        return _sign_in_page(422, "Paste your API token into the field.")
    client, prefix, moment = throttle.client_address(), throttle.prefix_of(token), now()
    wait = throttle.wait_s(client, prefix, moment)
    if wait:
        minutes = math.ceil(wait / 60)
        response = _sign_in_page(429, f"Too many failed sign-ins from this address or with this token: try again in "
                                      f"{minutes} minute{'s' if minutes != 1 else ''}.")
        response.headers["Retry-After"] = str(wait)
        return response
    try:
        cookie, visitor = ui_session.sign_in(token)
    except Unauthorized as error:
        throttle.record_failure(client, prefix, moment)
        return _sign_in_page(403, f"Not signed in: {error.detail}.")
    response = redirect(_next_page(request.form.get("next")), 303)
    ui_session.set_session_cookie(response, cookie, visitor.expires_at)
    response.delete_cookie(ui_session.SIGN_IN_COOKIE, path="/", secure=True, httponly=True, samesite="Strict")
    return response


@bp.post("/ui/sign-out")
def sign_out() -> Response:
    ui_session.sign_out()
    response = redirect(url_for("ui.sign_in", signed_out=1), 303)
    ui_session.clear_session_cookie(response)
    return response

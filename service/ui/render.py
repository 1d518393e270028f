"""What every page shares: the signed-in check, the CSRF check of every form, the page context, the error page
and the security headers."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar
from urllib.parse import urlencode

from flask import Response, current_app, redirect, render_template, request, url_for
from werkzeug.exceptions import HTTPException

from rules.errors import QuotecheckError
from service.app.queues import QUEUES
from service.app.review import may
from service.errors import Forbidden, status_of
from service.ui import session as ui_session
from service.ui.blueprint import bp
from service.ui.present import STATE_WORDS, STATUS, VERDICT

F = TypeVar("F", bound=Callable[..., Any])

# Seconds between a browser's reloads of a page whose task is still queued or running: the page is answered with a
# Refresh header, so it reloads itself without script (the PDF being rendered, a search, a ranking).
TASK_REFRESH_S = 2

# Scripts and styles only from this site's own files (no inline script), nothing framed, forms post here only;
# the script fetches only from this site (the what-if page recomputes in place from its own address).
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
}


def page(template: str, status: int = 200, **context: Any) -> Response:
    """Returns ``template`` (under templates/ui/) rendered with ``context`` as an HTML response."""
    response = current_app.response_class(render_template(f"ui/{template}", **context), status=status,
                                          mimetype="text/html")
    return response


def signed_in(view: F) -> F:
    """Returns a view that needs a signed-in visitor: without one a GET is sent to the sign-in page (and back)."""

    @wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if ui_session.visitor() is None:
            target = request.full_path.rstrip("?")
            return redirect(url_for("ui.sign_in") + "?" + urlencode({"next": target}), 303)
        return view(*args, **kwargs)

    return wrapped  # type: ignore[return-value]


def current_visitor() -> ui_session.Visitor:
    """Returns the signed-in visitor (a view under ``signed_in`` always has one)."""
    visitor = ui_session.visitor()
    assert visitor is not None
    return visitor


@bp.before_request
def guard_forms() -> None:
    """Checks the CSRF token of every form sent (POST): the session's, or before sign-in the sign-in cookie's."""
    if request.method != "POST":
        return
    # A pasted or uploaded submission may be as large as any request body (MAX_CONTENT_LENGTH).
    request.max_form_memory_size = current_app.config["MAX_CONTENT_LENGTH"]
    if request.endpoint == "ui.sign_in_post":
        ui_session.check_csrf(request.cookies.get(ui_session.SIGN_IN_COOKIE))
        return
    visitor = ui_session.visitor()
    if visitor is None and request.endpoint == "ui.sign_out":
        return  # nothing to protect: the session has ended already, and signing out only clears the cookie
    if visitor is None:
        raise Forbidden("you are not signed in, or your session ended: sign in, then send the form again")
    ui_session.check_csrf(visitor.csrf_token)


@bp.after_app_request
def security_headers(response: Response) -> Response:
    """Adds the security headers to every page (and the page of a path under /ui that none serves); a page for a
    signed-in user is never cached."""
    if request.blueprint != bp.name and not request.path.startswith("/ui"):
        return response
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if request.cookies.get(ui_session.COOKIE) or ui_session.visitor() is not None:
        response.headers.setdefault("Cache-Control", "no-store")
    return response


@bp.app_context_processor
def page_context() -> dict[str, Any]:
    """Returns what every page's template may use: the visitor, the CSRF field, queues, labels."""
    visitor = ui_session.visitor()
    return {"visitor": visitor, "csrf_field": ui_session.CSRF_FIELD,
            "csrf_token": visitor.csrf_token if visitor else "", "queues": QUEUES, "may": may,
            "STATUS": STATUS, "VERDICT": VERDICT, "STATE_WORDS": STATE_WORDS}


def error_page(status: int, title: str, detail: str, problems: list[Any] | None = None) -> Response:
    return page("error.html", status=status, title=title, detail=detail, problems=problems or [])


@bp.errorhandler(Exception)
def handle_error(error: Exception) -> Response:
    """Renders any error of a page as a page (the API's errors stay problem+json)."""
    if isinstance(error, QuotecheckError):
        status = status_of(error)
        if status >= 500:
            current_app.logger.error("%s: %s", type(error).__name__, error)
        response = error_page(status, error.title, error.detail, [p.as_dict() for p in error.problems])
        # A refusal to take more work (429) says when to ask again, on a page as in the API.
        retry_after = (error.headers() if callable(getattr(error, "headers", None)) else {}).get("Retry-After")
        if retry_after is not None:
            response.headers["Retry-After"] = retry_after
        return response
    if isinstance(error, HTTPException):
        status = error.code or 500
        detail = error.description or error.name
        if status == 413:
            detail = f"the form is larger than the limit of {current_app.config['MAX_CONTENT_LENGTH']:,} bytes"
        return error_page(status, error.name, detail)
    current_app.logger.exception("unhandled error")
    return error_page(500, "Internal server error", "the server failed to handle the request; the error was logged")


def reloading(response: Response) -> Response:
    """Returns ``response`` told to reload itself every TASK_REFRESH_S seconds (its task is still running)."""
    response.headers["Refresh"] = str(TASK_REFRESH_S)
    return response

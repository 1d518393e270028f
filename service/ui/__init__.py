"""The reviewer pages: server-rendered HTML under ``/ui`` (templates/ui/) and the landing page ``/``.

No front-end build: Jinja templates, one stylesheet and one small script served from templates/ui/static/
(the Content-Security-Policy allows no inline script). Sign-in takes a user's API token and opens a browser
session (service/ui/session.py); every form carries the session's CSRF token. The pages call the same
permission checks, four-eyes rules and store functions as the API.
"""

from __future__ import annotations

from flask import Flask, Response, request
from jinja2 import StrictUndefined
from werkzeug.exceptions import HTTPException

from service import errors
from service.record.isolation import isolate, isolate_text
from service.record.view import display_number, shown
from service.ui import (  # noqa: F401  (each module adds its routes to the blueprint)
    actions,
    advice,
    compare,
    downloads,
    intake,
    queue_views,
    signin,
    submission_views,
    what_if,
)
from service.ui.blueprint import bp
from service.ui.present import figure, moment
from service.ui.render import handle_error

PAGE_PREFIXES = ("/ui/", "/ui")


def _not_routed(error: HTTPException) -> Response:
    """Answers a path under /ui that no page has (404, 405) with a page; any other path keeps problem+json."""
    if request.path.startswith(PAGE_PREFIXES):
        return handle_error(error)
    return errors.handle_error(error)


def init_app(app: Flask) -> None:
    """Registers the pages, their template settings and the page form of errors no route reached."""
    # Every value a page writes passes through ``shown`` (invisible and reordering characters written out), as
    # in the record's PDF; an undefined name in a template is an error, not an empty string.
    app.jinja_options = {**app.jinja_options, "finalize": shown, "undefined": StrictUndefined}
    app.add_template_filter(display_number, "num")
    # Text a person wrote is written in a ``<bdi>`` (``isolate``; ``isolate_text`` in a <title>), so that right-to-left
    # text cannot move the figures beside it (service/record/isolation.py).
    app.add_template_filter(isolate, "isolate")
    app.add_template_filter(isolate_text, "isolate_text")
    app.add_template_filter(moment, "moment")
    app.add_template_filter(figure, "figure")
    app.register_blueprint(bp)
    for status in (404, 405):
        app.register_error_handler(status, _not_routed)

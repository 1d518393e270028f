"""Helpers for the tests of the pages (service/ui): a browser-like client signed in with a token, and readers of
what a page shows."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from api_support import Caller
from flask import Flask
from flask.testing import FlaskClient

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
SUBMISSION_LINK = re.compile(r'href="/ui/submissions/([0-9a-f-]{36})"')


def csrf_of(page: str) -> str:
    """Returns the CSRF token of the first form of a page."""
    match = CSRF.search(page)
    assert match, "the page has no form with a CSRF token"
    return match.group(1)


@dataclass
class Browser:
    """A test client holding a signed-in session's cookie, like a browser after signing in."""

    client: FlaskClient
    name: str
    csrf: str

    def get(self, url: str, **kwargs: Any) -> Any:
        return self.client.get(url, **kwargs)

    def text(self, url: str) -> str:
        response = self.client.get(url)
        assert response.status_code == 200, (url, response.status_code, response.get_data(as_text=True)[:2000])
        return response.get_data(as_text=True)

    def post(self, url: str, data: dict[str, Any] | None = None, csrf: bool = True, **kwargs: Any) -> Any:
        form = dict(data or {})
        if csrf:
            form.setdefault("csrf_token", self.csrf)
        return self.client.post(url, data=form, **kwargs)


def sign_in(app: Flask, caller: Caller) -> Browser:
    """Returns a browser signed in with ``caller``'s token through the sign-in form."""
    client = app.test_client()
    form = client.get("/ui/sign-in")
    assert form.status_code == 200
    response = client.post("/ui/sign-in", data={"csrf_token": csrf_of(form.get_data(as_text=True)),
                                                "token": caller.token})
    assert response.status_code == 303, response.get_data(as_text=True)[:2000]
    page = client.get("/ui/queue/all").get_data(as_text=True)
    return Browser(client, caller.name, csrf_of(page))


def listed(page: str) -> set[str]:
    """Returns the ids of the submissions a queue page lists in its table."""
    table = page.partition('<table class="queue">')[2].partition("</table>")[0]
    return set(SUBMISSION_LINK.findall(table))


def version_of(page: str) -> str:
    """Returns the submission version the page's forms were rendered from."""
    match = re.search(r'name="version" value="([0-9]+)"', page)
    assert match, "the page has no form that carries a version"
    return match.group(1)

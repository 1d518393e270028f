"""Request and response helpers shared by the blueprints: JSON responses, If-Match and the clock.

Request bodies and query parameters are read by their declarations (service/inputs.py).
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import cached_property
from typing import IO, Any

from flask import Flask, Request, Response, current_app, request
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.wsgi import LimitedStream, get_input_stream

from service.config import clock_of
from service.errors import PreconditionFailed, PreconditionRequired
from service.identifiers import etag_of


def now() -> datetime:
    """Returns the current time from the app's clock (aware UTC)."""
    return clock_of(current_app.config)()


def expected_version(current_version: int) -> int:
    """Returns the version that If-Match names: 428 when it is missing, 412 when it is not the current one."""
    header = request.headers.get("If-Match")
    if not header:
        raise PreconditionRequired("this transition needs If-Match with the submission's ETag (from GET or the "
                                   "last response), so a change made meanwhile is not overwritten")
    condition = request.if_match
    if condition.star_tag:
        raise PreconditionRequired("If-Match: * does not protect against lost updates here; send the ETag you "
                                   "read")
    current = etag_of(current_version)
    if not condition.contains(current.strip('"')):
        raise PreconditionFailed(f"If-Match {header} does not match the current ETag {current}: the submission "
                                 "changed since you read it; GET it again, review the change, and retry")
    return current_version


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Returns a JSON response with optional extra headers."""
    response = current_app.response_class(json.dumps(body, ensure_ascii=False), status=status,
                                          mimetype="application/json")
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def negotiated_format(requested: str | None, offered: dict[str, str]) -> str:
    """Returns the format a request asks for among ``offered`` (format name → media type, the first the default).

    The ``format`` query parameter (``requested``, already validated) decides; without it, the Accept header's
    best match among the offered media types; without a match (no Accept, ``*/*``, or nothing offered), the
    first format.
    """
    if requested:
        return requested
    by_type = {media.split(";")[0].strip(): name for name, media in offered.items()}
    best = request.accept_mimetypes.best_match(list(by_type))
    return by_type[best] if best else next(iter(offered))


def text_response(body: str, media_type: str, headers: dict[str, str] | None = None) -> Response:
    """Returns a 200 response of ``body`` (UTF-8) as ``media_type``, with optional extra headers."""
    response = current_app.response_class(body.encode("utf-8"), status=200, content_type=media_type)
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


class _BodyOverLimit(LimitedStream):
    """A request body without Content-Length (chunked), refused with 413 once it holds more than ``maximum`` bytes.

    Werkzeug's own limit on such a stream stops reading at exactly the limit and returns what it read, so a
    longer body arrives cut short rather than refused. This stream lets one byte past the limit through to
    tell the two apart, and drains up to ``maximum`` more bytes before refusing, so that a client still
    sending reads the 413 rather than a reset connection.
    """

    def __init__(self, stream: IO[bytes], maximum: int) -> None:
        super().__init__(stream, maximum + 1, is_max=True)
        self.maximum = maximum
        self.raw = stream

    def readinto(self, buffer: Any) -> int | None:
        count = super().readinto(buffer)
        if self.tell() > self.maximum:
            self._drain()
            raise RequestEntityTooLarge()
        return count

    def _drain(self) -> None:
        left = self.maximum
        while left > 0:
            chunk = self.raw.read(min(left, 64 * 1024))
            if not chunk:
                return
            left -= len(chunk)


class BoundedRequest(Request):
    """Flask's request whose body is limited by MAX_CONTENT_LENGTH whatever its transfer encoding."""

    @cached_property
    def stream(self) -> IO[bytes]:  # type: ignore[override]
        if self.shallow:
            raise RuntimeError("this request was created with shallow=True: its input stream is not read")
        limit = self.max_content_length
        if self.content_length is None and limit is not None and "wsgi.input_terminated" in self.environ:
            return _BodyOverLimit(self.environ["wsgi.input"], limit)  # type: ignore[return-value]
        return get_input_stream(self.environ, max_content_length=limit)


def init_app(app: Flask) -> None:
    """Makes the app's requests BoundedRequest: a chunked body over MAX_CONTENT_LENGTH gets 413, like any other."""
    app.request_class = BoundedRequest

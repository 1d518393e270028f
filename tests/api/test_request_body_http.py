"""Request bodies over real HTTP, against gunicorn as deployed: the size limit holds whatever the transfer encoding.

A chunked body (no Content-Length) over MAX_CONTENT_LENGTH must be refused with 413, as the same bytes with
Content-Length are, not cut at the limit and accepted. The body used is a valid submission followed by
blanks, which is valid JSON at any length, so a body cut short would be accepted (201) and show the fault.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from api_support import FAILING_SUBMISSION, new_token
from gunicorn_support import gunicorn, request

from service import create_app
from service.config import DEFAULTS
from service.persistence.db import get_db

LIMIT = DEFAULTS["MAX_CONTENT_LENGTH"]
PIECE = 64 * 1024


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Runs gunicorn with deploy/gunicorn.conf.py on a SQLite database; yields its port and a submitter's token."""
    folder = tmp_path_factory.mktemp("gunicorn")
    config = {"INSTANCE_PATH": str(folder / "instance"), "DATABASE_URL": f"sqlite:///{folder / 'qc.sqlite3'}"}
    app = create_app(config)
    _, token = new_token(app, "submitter")
    get_db(app).engine.dispose()
    with gunicorn({**config, "AUTO_MIGRATE": "false"}, folder / "gunicorn.log") as port:
        yield {"port": port, "headers": {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}}


def _request(port: int, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
             ) -> tuple[int, str, bytes]:
    return request(port, method, path, body, headers)


def _padded_submission(size: int) -> bytes:
    """Returns a valid submission followed by blanks, ``size`` bytes in all."""
    document = json.dumps(FAILING_SUBMISSION).encode()
    return document + b" " * (size - len(document))


def _chunks(body: bytes) -> Iterator[bytes]:
    # An iterable body without Content-Length: http.client sends it with Transfer-Encoding: chunked.
    for start in range(0, len(body), PIECE):
        yield body[start:start + PIECE]


def test_a_chunked_body_over_the_limit_gets_413_like_the_same_bytes_with_content_length(served):
    body = _padded_submission(LIMIT + 1024 * 1024)

    chunked = _request(served["port"], "POST", "/api/v1/submissions", _chunks(body), served["headers"])
    sized = _request(served["port"], "POST", "/api/v1/submissions", body,
                     {**served["headers"], "Content-Length": str(len(body))})

    for status, media_type, payload in (chunked, sized):
        assert status == 413 and media_type == "application/problem+json", (status, payload[:300])
        assert json.loads(payload)["detail"] == f"the request body exceeds the limit of {LIMIT:,} bytes"


def test_a_chunked_body_one_byte_over_the_limit_gets_413(served):
    status, _, payload = _request(served["port"], "POST", "/api/v1/submissions",
                                  _chunks(_padded_submission(LIMIT + 1)), served["headers"])

    assert status == 413, payload[:300]


def test_a_chunked_body_within_the_limit_is_read_whole(served):
    for size in (len(json.dumps(FAILING_SUBMISSION)), LIMIT):
        status, _, payload = _request(served["port"], "POST", "/api/v1/submissions",
                                      _chunks(_padded_submission(size)), served["headers"])

        assert status == 201, (size, payload[:300])

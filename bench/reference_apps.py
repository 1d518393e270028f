"""The endpoints `python -m bench api` serves beside the service, each a gunicorn app factory.

Each answers ``POST /api/v1/submissions`` for the same body as the service, under the same gunicorn settings:

- ``bare_app()``: parses and validates the body as the service reads a submission
  (rules.evaluate.parse_submission). The API throughput target's reference.
- ``evaluating_app()``: the same, then evaluates the document (rules.evaluate.evaluate) and answers with its
  record, storing nothing.
- ``storing_app()``: the same as the bare one, then inserts the body as one row of a ``json`` column in
  PostgreSQL (``BENCH_STORE_URL``, a psycopg conninfo) and commits; evaluates nothing.

The last two are bounds, printed beside the target and not targets themselves: the contract (DESIGN.md,
``POST /api/v1/submissions`` → evaluated) has the service do both, plus authentication, the audit chain and
the record, so its throughput cannot exceed either.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import psycopg
from flask import Flask, Response, request

from rules.errors import InvalidSubmission
from rules.evaluate import evaluate, parse_submission

STORE_TABLE = "bench_body"
STORE_TABLE_DDL = f"CREATE TABLE {STORE_TABLE} (id bigserial PRIMARY KEY, body json NOT NULL)"


def _app(name: str, answer: Callable[[dict[str, Any], bytes], bytes]) -> Flask:
    """Returns a Flask app whose POST /api/v1/submissions parses and validates the body, then answers
    ``answer(document, body)`` (a 422 with the problem when the body is refused)."""
    app = Flask(name)

    @app.post("/api/v1/submissions")
    def submit() -> Response:
        body = request.get_data()
        try:
            document = parse_submission(body, "the body")
        except InvalidSubmission as error:
            return Response(error.detail, 422)
        return Response(answer(document, body), 200, mimetype="application/json")

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok")

    return app


def bare_app() -> Flask:
    """Returns the parse-and-validate endpoint (the reference of the throughput target)."""
    return _app("bare", lambda _document, _body: b'{"valid": true}')


def evaluating_app() -> Flask:
    """Returns the endpoint that also evaluates the document and answers with its record, storing nothing."""
    # validated: parse_submission has just validated it, as the service's declared body does before it evaluates.
    return _app("evaluating", lambda document, _body: json.dumps(evaluate(document, validated=True)).encode())


def storing_app() -> Flask:
    """Returns the endpoint that also stores the body as one PostgreSQL row (BENCH_STORE_URL), evaluating nothing.

    Each worker process opens its own connection on its first request (gunicorn forks after loading the app).
    """
    connections: list[psycopg.Connection] = []

    def store(_document: dict[str, Any], body: bytes) -> bytes:
        if not connections:
            connections.append(psycopg.connect(os.environ["BENCH_STORE_URL"]))
        connection = connections[0]
        row = connection.execute(f"INSERT INTO {STORE_TABLE} (body) VALUES (%s) RETURNING id",
                                 (body.decode("utf-8"),)).fetchone()
        connection.commit()
        return json.dumps({"id": row[0] if row else None}).encode()

    return _app("storing", store)

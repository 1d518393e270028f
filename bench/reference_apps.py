"""The endpoints `python -m bench api` serves beside the service, each a gunicorn app factory.

Each answers ``POST /api/v1/submissions`` for the same body as the service, under the same gunicorn settings,
after parsing and validating it as the service reads a submission (rules.evaluate.parse_submission):

- ``reference_app()``: then evaluates the document as the service does (rules.evaluate.evaluate under the
  default policy, the service's without a POLICY_FILE; ``validated``, as its declared body is) and stores the
  record as one row of a ``json`` column (one INSERT and commit, in the service's PostgreSQL database,
  ``BENCH_STORE_URL``, a psycopg conninfo); answers with the row's id. The API throughput target's reference
  (issue 25): what the service does beyond it is its own bookkeeping (authentication, audit chain, digests,
  response).
- ``bare_app()``: nothing more. Issue 13's reference, whose ratio is printed as a figure.
- ``evaluating_app()``: evaluates as the reference does and answers with the record, storing nothing (a bound).
- ``storing_app()``: inserts the body as one row, as the reference inserts the record; evaluates nothing (a bound).
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
RECORD_TABLE = "bench_record"
STORE_TABLES_DDL = tuple(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, body json NOT NULL)"
                         for table in (STORE_TABLE, RECORD_TABLE))


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
    """Returns the parse-and-validate endpoint (issue 13's reference of the throughput ratio)."""
    return _app("bare", lambda _document, _body: b'{"valid": true}')


def evaluating_app() -> Flask:
    """Returns the endpoint that also evaluates the document and answers with its record, storing nothing."""
    # validated: parse_submission has just validated it, as the service's declared body does before it evaluates.
    return _app("evaluating", lambda document, _body: json.dumps(evaluate(document, validated=True)).encode())


def reference_app() -> Flask:
    """Returns the reference endpoint: evaluates the document and stores its record as one PostgreSQL row."""
    insert = _inserter(RECORD_TABLE)
    # validated: parse_submission has just validated it, as the service's declared body does before it evaluates.
    return _app("reference", lambda document, _body: insert(json.dumps(evaluate(document, validated=True))))


def storing_app() -> Flask:
    """Returns the endpoint that also stores the body as one PostgreSQL row (BENCH_STORE_URL), evaluating nothing."""
    insert = _inserter(STORE_TABLE)
    return _app("storing", lambda _document, body: insert(body.decode("utf-8")))


def _inserter(table: str) -> Callable[[str], bytes]:
    """Returns a function that inserts JSON text as one row of ``table`` (BENCH_STORE_URL), commits, and answers
    the row's id as JSON. Each worker process opens its own connection on its first request (gunicorn forks
    after loading the app)."""
    connections: list[psycopg.Connection] = []

    def insert(text: str) -> bytes:
        if not connections:
            connections.append(psycopg.connect(os.environ["BENCH_STORE_URL"]))
        connection = connections[0]
        row = connection.execute(f"INSERT INTO {table} (body) VALUES (%s) RETURNING id", (text,)).fetchone()
        connection.commit()
        return json.dumps({"id": row[0] if row else None}).encode()

    return insert

"""Logs: JSON lines (LOG_FORMAT json) that carry the request id, from the request to the logs of the task it sent."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from api_support import new_token
from flask import Flask
from gunicorn_support import gunicorn, request
from task_support import example, three_variants

from service.logs import JsonFormatter, accepted_request_id


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Flask:
    return make_app(LOG_FORMAT="json")


def _json_lines(text: str) -> list[dict[str, Any]]:
    lines = [line for line in text.splitlines() if line.strip()]
    return [json.loads(line) for line in lines]  # every line must parse


def test_a_requests_id_reaches_the_logs_of_the_task_it_queued(app, capsys):
    _, token = new_token(app, "submitter")
    submission = example()
    capsys.readouterr()

    response = app.test_client().post("/api/v1/comparisons", json={"submission": submission,
                                                                   "variants": three_variants(submission)},
                                      headers={"Authorization": f"Bearer {token}", "X-Request-Id": "req-7f3a.b:9"})

    assert response.status_code == 202 and response.headers["X-Request-Id"] == "req-7f3a.b:9"
    entries = _json_lines(capsys.readouterr().err)
    task_id = response.get_json()["id"]
    task_lines = [e for e in entries if e["logger"] == "quotecheck.tasks" and e.get("task_id") == task_id]
    assert [e["message"].rsplit(" ", 1)[-1] for e in task_lines] == ["started", "SUCCESS"]
    assert all(e["request_id"] == "req-7f3a.b:9" and e["task"] == "quotecheck.compare_configurations"
               for e in task_lines)
    (line,) = [e for e in entries if e["logger"] == "quotecheck.request"]
    assert line["request_id"] == "req-7f3a.b:9" and line["route"] == "/api/v1/comparisons" and line["status"] == 202
    # Celery's own success line, which carries the whole submission, is not written
    assert not any(e["logger"] == "celery.app.trace" for e in entries)


def test_an_insane_request_id_is_replaced_and_each_request_gets_one(app):
    client = app.test_client()

    ids = [client.get("/healthz", headers=headers).headers["X-Request-Id"]
           for headers in ({}, {}, {"X-Request-Id": "two words"}, {"X-Request-Id": "x" * 129})]

    assert len(set(ids)) == 4 and all(len(rid) == 32 for rid in ids)
    assert accepted_request_id("bad\nid") != "bad\nid" and accepted_request_id("a" * 128) == "a" * 128


def test_a_record_with_an_exception_and_extra_fields_is_one_json_object():
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logging.getLogger("x").makeRecord("x", logging.ERROR, __file__, 1, "failed %s", ("here",),
                                                   exc_info=__import__("sys").exc_info(), extra={"task_id": "t1"})

    entry = json.loads(JsonFormatter().format(record))

    assert entry["message"] == "failed here" and entry["level"] == "error" and entry["task_id"] == "t1"
    assert "RuntimeError: boom" in entry["exception"] and "\n" not in JsonFormatter().format(record)


def test_under_gunicorn_every_log_line_is_json_with_the_request_id(tmp_path):
    settings = {"INSTANCE_PATH": str(tmp_path / "instance"), "DATABASE_URL": f"sqlite:///{tmp_path / 'qc.sqlite3'}"}
    log = tmp_path / "gunicorn.log"
    with gunicorn(settings, log) as port:  # LOG_FORMAT json: deploy/gunicorn.conf.py's default
        assert request(port, "GET", "/api/v1/schemas", headers={"X-Request-Id": "probe-42"})[0] == 200

    entries = _json_lines(log.read_text())
    assert any(e["logger"] == "gunicorn.error" for e in entries)  # gunicorn's own lines too
    (line,) = [e for e in entries if e.get("request_id") == "probe-42"]
    assert line["logger"] == "quotecheck.request" and line["status"] == 200

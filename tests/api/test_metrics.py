"""GET /metrics: Prometheus text, read back with prometheus_client's own parser, as a scraper reads it."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from api_support import Caller, token_for
from dependency_support import hung_server
from flask import Flask
from gunicorn_support import gunicorn, request
from prometheus_client.parser import text_string_to_metric_families
from task_support import example, three_variants

METRICS_TOKEN = "m" * 40
SCRAPER = {"Authorization": f"Bearer {METRICS_TOKEN}"}


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """Returns every sample of a scrape by (name, labels)."""
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def scrape(client: Any, headers: dict[str, str] = SCRAPER) -> dict[tuple[str, frozenset], float]:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.content_type == "text/plain; version=0.0.4; charset=utf-8"
    return samples(response.get_data(as_text=True))


def value(scraped: dict, name: str, **labels: str) -> float:
    return scraped.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Flask:
    return make_app(METRICS_TOKEN=METRICS_TOKEN)


def test_metrics_need_the_scraper_token_or_an_admin_token(app, as_role):
    client = app.test_client()

    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": f"Bearer {'x' * 40}"}).status_code == 401
    assert as_role("submitter").get("/metrics").status_code == 403
    assert as_role("admin").get("/metrics").status_code == 200
    assert client.get("/metrics", headers=SCRAPER).status_code == 200


def test_a_weak_metrics_token_stops_the_start(make_app):
    with pytest.raises(ValueError, match="at least 32 characters"):
        make_app(METRICS_TOKEN="short")
    with pytest.raises(ValueError, match="must be a string"):
        make_app(METRICS_TOKEN=12345678901234567890123456789012345)


def test_requests_are_counted_by_route_and_evaluations_by_verdict_and_check(app, submitted):
    submitter, view = submitted
    client = app.test_client()
    before = scrape(client)

    submitter.get(f"/api/v1/submissions/{view['id']}")
    assert submitter.get("/api/v1/submissions/no-such-id").status_code == 404
    posted = submitter.post("/api/v1/submissions", json=example())
    after = scrape(client)

    route = "/api/v1/submissions/<submission_id>"
    assert value(after, "quotecheck_http_requests_total", method="GET", route=route, status="200") - \
        value(before, "quotecheck_http_requests_total", method="GET", route=route, status="200") == 1
    assert value(after, "quotecheck_http_requests_total", method="GET", route=route, status="404") - \
        value(before, "quotecheck_http_requests_total", method="GET", route=route, status="404") == 1
    # The URL rule, never the raw path: one series per route whatever the ids
    assert not any(dict(labels).get("route", "").endswith(view["id"]) for _, labels in after)
    assert value(after, "quotecheck_http_request_duration_seconds_count", method="GET", route=route) - \
        value(before, "quotecheck_http_request_duration_seconds_count", method="GET", route=route) == 2
    evaluation = posted.get_json()["evaluation"]
    verdict = evaluation["verdict"]
    assert value(after, "quotecheck_evaluations_total", verdict=verdict) - \
        value(before, "quotecheck_evaluations_total", verdict=verdict) == 1
    for check in evaluation["checks"]:
        labels = {"check": check["id"], "status": check["status"]}
        assert value(after, "quotecheck_check_results_total", **labels) - \
            value(before, "quotecheck_check_results_total", **labels) == 1


def test_tasks_are_counted_by_kind_and_state_with_their_durations(app, as_role):
    submitter: Caller = as_role("submitter")
    submission = example()
    response = submitter.post("/api/v1/comparisons", json={"submission": submission,
                                                           "variants": three_variants(submission)})
    assert response.status_code == 202 and response.get_json()["state"] == "SUCCESS"

    scraped = scrape(app.test_client())

    assert value(scraped, "quotecheck_tasks", kind="comparison", state="SUCCESS") == 1
    labels = {"kind": "comparison", "state": "SUCCESS"}
    assert value(scraped, "quotecheck_task_duration_seconds_count", **labels) == 1
    buckets = sorted((float(dict(key)["le"]), count) for (name, key), count in scraped.items()
                     if name == "quotecheck_task_duration_seconds_bucket" and dict(key)["kind"] == "comparison")
    assert buckets[-1] == (float("inf"), 1)
    assert [count for _, count in buckets] == sorted(count for _, count in buckets)  # cumulative
    assert 0 <= value(scraped, "quotecheck_task_duration_seconds_sum", **labels) < 60
    # No broker: nothing waits on a queue
    assert not any(name == "quotecheck_queue_depth" for name, _ in scraped)


def test_the_webhook_outbox_is_counted_by_state(make_app, submission_document):
    app = make_app(METRICS_TOKEN=METRICS_TOKEN, WEBHOOK_ALLOWED_NETWORKS=["127.0.0.0/8"])  # a loopback receiver
    admin, submitter = token_for(app, "ada", "admin"), token_for(app, "sam", "submitter")
    # A receiver that refuses connections: the first attempt fails, and the delivery waits for its retry
    assert admin.post("/api/v1/webhooks", json={"url": "http://127.0.0.1:9/hooks", "events": ["submission.submitted"]}
                      ).status_code == 201

    assert submitter.post("/api/v1/submissions", json=submission_document).status_code == 201

    assert value(scrape(app.test_client()), "quotecheck_webhook_deliveries", state="pending") == 1


def test_a_hung_broker_makes_the_scrape_say_so_within_its_timeouts(make_app):
    with hung_server() as port:
        app = make_app(METRICS_TOKEN=METRICS_TOKEN, CELERY_BROKER_URL=f"redis://127.0.0.1:{port}/0",
                       CELERY_CONNECT_TIMEOUT_S=1, CELERY_SOCKET_TIMEOUT_S=1)

        scraped = scrape(app.test_client())

    assert value(scraped, "quotecheck_broker_up") == 0
    assert not any(name == "quotecheck_queue_depth" for name, _ in scraped)


def test_gunicorn_workers_report_one_sum_in_multiprocess_mode(tmp_path):
    # Given gunicorn with two (synchronous) worker processes sharing QUOTECHECK_METRICS_DIR
    directory = tmp_path / "metrics"
    settings = {"INSTANCE_PATH": str(tmp_path / "instance"), "DATABASE_URL": f"sqlite:///{tmp_path / 'qc.sqlite3'}",
                "METRICS_TOKEN": METRICS_TOKEN, "METRICS_DIR": str(directory)}
    with gunicorn(settings, tmp_path / "gunicorn.log", workers=2) as port:
        # When one worker is held by a request whose headers have not all arrived, ten requests go to the other,
        # and the held one is then completed
        with socket.create_connection(("127.0.0.1", port), timeout=30) as held:
            held.sendall(b"GET /api/v1/schemas HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            time.sleep(0.5)  # taken by one worker, which now waits for the rest
            assert [request(port, "GET", "/api/v1/schemas")[0] for _ in range(10)] == [200] * 10
            held.sendall(b"Connection: close\r\n\r\n")
            assert held.recv(64).startswith(b"HTTP/1.1 200")
        scrapes = [samples(request(port, "GET", "/metrics", headers=SCRAPER)[2].decode()) for _ in range(3)]

    # Then both workers counted, and every scrape, whichever worker answered it, reports the sum of 11
    assert len({path.name for path in directory.glob("counter_*.db")}) == 2
    for scraped in scrapes:
        assert value(scraped, "quotecheck_http_requests_total", method="GET", route="/api/v1/schemas",
                     status="200") == 11

"""Fair shares of background work, in-process on SQLite and PostgreSQL: one user's tasks cannot crowd out another's.

A queue that stands in for the broker takes every message and runs none (no worker consumes it), so each task
the API accepts stays PENDING, as it would behind a busy worker.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from api_support import caller_for
from flask import Flask
from sqlalchemy import update
from task_support import QueueWithoutWorkers, example
from ui_support import sign_in

from service.errors import InvalidRequest
from service.persistence.db import get_db
from service.persistence.models import TaskRun
from service.tasks import task_runs, tasks_port

COMPARISONS = "/api/v1/comparisons"


def _queued_app(make_app: Any, **config: Any) -> tuple[Flask, QueueWithoutWorkers]:
    app = make_app(**config)
    queue = QueueWithoutWorkers()
    tasks_port.register(app, queue)
    return app, queue


def _comparison(number: int) -> dict[str, Any]:
    """A comparison of its own (the variant's name is part of the work's key): one variant, the example as quoted."""
    return {"submission": example(), "variants": [{"name": f"as quoted #{number}", "patch": {}}]}


def _set(app: Flask, task_id: str, **values: Any) -> None:
    with app.app_context(), get_db(app).session() as session:
        session.execute(update(TaskRun).where(TaskRun.id == task_id).values(**values))
        session.commit()


def test_twenty_comparisons_of_one_user_queue_the_limit_and_the_rest_get_429_while_another_user_is_not_refused(
        make_app):
    # Given a service whose tasks stay queued, and a user who posts 20 comparisons of their own at once
    app, queue = _queued_app(make_app)
    limit = app.config["MAX_ACTIVE_TASKS_PER_USER"]
    retry_after_s = app.config["TASK_LIMIT_RETRY_AFTER_S"]
    assert (limit, retry_after_s) == (4, 10)  # the documented defaults (docs/settings.md)
    greedy, other = caller_for(app), caller_for(app)

    responses = [greedy.post(COMPARISONS, json=_comparison(n)) for n in range(20)]

    # Then the first `limit` are queued and each of the other 20 - limit is refused: 429, problem+json, Retry-After
    assert [r.status_code for r in responses] == [202] * limit + [429] * (20 - limit)
    for refused in responses[limit:]:
        assert refused.headers["Content-Type"] == "application/problem+json"
        assert refused.headers["Retry-After"] == str(retry_after_s)
        problem = refused.get_json()
        assert problem["status"] == 429 and problem["title"] == "Too many tasks"
        assert problem["type"].endswith("too-many-tasks") and problem["instance"] == COMPARISONS
        assert f"at most {limit}" in problem["detail"]
    assert len(queue.sent) == limit  # nothing refused reached the queue
    # ... and another user's one-variant comparison is queued all the same
    theirs = other.post(COMPARISONS, json=_comparison(100))
    assert theirs.status_code == 202, theirs.get_json()
    assert theirs.get_json()["state"] == "PENDING"


def test_asking_again_for_work_already_queued_reuses_its_task_and_is_not_refused(make_app):
    # Given a user at the limit
    app, _ = _queued_app(make_app, MAX_ACTIVE_TASKS_PER_USER=2)
    user = caller_for(app)
    first, second = (user.post(COMPARISONS, json=_comparison(n)) for n in range(2))
    assert (first.status_code, second.status_code) == (202, 202)

    # When they ask for the first comparison again, and another user asks for it too
    again = user.post(COMPARISONS, json=_comparison(0))
    by_another = caller_for(app).post(COMPARISONS, json=_comparison(0))

    # Then both get the task already queued (it counts once), while new work of theirs is refused
    assert again.status_code == 202 and again.get_json()["id"] == first.get_json()["id"]
    assert by_another.status_code == 202 and by_another.get_json()["id"] == first.get_json()["id"]
    assert user.post(COMPARISONS, json=_comparison(2)).status_code == 429


def test_tasks_that_ended_or_whose_worker_died_do_not_count(make_app, clock):
    # Given a user at the limit of 2
    app, _ = _queued_app(make_app, MAX_ACTIVE_TASKS_PER_USER=2)
    user = caller_for(app)
    ids = [user.post(COMPARISONS, json=_comparison(n)).get_json()["id"] for n in range(2)]
    assert user.post(COMPARISONS, json=_comparison(2)).status_code == 429

    # When one of their tasks ends, a new one is taken
    _set(app, ids[0], state=task_runs.SUCCESS, result={"variants": []})
    assert user.post(COMPARISONS, json=_comparison(2)).status_code == 202
    assert user.post(COMPARISONS, json=_comparison(3)).status_code == 429

    # When another one's worker died (PROGRESS, unwritten for longer than the hard time limit), it counts no more
    stale_s = app.config["CELERY_TASK_TIME_LIMIT_S"]
    long_ago = clock() - timedelta(seconds=stale_s + 1)
    _set(app, ids[1], state=task_runs.PROGRESS, updated_at=long_ago)
    third = user.post(COMPARISONS, json=_comparison(3))
    assert third.status_code == 202

    # ... while a live run in PROGRESS counts as queued work does
    just_now = clock()
    _set(app, third.get_json()["id"], state=task_runs.PROGRESS, updated_at=just_now)
    assert user.post(COMPARISONS, json=_comparison(4)).status_code == 429


def test_every_kind_of_task_counts_against_one_share_searches_and_remedies_are_refused_too(make_app):
    # Given a user whose one queued comparison fills a share of 1, and a stored submission of theirs
    app, _ = _queued_app(make_app, MAX_ACTIVE_TASKS_PER_USER=1)
    user = caller_for(app)
    stored = user.post("/api/v1/submissions", json=example())
    assert stored.status_code == 201, stored.get_json()
    submission_id = stored.get_json()["id"]
    assert user.post(COMPARISONS, json=_comparison(0)).status_code == 202

    # When they ask for a layout search and for the remedies of their submission
    search = user.post("/api/v1/searches", json={"submission": submission_id})
    remedies = user.get(f"/api/v1/submissions/{submission_id}/remedies")

    # Then both are refused with 429 and Retry-After, and another user's search is queued
    for refused in (search, remedies):
        assert refused.status_code == 429, refused.get_json()
        assert refused.headers["Retry-After"] == "10"
        assert refused.headers["Content-Type"] == "application/problem+json"
    other = caller_for(app, "reviewer").post("/api/v1/searches", json={"submission": submission_id})
    assert other.status_code == 202, other.get_json()


def test_a_ranking_asked_for_on_the_pages_beyond_the_share_is_refused_as_a_page(make_app):
    # Given three stored quotes and a reviewer whose ranking of two of them is queued (share: 1)
    app, _ = _queued_app(make_app, MAX_ACTIVE_TASKS_PER_USER=1, TASK_LIMIT_RETRY_AFTER_S=30)
    submitter = caller_for(app)
    ids = [submitter.post("/api/v1/submissions", json=example()).get_json()["id"] for _ in range(3)]
    reviewer = sign_in(app, caller_for(app, "reviewer"))
    assert reviewer.post("/ui/compare/rankings", {"ids": ids[:2]}).status_code == 303

    # When they ask for another ranking
    refused = reviewer.post("/ui/compare/rankings", {"ids": [ids[0], ids[2]]})

    # Then the answer is a page that says so, with Retry-After, not a problem+json body
    assert refused.status_code == 429
    assert refused.headers["Content-Type"].startswith("text/html")
    assert refused.headers["Retry-After"] == "30"
    page = refused.get_data(as_text=True)
    assert "Too many tasks" in page and "MAX_ACTIVE_TASKS_PER_USER" in page


@pytest.mark.parametrize("setting", ["MAX_ACTIVE_TASKS_PER_USER", "TASK_LIMIT_RETRY_AFTER_S"])
@pytest.mark.parametrize("value", [0, -1, 2.5, "4", True, None])
def test_a_bad_fair_share_setting_stops_the_start(make_app, setting, value):
    with pytest.raises(InvalidRequest, match=setting):
        make_app(**{setting: value})


def test_the_openapi_description_documents_429_with_retry_after_where_tasks_are_issued(app):
    spec = json.loads(app.test_client().get("/api/v1/openapi.json").get_data(as_text=True))
    issuing = [("/api/v1/comparisons", "post"), ("/api/v1/searches", "post"),
               ("/api/v1/submissions/{submission_id}/remedies", "get"), ("/api/v1/records/{record_id}.pdf", "get")]
    for path, method in issuing:
        refused = spec["paths"][path][method]["responses"]["429"]
        assert "Retry-After" in refused["headers"], path
        assert "application/problem+json" in refused["content"], path

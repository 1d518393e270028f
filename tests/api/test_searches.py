"""Layout searches over HTTP with tasks run in-process (no broker: the chord runs eagerly), on SQLite and PostgreSQL.

The result is checked against rules.advice.search.search_submission of the stored document, never against literals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from api_support import token_for
from celery.app.task import Task
from jsonschema import Draft202012Validator
from sqlmodel import select

import workers.search_tasks
from rules.advice.search import default_chunks, search_submission
from service.persistence import audit
from service.persistence.db import get_db
from service.persistence.models import AuditEvent

SEARCHES = "/api/v1/searches"
EXAMPLES = Path(__file__).parents[2] / "examples"
TRAINING = EXAMPLES / "h200-128node-pretraining.json"  # 1,024 H200s pretraining a 70B model
SERVING_ONLY = EXAMPLES / "l40s-8b-serving.json"
CHUNKS = len(default_chunks())


def _document(path: Path = TRAINING) -> dict[str, Any]:
    return json.loads(path.read_text())


def _submit(caller: Any, document: dict[str, Any]) -> str:
    response = caller.post("/api/v1/submissions", json=document)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["id"]


def _events(app: Any) -> list[AuditEvent]:
    with get_db(app).session() as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.action == "search.requested")).all())


def test_a_search_of_a_submission_is_the_search_of_its_document(client, as_role):
    # Given the 1,024-GPU pretraining example, submitted
    document = _document()
    submission_id = _submit(as_role("submitter"), document)
    reader = as_role("reviewer")

    # When a reader asks for its layout search
    response = reader.post(SEARCHES, json={"submission": submission_id})

    # Then it is accepted as a task, done in-process chunk by chunk, whose result is the search of the document
    assert response.status_code == 202, response.get_json()
    assert response.headers["Location"] == f"/api/v1/tasks/{response.get_json()['id']}"
    task = reader.get(response.headers["Location"]).get_json()
    assert task["state"] == "SUCCESS" and task["kind"] == "search"
    assert task["progress"] == {"current": CHUNKS, "total": CHUNKS}
    result = task["result"]
    assert set(result) == {"layouts_searched", "fitting", "layouts_skipped", "skipped", "best", "submitted", "top",
                           "submitted_vs_best"}
    assert result == search_submission(document)
    assert result["layouts_searched"] >= 5000 and result["best"] == result["top"][0]
    assert result["best"]["step_s"] <= result["submitted"]["step_s"]
    # ... and the task is what the OpenAPI document describes
    components = client.get("/api/v1/openapi.json").get_json()["components"]
    Draft202012Validator({"$ref": "#/components/schemas/Task", "components": components}).validate(task)


def test_progress_is_reported_after_each_chunk(as_role, monkeypatch):
    reported: list[tuple[str | None, dict]] = []
    original = Task.update_state

    def record(self: Task, task_id: str | None = None, state: str | None = None, meta: dict | None = None,
               **kwargs: Any) -> None:
        reported.append((state, dict(meta or {})))
        original(self, task_id, state, meta, **kwargs)

    monkeypatch.setattr(Task, "update_state", record)
    submission_id = _submit(as_role("submitter"), _document())

    response = as_role("reviewer").post(SEARCHES, json={"submission": submission_id})

    assert response.status_code == 202
    assert reported == [("PROGRESS", {"current": n, "total": CHUNKS}) for n in range(CHUNKS + 1)]


def test_a_repeated_search_gets_the_first_task_and_is_audited_on_the_submission(app, as_role, monkeypatch):
    searched: list[str] = []
    search_chunk = workers.search_tasks.search_chunk
    monkeypatch.setattr(workers.search_tasks, "search_chunk",
                        lambda *args, **kwargs: searched.append("chunk") or search_chunk(*args, **kwargs))
    submitter = as_role("submitter")
    submission_id = _submit(submitter, _document())

    first = submitter.post(SEARCHES, json={"submission": submission_id})
    again = as_role("approver").post(SEARCHES, json={"submission": submission_id})

    assert first.status_code == again.status_code == 202
    assert again.headers["Location"] == first.headers["Location"]
    assert again.get_json()["result"] == first.get_json()["result"]
    assert searched == ["chunk"] * CHUNKS
    events = _events(app)
    assert [(e.submission_id, e.detail["task_id"], e.detail["sent"]) for e in events] == [
        (submission_id, first.get_json()["id"], True), (submission_id, first.get_json()["id"], False)]
    trail = submitter.get(f"/api/v1/submissions/{submission_id}/audit").get_json()["events"]
    assert [e["action"] for e in trail][-2:] == ["search.requested", "search.requested"]
    with get_db(app).session() as session:
        assert audit.verify(session).ok


def test_a_failed_chunk_fails_the_search_which_is_run_again_when_asked_again(as_role, monkeypatch):
    search_chunk = workers.search_tasks.search_chunk
    failures = ["the chunk's worker ran out of memory"]

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise RuntimeError(failures.pop())
        return search_chunk(*args, **kwargs)

    monkeypatch.setattr(workers.search_tasks, "search_chunk", flaky)
    reader = as_role("reviewer")
    submission_id = _submit(as_role("submitter"), _document())

    failed = reader.post(SEARCHES, json={"submission": submission_id})

    assert failed.status_code == 202
    view = failed.get_json()
    assert view["state"] == "FAILURE" and "result" not in view
    assert view["error"]["detail"] == "RuntimeError: the chunk's worker ran out of memory"
    retried = reader.post(SEARCHES, json={"submission": submission_id})
    assert retried.headers["Location"] == failed.headers["Location"]
    assert retried.get_json()["state"] == "SUCCESS"
    assert retried.get_json()["progress"] == {"current": CHUNKS, "total": CHUNKS}


def test_a_serving_only_submission_has_nothing_to_search_and_is_422_naming_the_field(app, as_role):
    submission_id = _submit(as_role("submitter"), _document(SERVING_ONLY))

    response = as_role("reviewer").post(SEARCHES, json={"submission": submission_id})

    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    problem = response.get_json()
    assert problem["type"].endswith("/invalid-request")
    assert problem["errors"] == [{"pointer": "/submission",
                                  "message": "the submission has no training workload to lay out"}]
    assert _events(app) == []


@pytest.mark.parametrize(("body", "pointer"), [({}, "/submission"), ({"submission": ""}, "/submission"),
                                               ({"submission": 7}, "/submission"),
                                               ({"submission": "x", "space": {}}, "/space")])
def test_the_request_is_checked_before_anything_runs(as_role, body, pointer):
    response = as_role("reviewer").post(SEARCHES, json=body)

    assert response.status_code == 422, response.get_json()
    assert [e["pointer"] for e in response.get_json()["errors"]] == [pointer]


def test_an_unknown_submission_is_404(client, as_role):
    response = as_role("reviewer").post(SEARCHES, json={"submission": "3f1c1f4e-0000-4000-8000-000000000000"})

    assert response.status_code == 404 and response.mimetype == "application/problem+json"
    assert client.post(SEARCHES, json={"submission": "x"}).status_code == 401


def test_a_vendor_searches_only_its_own_submissions_and_reads_only_its_own_searches(app):
    # Given two vendors with scoped tokens; acme submitted the pretraining quote
    acme, globex = token_for(app, "acme", "submitter", scope="own"), token_for(app, "globex", "submitter", scope="own")
    submission_id = _submit(acme, _document())

    # When each asks for its search
    mine = acme.post(SEARCHES, json={"submission": submission_id})
    theirs = globex.post(SEARCHES, json={"submission": submission_id})

    # Then acme's is a task it reads, and so does a reviewer; to the other vendor the submission and the task are 404
    assert mine.status_code == 202 and acme.get(mine.headers["Location"]).get_json()["state"] == "SUCCESS"
    assert token_for(app, "rita", "reviewer").get(mine.headers["Location"]).status_code == 200
    assert theirs.status_code == 404 and theirs.mimetype == "application/problem+json"
    assert globex.get(mine.headers["Location"]).status_code == 404
    # An in-house search of the same submission is another task (a vendor's is its own); acme may read it
    in_house = token_for(app, "sam", "reviewer").post(SEARCHES, json={"submission": submission_id})
    assert in_house.get_json()["id"] != mine.get_json()["id"]
    assert acme.get(in_house.headers["Location"]).status_code == 200
    assert globex.get(in_house.headers["Location"]).status_code == 404


def test_the_openapi_document_describes_searches(client):
    document = client.get("/api/v1/openapi.json").get_json()
    create = document["paths"]["/api/v1/searches"]["post"]

    assert create["x-roles"] == ["admin", "approver", "reviewer", "submitter"]
    assert create["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SearchRequest"}
    assert create["responses"]["202"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Task"}
    assert {"401", "404", "422", "503"} <= set(create["responses"])
    components = document["components"]["schemas"]
    assert {"$ref": "#/components/schemas/Search"} in components["Task"]["properties"]["result"]["anyOf"]
    assert set(components["Search"]["required"]) == {"layouts_searched", "fitting", "best", "submitted", "top",
                                                     "submitted_vs_best"}

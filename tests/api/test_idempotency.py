"""Idempotency-Key on creating a submission."""

from __future__ import annotations

import json

from sqlmodel import func, select

from service.persistence.db import get_db
from service.persistence.models import Submission


def _submissions(app) -> int:
    with get_db(app).session() as session:
        return session.exec(select(func.count()).select_from(Submission)).one()


def test_same_key_and_body_returns_the_same_submission(app, as_role, submission_document):
    caller = as_role("submitter")
    headers = {"Idempotency-Key": "order-4711"}
    first = caller.post("/api/v1/submissions", json=submission_document, headers=headers)
    # The same document with other whitespace and key order is the same body (compared by digest).
    reordered = json.dumps(dict(reversed(list(submission_document.items()))), indent=4)
    second = caller.post("/api/v1/submissions", data=reordered,
                         headers={**headers, "Content-Type": "application/json"})

    assert first.status_code == 201 and second.status_code == 200
    assert second.get_json() == first.get_json()
    assert second.headers["Location"] == first.headers["Location"]
    assert second.headers["Idempotent-Replayed"] == "true"
    assert _submissions(app) == 1


def test_same_key_with_another_body_gets_422(app, as_role, submission_document):
    caller = as_role("submitter")
    headers = {"Idempotency-Key": "order-4712"}
    assert caller.post("/api/v1/submissions", json=submission_document, headers=headers).status_code == 201
    submission_document["quote"]["quote_id"] = "ACME-2026-002"

    response = caller.post("/api/v1/submissions", json=submission_document, headers=headers)

    assert response.status_code == 422
    assert response.get_json()["type"].endswith("/idempotency-key-reused")
    assert _submissions(app) == 1


def test_keys_belong_to_one_token(app, as_role, submission_document):
    headers = {"Idempotency-Key": "shared-key"}
    first = as_role("submitter").post("/api/v1/submissions", json=submission_document, headers=headers)
    second = as_role("submitter").post("/api/v1/submissions", json=submission_document, headers=headers)
    assert (first.status_code, second.status_code) == (201, 201)
    assert first.get_json()["id"] != second.get_json()["id"]


def test_without_a_key_each_post_creates_a_submission(app, as_role, submission_document):
    caller = as_role("submitter")
    ids = {caller.post("/api/v1/submissions", json=submission_document).get_json()["id"] for _ in range(2)}
    assert len(ids) == 2


def test_a_malformed_key_gets_422(as_role, submission_document):
    response = as_role("submitter").post("/api/v1/submissions", json=submission_document,
                                         headers={"Idempotency-Key": "has spaces in it"})
    assert response.status_code == 422
    assert response.get_json()["errors"][0]["parameter"] == "Idempotency-Key"


def test_two_concurrent_retries_with_one_key_create_one_submission(app, as_role, submission_document, monkeypatch):
    import threading

    import service.app.intake as submissions

    caller = as_role("submitter")
    # Both requests look the key up before either stores it; the unique constraint must then decide.
    barrier = threading.Barrier(2, timeout=20)
    real_evaluate = submissions.evaluate_submission

    def evaluate_after_both_looked(*args, **kwargs):
        barrier.wait()
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(submissions, "evaluate_submission", evaluate_after_both_looked)
    responses = []

    def post() -> None:
        responses.append(caller.post("/api/v1/submissions", json=submission_document,
                                     headers={"Idempotency-Key": "retry-storm"}))

    threads = [threading.Thread(target=post) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(r.status_code for r in responses) == [200, 201]
    assert responses[0].get_json()["id"] == responses[1].get_json()["id"]
    assert _submissions(app) == 1

"""Body limits and media types: every refusal is application/problem+json."""

from __future__ import annotations

import json

from api_support import Caller, new_token, url


def test_a_body_above_the_limit_gets_413(as_role):
    caller = as_role("submitter")
    body = json.dumps({"schema_version": "1", "padding": "x" * (2 * 1024 * 1024)})

    response = caller.post("/api/v1/submissions", data=body, headers={"Content-Type": "application/json"})

    assert response.status_code == 413
    assert response.mimetype == "application/problem+json"
    problem = response.get_json()
    assert problem["status"] == 413 and "2,097,152" in problem["detail"]


def test_the_limit_is_configurable(make_app):
    app = make_app(MAX_CONTENT_LENGTH=1000)
    caller = Caller(app, "sam", "submitter", new_token(app, "submitter", "sam")[1])
    response = caller.post("/api/v1/submissions", data="x" * 2000, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and "1,000 bytes" in response.get_json()["detail"]


def test_a_body_not_declared_as_json_gets_415(as_role):
    response = as_role("submitter").post("/api/v1/submissions", data="<quote/>",
                                         headers={"Content-Type": "application/xml"})
    assert response.status_code == 415 and response.mimetype == "application/problem+json"


def test_malformed_json_gets_400(as_role, submitted):
    caller = as_role("submitter")
    for body in ("{not json", '{"x": NaN}', b"\xff\xfe"):
        response = caller.post("/api/v1/submissions", data=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 400, body
        assert response.get_json()["type"].endswith("/malformed-request")
    _, view = submitted
    decision = as_role("reviewer").post(url(view["id"], "decisions"), data="{", if_match=view["etag"],
                                        headers={"Content-Type": "application/json"})
    assert decision.status_code == 400


def test_an_invalid_submission_gets_422_with_pointers(as_role, submission_document):
    submission_document["quote"]["node_groups"][0]["count"] = -1
    del submission_document["workload"]
    response = as_role("submitter").post("/api/v1/submissions", json=submission_document)

    assert response.status_code == 422
    problem = response.get_json()
    assert problem["type"].endswith("/invalid-submission")
    assert set(problem) >= {"type", "title", "status", "detail", "instance", "errors"}
    assert problem["instance"] == "/api/v1/submissions"
    pointers = {e["pointer"] for e in problem["errors"]}
    assert "/workload" in pointers and any(p.startswith("/quote/node_groups/0/count") for p in pointers)


def test_numbers_without_a_canonical_form_get_422(as_role, submission_document):
    submission_document["quote"]["line_items"] = [{"quantity": 2**60}]
    response = as_role("submitter").post("/api/v1/submissions", json=submission_document)
    assert response.status_code == 422


def test_overlong_strings_are_refused_by_the_schema(as_role, submission_document):
    submission_document["quote"]["vendor"] = "v" * 5000
    response = as_role("submitter").post("/api/v1/submissions", json=submission_document)
    assert response.status_code == 422
    assert response.get_json()["errors"][0]["pointer"] == "/quote/vendor"


def test_unknown_routes_and_methods_are_problems_too(client):
    missing = client.get("/api/v1/nothing-here")
    assert missing.status_code == 404 and missing.mimetype == "application/problem+json"
    assert missing.get_json()["type"] == "about:blank"
    wrong_method = client.delete("/api/v1/submissions")
    assert wrong_method.status_code == 405 and "POST" in wrong_method.headers["Allow"]
    assert wrong_method.mimetype == "application/problem+json"


def test_an_unexpected_error_is_a_500_problem_without_internals(as_role, submission_document, monkeypatch):
    import service.app.intake as submissions

    def explode(*_args, **_kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(submissions, "evaluate_submission", explode)
    response = as_role("submitter").post("/api/v1/submissions", json=submission_document)
    assert response.status_code == 500 and response.mimetype == "application/problem+json"
    assert "secret" not in response.get_data(as_text=True)


def test_a_list_beyond_its_count_limit_is_refused_for_that_alone(as_role, submission_document):
    group = submission_document["quote"]["node_groups"][0]
    submission_document["quote"]["node_groups"] = [{**group, "name": f"g{i}"} for i in range(1024)]

    response = as_role("submitter").post("/api/v1/submissions", json=submission_document)

    assert response.status_code == 422
    problem = response.get_json()
    assert problem["errors"] == [{"pointer": "/quote/node_groups", "message": "must have at most 64 items, found 1024"}]
    assert "count limits" in problem["detail"]

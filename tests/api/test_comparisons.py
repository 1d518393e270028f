"""Comparisons and tasks over HTTP with tasks run in-process (no broker: eager), on SQLite and PostgreSQL.

The figures a comparison reports are checked against evaluate() of the same patched submission, never
against literals, so the test follows the estimators when they change.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from api_support import Caller, new_token, url, waive_all
from celery.app.task import Task
from task_support import direct_evaluation, example, three_variants

import workers.tasks
from service.persistence import audit
from service.persistence.db import get_db
from service.record import TrustedKeys, verify_document

COMPARISONS = "/api/v1/comparisons"


def _events(app: Any, action: str) -> list[Any]:
    from sqlmodel import select

    from service.persistence.models import AuditEvent

    with get_db(app).session() as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.action == action)).all())


def _submitter(app: Any) -> Caller:
    name, token = new_token(app, "submitter")
    return Caller(app, name, "submitter", token)


def test_three_variants_of_the_example_report_the_figures_evaluate_gives(as_role):
    # Given the example (fsdp-full on 16 DGX H100 nodes) and two variants: DDP, and half the nodes
    submitter = as_role("submitter")
    submission = example()
    variants = three_variants(submission)

    # When the submitter asks for the comparison
    response = submitter.post(COMPARISONS, json={"submission": submission, "variants": variants})

    # Then it is accepted as a task, already done in-process, and the task reads the same
    assert response.status_code == 202, response.get_json()
    location = response.headers["Location"]
    assert location == f"/api/v1/tasks/{response.get_json()['id']}"
    task = submitter.get(location).get_json()
    assert task["state"] == "SUCCESS" and task["kind"] == "comparison"
    assert task["progress"] == {"current": 3, "total": 3}
    rows = {row["name"]: row for row in task["result"]["variants"]}
    assert list(rows) == [v["name"] for v in variants]
    for variant in variants:
        direct, row = direct_evaluation(submission, variant["patch"]), rows[variant["name"]]
        assert row["verdict"] == direct["record"]["verdict"]
        assert row["failing_checks"] == direct["failing"]
        assert row["days"] == pytest.approx(direct["timing"]["days"])
        assert row["gpus_needed"] == direct["timing"]["gpus_needed"]
        assert row["quote_total"] == pytest.approx(direct["timing"]["quote_total"])
        assert row["cost_per_run_day"] == pytest.approx(direct["timing"]["cost_per_day"])
        assert row["submission_digest"] == direct["record"]["submission"]["digest"]
    as_quoted, ddp, half = rows.values()
    # DDP keeps a full copy of weights, gradients and Adam state per GPU: 70B does not fit in 80 GB
    assert "peak-memory" in ddp["failing_checks"] and "peak-memory" not in as_quoted["failing_checks"]
    # ... on any number of GPUs, so no GPU count is advised, and the row says why
    assert ddp["gpus_needed"] is None and ddp["time_to_result"] == "warn"
    assert ddp["gpus_needed_reason"].startswith("no GPU count fits memory: under ddp one training step needs")
    assert as_quoted["gpus_needed"] == 80 and as_quoted["gpus_needed_reason"] is None
    # Half the GPUs take about twice the days (scaling efficiency and failures move it a little)
    assert as_quoted["gpus_quoted"] == 128 and half["gpus_quoted"] == 64
    assert half["days"] / as_quoted["days"] == pytest.approx(2, rel=0.1)
    assert half["quote_total"] < as_quoted["quote_total"]


def test_progress_is_reported_after_each_variant(as_role, monkeypatch):
    reported: list[tuple[str, dict]] = []
    original = Task.update_state

    def record(self: Task, task_id: str | None = None, state: str | None = None, meta: dict | None = None,
               **kwargs: Any) -> None:
        reported.append((state, dict(meta or {})))
        original(self, task_id, state, meta, **kwargs)

    monkeypatch.setattr(Task, "update_state", record)
    submission = example()

    response = as_role("submitter").post(COMPARISONS, json={"submission": submission,
                                                            "variants": three_variants(submission)})

    assert response.status_code == 202
    assert reported == [("PROGRESS", {"current": n, "total": 3}) for n in range(4)]


def test_a_repeated_comparison_gets_the_first_task_and_its_stored_result(app, as_role, monkeypatch):
    runs: list[str] = []
    compare = workers.tasks.compare_configurations
    monkeypatch.setattr(workers.tasks, "compare_configurations",
                        lambda *args, **kwargs: runs.append("ran") or compare(*args, **kwargs))
    submission = example()
    body = {"submission": submission, "variants": three_variants(submission)}

    first = as_role("submitter").post(COMPARISONS, json=body)
    again = as_role("admin").post(COMPARISONS, json=body)

    assert first.status_code == again.status_code == 202
    assert again.headers["Location"] == first.headers["Location"]
    assert again.get_json()["result"] == first.get_json()["result"]
    assert runs == ["ran"]
    # Both requests are audited; only the first sent the task
    events = _events(app, "comparison.requested")
    assert [(e.detail["task_id"], e.detail["sent"]) for e in events] == [(first.get_json()["id"], True),
                                                                         (first.get_json()["id"], False)]
    assert events[0].input_digest == first.get_json()["result"]["submission_digest"]
    assert events[0].detail["variants"] == [v["name"] for v in body["variants"]]
    with get_db(app).session() as session:
        assert audit.verify(session).ok


def test_a_failed_comparison_reports_a_problem_and_is_run_again_when_asked_again(as_role, monkeypatch):
    compare = workers.tasks.compare_configurations
    failures = ["the first run fails"]

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise RuntimeError(failures.pop())
        return compare(*args, **kwargs)

    monkeypatch.setattr(workers.tasks, "compare_configurations", flaky)
    submitter = as_role("submitter")
    submission = example()
    body = {"submission": submission, "variants": three_variants(submission)[:1]}

    failed = submitter.post(COMPARISONS, json=body)

    assert failed.status_code == 202
    view = failed.get_json()
    assert view["state"] == "FAILURE" and "result" not in view
    assert view["error"]["type"].endswith("/task-failed") and view["error"]["status"] == 500
    assert view["error"]["detail"] == "RuntimeError: the first run fails"
    assert view["error"]["instance"] == failed.headers["Location"]

    retried = submitter.post(COMPARISONS, json=body)

    assert retried.headers["Location"] == failed.headers["Location"]
    assert retried.get_json()["state"] == "SUCCESS" and "error" not in retried.get_json()


def test_a_variant_that_breaks_the_schema_is_422_naming_the_variant_and_the_pointer(as_role):
    submission = example()
    variants = [{"name": "as quoted", "patch": {}},
                {"name": "zero nodes", "patch": {"quote": {"node_groups": [{"name": "gpu", "count": 0}]}}}]

    response = as_role("submitter").post(COMPARISONS, json={"submission": submission, "variants": variants})

    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    problem = response.get_json()
    assert problem["type"].endswith("/invalid-submission")
    assert [e["pointer"] for e in problem["errors"]] == ["/variants/1/patch/quote/node_groups/0/count"]
    assert problem["errors"][0]["message"].startswith("variant 'zero nodes', at /quote/node_groups/0/count")


@pytest.mark.parametrize(("variants", "pointer"), [
    ([], "/variants"),
    ([{"name": "a", "patch": {}}, {"name": "a", "patch": {}}], "/variants/1/name"),
    ([{"name": "a\n", "patch": {}}], "/variants/0/name"),
    ([{"name": "a", "patch": []}], "/variants/0/patch"),
    ([{"name": f"v{n}", "patch": {}} for n in range(3)], "/variants"),
])
def test_the_request_is_checked_before_anything_runs(make_app, variants, pointer):
    app = make_app(MAX_COMPARISON_VARIANTS=2)
    submitter = _submitter(app)

    response = submitter.post(COMPARISONS, json={"submission": example(), "variants": variants})

    assert response.status_code == 422, response.get_json()
    assert pointer in [e["pointer"] for e in response.get_json()["errors"]]


def test_only_roles_that_submit_may_compare_and_any_role_may_read_a_task(client, as_role):
    body = {"submission": example(), "variants": [{"name": "as quoted", "patch": {}}]}

    assert client.post(COMPARISONS, json=body).status_code == 401
    assert as_role("reviewer").post(COMPARISONS, json=body).status_code == 403
    location = as_role("admin").post(COMPARISONS, json=body).headers["Location"]
    assert as_role("reviewer").get(location).status_code == 200
    assert client.get(location).status_code == 401


def test_a_task_id_never_issued_is_404(as_role):
    response = as_role("reviewer").get("/api/v1/tasks/3f1c1f4e-0000-4000-8000-000000000000")

    assert response.status_code == 404 and response.mimetype == "application/problem+json"


def test_an_unreachable_broker_is_202_and_the_task_waits_in_the_outbox(make_app):
    app = make_app(CELERY_BROKER_URL="redis://127.0.0.1:1/0")  # nothing listens on port 1
    submitter = _submitter(app)

    response = submitter.post(COMPARISONS, json={"submission": example(),
                                                 "variants": [{"name": "as quoted", "patch": {}}]})

    # Accepted all the same: queued once the broker is back (tests/api/test_task_outbox.py sends it)
    assert response.status_code == 202, response.get_json()
    assert response.get_json()["state"] == "PENDING"
    task_id = _events(app, "comparison.requested")[0].detail["task_id"]
    assert submitter.get(f"/api/v1/tasks/{task_id}").get_json()["state"] == "PENDING"
    from service.tasks import task_outbox

    with app.app_context():
        assert task_outbox.unsent() == [task_id]


def test_without_a_task_queue_background_work_is_503_and_recorded_as_failed(make_app):
    # The service sends tasks only through service/tasks/tasks_port.py; TASK_QUEUE names who registers the queue.
    app = make_app(TASK_QUEUE=None)
    assert "celery" not in app.extensions
    submitter = _submitter(app)

    response = submitter.post(COMPARISONS, json={"submission": example(),
                                                 "variants": [{"name": "as quoted", "patch": {}}]})

    assert response.status_code == 503 and "TASK_QUEUE" in response.get_json()["detail"]
    task_id = _events(app, "comparison.requested")[0].detail["task_id"]
    task = submitter.get(f"/api/v1/tasks/{task_id}").get_json()
    assert task["state"] == "FAILURE" and task["error"]["status"] == 503


def test_prefer_respond_async_renders_the_signed_pdf_in_a_task(app, client, as_role, submitted):
    # Given an approved record whose PDF was never rendered
    _, view = submitted
    view = waive_all(as_role("reviewer"), view)
    approved = as_role("approver").post(url(view["id"], "decisions"), json={"action": "approve"},
                                        if_match=view["etag"]).get_json()
    record_pdf = f"/api/v1/records/{approved['final_record_id']}.pdf"
    reader = as_role("reviewer")

    # When a reader asks for it asynchronously
    response = reader.get(record_pdf, headers={"Prefer": "respond-async, wait=0"})

    # Then the task renders and stores it, and the PDF it links to is the one it describes
    assert response.status_code == 202, response.get_data(as_text=True)[:300]
    assert response.headers["Preference-Applied"] == "respond-async"
    task = reader.get(response.headers["Location"]).get_json()
    assert task["state"] == "SUCCESS" and task["kind"] == "record-pdf"
    assert task["links"]["result"] == record_pdf
    pdf = reader.get(record_pdf)
    assert pdf.status_code == 200 and pdf.headers["Record-Status"] == "signed"
    assert task["result"]["pdf_digest"] == "sha256:" + hashlib.sha256(pdf.data).hexdigest()
    pem = "".join(k["certificate_pem"] for k in client.get("/api/v1/keys").get_json()["keys"])
    assert verify_document(pdf.data, TrustedKeys.from_pem(pem.encode(), "GET /api/v1/keys")).ok
    # A stored PDF is served at once, whatever the preference
    again = reader.get(record_pdf, headers={"Prefer": "respond-async"})
    assert again.status_code == 200 and again.data == pdf.data
    assert len(_events(app, "record.pdf_issued")) == 1


def test_prefer_respond_async_does_not_apply_to_a_draft(as_role, submitted):
    submitter, view = submitted

    response = submitter.get(f"/api/v1/records/{view['evaluation']['record_id']}.pdf",
                             headers={"Prefer": "respond-async"})

    assert response.status_code == 200 and response.headers["Record-Status"] == "draft"
    assert "Preference-Applied" not in response.headers


def test_the_openapi_document_describes_comparisons_and_tasks(client):
    paths = client.get("/api/v1/openapi.json").get_json()["paths"]

    create = paths["/api/v1/comparisons"]["post"]
    # Any role compares stored quotes; what-if variants need a role that submits (the docstring says so)
    assert create["x-roles"] == ["admin", "approver", "reviewer", "submitter"]
    assert "what-if variants need a role that may submit quotes" in " ".join(create["description"].split())
    assert create["responses"]["202"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Task"}
    assert {"401", "403", "404", "422", "503"} <= set(create["responses"])
    assert "404" in paths["/api/v1/tasks/{task_id}"]["get"]["responses"]
    pdf = paths["/api/v1/records/{record_id}.pdf"]["get"]["responses"]
    assert "application/json" in pdf["202"]["content"] and "application/pdf" in pdf["200"]["content"]

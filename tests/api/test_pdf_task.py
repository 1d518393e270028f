"""The signed PDF is issued by one function, whether a request or the PDF task renders it first.

The task is run here as a worker runs it (in the app context, under a task id), without a broker.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import asdict
from typing import Any

from api_support import url, waive_all
from sqlmodel import select

from service.accounts.actors import Actor
from service.persistence.db import get_db
from service.persistence.models import AuditEvent, RecordPdf, TaskRun
from service.tasks.tasks_port import RENDER_RECORD_PDF

READER = asdict(Actor(name="records-clerk", role="reviewer"))


def _approved_record_id(as_role: Any, submitted: tuple[Any, dict[str, Any]]) -> str:
    _, view = submitted
    view = waive_all(as_role("reviewer"), view)
    approved = as_role("approver").post(url(view["id"], "decisions"), json={"action": "approve"},
                                        if_match=view["etag"])
    assert approved.status_code == 201, approved.get_json()
    return approved.get_json()["final_record_id"]


def _run_task(app: Any, *args: Any) -> tuple[Any, TaskRun]:
    """Returns the eager result of the PDF task and its row in the task table."""
    task_id = str(uuid.uuid4())
    result = app.extensions["celery"].tasks[RENDER_RECORD_PDF].apply(args=list(args), task_id=task_id)
    with get_db(app).session() as session:
        row = session.get(TaskRun, task_id)
    assert row is not None
    return result, row


def _pdf_events(app: Any) -> list[AuditEvent]:
    with get_db(app).session() as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.action == "record.pdf_issued")).all())


def test_a_pdf_a_request_issued_is_the_one_the_task_finds(app, as_role, submitted):
    # Given an approved record whose signed PDF a reader fetched (the API rendered and stored it)
    record_id = _approved_record_id(as_role, submitted)
    served = as_role("reviewer").get(f"/api/v1/records/{record_id}.pdf")
    assert served.status_code == 200 and served.headers["Record-Status"] == "signed"

    # When the PDF task runs for the same record
    result, row = _run_task(app, record_id, READER)

    # Then it reports the stored PDF instead of issuing another
    assert result.successful() and row.state == "SUCCESS"
    assert row.result["pdf_digest"] == "sha256:" + hashlib.sha256(served.data).hexdigest()
    assert [e.detail["pdf_digest"] for e in _pdf_events(app)] == [row.result["pdf_digest"]]


def test_a_pdf_the_task_issued_is_the_one_requests_are_served(app, as_role, submitted):
    record_id = _approved_record_id(as_role, submitted)

    result, row = _run_task(app, record_id, READER)
    served = as_role("reviewer").get(f"/api/v1/records/{record_id}.pdf")

    assert result.successful() and served.status_code == 200
    assert row.result["pdf_digest"] == "sha256:" + hashlib.sha256(served.data).hexdigest()
    events = _pdf_events(app)
    assert len(events) == 1 and events[0].actor == READER["name"]


def test_the_task_refuses_a_record_that_is_not_approved(app, submitted):
    _, view = submitted

    result, row = _run_task(app, view["evaluation"]["record_id"], READER)

    assert result.failed() and row.state == "FAILURE"
    assert row.error["status"] == 409 and "not an approved final record" in row.error["detail"]
    with get_db(app).session() as session:
        assert session.exec(select(RecordPdf)).first() is None

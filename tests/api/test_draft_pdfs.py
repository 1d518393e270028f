"""DRAFT PDFs are rendered once per record digest and kept in the database (service/approval/draft_pdfs.py); with a
broker, a signed PDF not rendered yet is a worker's task (service/api/records.py)."""

from __future__ import annotations

import threading
from typing import Any

from api_support import Caller, new_token, url, waive_all
from sqlmodel import select

from service.persistence.db import get_db
from service.persistence.models import DraftPdf, Record
from service.record.render import draft_pdf, renderer_digest
from service.tasks import tasks_port
from service.tasks.tasks_port import RENDER_RECORD_PDF


def _pdf(record_id: str) -> str:
    return f"/api/v1/records/{record_id}.pdf"


class CountingRender:
    """A draft renderer that counts its renders and, given an event, waits for it before it renders."""

    def __init__(self, release: threading.Event | None = None, fail: bool = False) -> None:
        self.renders, self.release, self.fail = 0, release, fail

    def __call__(self, document: dict[str, Any]) -> bytes:
        self.renders += 1
        if self.release is not None:
            assert self.release.wait(30)
        if self.fail:
            raise RuntimeError("the renderer broke")
        return draft_pdf(document)


def _rows(app: Any) -> list[DraftPdf]:
    with get_db(app).session() as session:
        return list(session.exec(select(DraftPdf)).all())


def _digest(app: Any, record_id: str) -> str:
    with get_db(app).session() as session:
        record = session.get(Record, record_id)
        assert record is not None
        return record.digest


def test_two_first_requests_at_once_render_the_draft_once(app, submitted, monkeypatch):
    # Given a draft nobody read yet, and a renderer held until both requests are in
    submitter, view = submitted
    record_id = view["evaluation"]["record_id"]
    release = threading.Event()
    render = CountingRender(release)
    monkeypatch.setattr("service.approval.draft_pdfs.draft_pdf", render)
    answers: list[Any] = []

    # When two readers ask for it at once
    readers = [threading.Thread(target=lambda: answers.append(submitter.get(_pdf(record_id)))) for _ in range(2)]
    for reader in readers:
        reader.start()
    while not render.renders:  # one of them claimed the draft and is rendering it
        threading.Event().wait(0.01)
    threading.Event().wait(0.3)  # the other one has found the claim meanwhile
    release.set()
    for reader in readers:
        reader.join(60)

    # Then it was rendered once, and both got the same PDF
    assert render.renders == 1
    assert [a.status_code for a in answers] == [200, 200] and answers[0].data == answers[1].data
    rows = _rows(app)
    assert len(rows) == 1 and rows[0].pdf == answers[0].data and rows[0].renderer == renderer_digest()


def test_a_failed_render_drops_its_claim_and_the_next_request_renders(app, submitted, monkeypatch):
    submitter, view = submitted
    record_id = view["evaluation"]["record_id"]
    monkeypatch.setattr("service.approval.draft_pdfs.draft_pdf", CountingRender(fail=True))

    assert submitter.get(_pdf(record_id)).status_code == 500
    assert _rows(app) == []

    monkeypatch.setattr("service.approval.draft_pdfs.draft_pdf", draft_pdf)
    assert submitter.get(_pdf(record_id)).status_code == 200


def test_a_request_waits_for_a_claim_then_answers_503_and_takes_over_a_stale_one(make_app, clock,
                                                                                 submission_document):
    # Given a draft that a request claimed and never rendered (its process died), on an app that waits 0.3 s
    app = make_app(DRAFT_PDF_WAIT_S=0.3, DRAFT_PDF_CLAIM_STALE_S=60)
    # (the `as_role` fixture acts on the default app, which waits DRAFT_PDF_WAIT_S's default of 30 s)
    name, token = new_token(app, "submitter")
    submitter = Caller(app, name, "submitter", token)
    created = submitter.post("/api/v1/submissions", json=submission_document).get_json()
    record_id = created["evaluation"]["record_id"]
    with get_db(app).session() as session:
        session.add(DraftPdf(record_digest=_digest(app, record_id), renderer=renderer_digest(), claimed_at=clock()))
        session.commit()

    # When a reader asks while the claim is fresh, it waits, then is told to ask again
    busy = submitter.get(_pdf(record_id))
    assert busy.status_code == 503 and "being rendered by another request" in busy.get_json()["detail"]

    # and once the claim is stale, the next request renders the draft itself
    clock.advance(seconds=61)
    served = submitter.get(_pdf(record_id))
    assert served.status_code == 200 and served.headers["Record-Status"] == "draft"
    assert [row.pdf for row in _rows(app)] == [served.data]


def test_a_draft_another_renderer_drew_is_drawn_again_and_replaced(app, submitted, clock):
    submitter, view = submitted
    record_id = view["evaluation"]["record_id"]
    with get_db(app).session() as session:
        session.add(DraftPdf(record_digest=_digest(app, record_id), renderer="sha256:" + "0" * 64,
                             claimed_at=clock(), pdf=b"%PDF-1.7 an older layout"))
        session.commit()

    served = submitter.get(_pdf(record_id))

    assert served.status_code == 200 and served.data.startswith(b"%PDF") and b"older layout" not in served.data
    assert [(row.renderer, row.pdf) for row in _rows(app)] == [(renderer_digest(), served.data)]


# --- a broker: signed PDFs are rendered by a worker ---------------------------------------------------------

class BackgroundQueue:
    """A task queue whose tasks run elsewhere: it only records what it was sent (as a broker would take it)."""

    in_background = True

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[Any], str]] = []

    def send(self, name: str, args: list[Any], task_id: str) -> None:
        self.sent.append((name, args, task_id))

    def forget(self, task_id: str) -> None:
        pass

    def state(self, task_id: str) -> tuple[str | None, Any]:
        return "PENDING", None


def test_with_a_broker_a_signed_pdf_not_rendered_yet_is_rendered_by_a_worker(app, as_role, submitted):
    # Given an approved record whose signed PDF was never rendered, and a queue whose workers are elsewhere
    eager_celery = app.extensions["celery"]
    queue = BackgroundQueue()
    tasks_port.register(app, queue)
    _, view = submitted
    view = waive_all(as_role("reviewer"), view)
    approved = as_role("approver").post(url(view["id"], "decisions"), json={"action": "approve"},
                                        if_match=view["etag"]).get_json()
    record_pdf = _pdf(approved["final_record_id"])
    reader = as_role("reviewer")

    # When a reader asks for it, without any preference, twice
    first, second = reader.get(record_pdf), reader.get(record_pdf)

    # Then the API renders nothing: it queues one task and answers 202 with it both times
    assert first.status_code == second.status_code == 202, first.get_data(as_text=True)[:300]
    assert first.headers["Location"] == second.headers["Location"] and "Preference-Applied" not in first.headers
    assert [name for name, _, _ in queue.sent] == [RENDER_RECORD_PDF]
    assert reader.get(first.headers["Location"]).get_json()["state"] == "PENDING"

    # and once a worker ran the task, the stored PDF is served
    _, args, task_id = queue.sent[0]
    assert eager_celery.tasks[RENDER_RECORD_PDF].apply(args=args, task_id=task_id).successful()
    served = reader.get(record_pdf)
    assert served.status_code == 200 and served.headers["Record-Status"] == "signed"
    assert reader.get(first.headers["Location"]).get_json()["state"] == "SUCCESS"


def test_with_a_broker_a_draft_is_still_served_at_once(app, submitted):
    tasks_port.register(app, BackgroundQueue())
    submitter, view = submitted

    response = submitter.get(_pdf(view["evaluation"]["record_id"]))

    assert response.status_code == 200 and response.headers["Record-Status"] == "draft"


def test_without_a_broker_the_queue_runs_in_the_request(app):
    with app.app_context():
        assert tasks_port.runs_in_background() is False

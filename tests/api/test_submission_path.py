"""POST /api/v1/submissions: what it writes, in which order, and that its answer is what a later GET reads."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import event, text
from sqlmodel import func, select

from service.persistence import audit
from service.persistence.db import get_db
from service.persistence.models import AuditEvent, Submission


@contextmanager
def statements(app) -> Iterator[list[str]]:
    """Yields the list of SQL statements the app's engine runs meanwhile (their first word and table)."""
    seen: list[str] = []

    def record(_conn, _cursor, statement, _parameters, _context, _many) -> None:
        words = statement.split()
        if words[0] == "WITH":  # data-modifying WITHs and their statement, each write named: "UPDATE a + INSERT b"
            seen.append(" + ".join(f"UPDATE {words[i + 1]}" if word == "(UPDATE" else f"INSERT {words[i + 2]}"
                                   for i, word in enumerate(words) if word in ("(UPDATE", "(INSERT", "INSERT")))
            return
        if words[0] == "SELECT":
            target = words[words.index("FROM") + 1] if "FROM" in words else ""
        else:
            target = words[2] if words[0] in ("INSERT", "DELETE") else words[1] if words[0] == "UPDATE" else ""
        seen.append(f"{words[0]} {target}".strip())

    engine = get_db(app).engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def test_the_answer_is_what_a_get_reads_back(as_role, submission_document):
    submitter = as_role("submitter")
    created = submitter.post("/api/v1/submissions", json=submission_document)
    assert created.status_code == 201, created.get_json()

    read = submitter.get(created.headers["Location"])

    assert read.status_code == 200
    assert created.get_json() == read.get_json()
    assert created.headers["ETag"] == read.headers["ETag"]


def test_a_replayed_answer_is_what_a_get_reads_back(as_role, submission_document):
    submitter = as_role("submitter")
    headers = {"Idempotency-Key": "path-1"}
    created = submitter.post("/api/v1/submissions", json=submission_document, headers=headers)
    replayed = submitter.post("/api/v1/submissions", json=submission_document, headers=headers)

    read = submitter.get(created.headers["Location"])

    assert replayed.status_code == 200
    assert created.get_json() == replayed.get_json() == read.get_json()


def test_the_audit_chain_is_locked_last_and_nothing_written_is_read_back(app, as_role, submission_document):
    # Given a submitter with an Idempotency-Key (the path that writes the most)
    submitter = as_role("submitter")

    # When a submission is created
    with statements(app) as seen:
        response = submitter.post("/api/v1/submissions", json=submission_document,
                                  headers={"Idempotency-Key": "path-2"})
    assert response.status_code == 201

    # Then the chain's head row is taken by the last statements of the transaction, which append its two events
    # at once (and look for webhook subscriptions to write to the outbox with them: there are none), and nothing
    # written is read back
    first_write = next(i for i, s in enumerate(seen) if s.startswith("INSERT"))
    lock = seen.index("UPDATE audit_chain_head")
    # (PostgreSQL sets the head's last hash in the events' INSERT, a round trip fewer)
    append = (["UPDATE audit_chain_head + INSERT audit_event"] if get_db(app).engine.dialect.name == "postgresql"
              else ["UPDATE audit_chain_head", "INSERT audit_event"])
    assert seen[lock:] == ["UPDATE audit_chain_head", *append, "SELECT webhook_subscription"]
    assert "INSERT idempotency_key" in seen[first_write:lock]
    assert [s for s in seen[first_write:] if s.startswith("SELECT")] == ["SELECT webhook_subscription"]


def test_concurrent_submissions_are_each_stored_once_on_one_unbroken_chain(app, as_role, submission_document):
    submitter = as_role("submitter")
    barrier = threading.Barrier(4, timeout=30)
    answers: list[int] = []

    def post() -> None:
        barrier.wait()
        answers.append(submitter.post("/api/v1/submissions", json=submission_document).status_code)

    threads = [threading.Thread(target=post) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert answers == [201] * 4
    with get_db(app).session() as session:
        assert session.exec(select(func.count()).select_from(Submission)).one() == 4
        verification = audit.verify(session)
        actions = session.exec(select(AuditEvent.action).where(AuditEvent.submission_id.is_not(None))
                               .order_by(AuditEvent.id)).all()
    assert verification.ok, verification.problem
    # Each submission's two events are adjacent: no other writer slipped in between them.
    assert actions == ["submission.created", "evaluation.completed"] * 4


def test_the_rows_hold_the_record_and_each_check_result_as_written(app, as_role, submission_document):
    # Given a submission and then a revision of it (the two shapes of the statement that writes their rows)
    submitter = as_role("submitter")
    created = submitter.post("/api/v1/submissions", json=submission_document)
    assert created.status_code == 201, created.get_json()
    revised = submitter.post(created.headers["Location"] + "/revisions", json=submission_document,
                             headers={"If-Match": created.headers["ETag"]})
    assert revised.status_code == 201, revised.get_json()

    # Then each evaluation's check results are its record's checks, in its order, each with the digest the
    # answer gives and the evidence stored as the JSON text of the evidence on its own; the record and the
    # revision's document are stored as their own JSON text
    with get_db(app).engine.connect() as connection:
        for answer in (created.get_json(), revised.get_json()):
            evaluation = answer["evaluation"]
            record_text, digest = connection.execute(
                text("SELECT CAST(document AS TEXT), digest FROM record WHERE id = :id"),
                {"id": evaluation["record_id"]}).one()
            record = json.loads(record_text)
            assert record_text == json.dumps(record)
            rows = connection.execute(text(
                "SELECT check_id, status, basis, digest, CAST(evidence AS TEXT) FROM check_result "
                "WHERE evaluation_id = :id ORDER BY id"), {"id": evaluation["id"]}).all()
            assert [tuple(row) for row in rows] == [
                (check["id"], check["status"], check["basis"], shown["digest"], json.dumps(check["evidence"]))
                for check, shown in zip(record["checks"], evaluation["checks"], strict=True)]
            revision_text = connection.execute(text(
                "SELECT CAST(document AS TEXT) FROM revision WHERE submission_id = :id AND number = :number"),
                {"id": answer["id"], "number": evaluation["revision"]}).scalar_one()
            assert json.loads(revision_text) == submission_document
            assert revision_text == json.dumps(json.loads(revision_text))
            assert digest.startswith("sha256:")


def test_on_postgresql_the_record_is_stored_compressed_with_lz4_and_reads_back_as_written(app, backend, as_role,
                                                                                         submission_document):
    # Given a server that has LZ4 (migration 0010 leaves pglz where it has not)
    if backend != "postgresql":
        return
    with get_db(app).engine.connect() as connection:
        if not connection.execute(text("SELECT 'lz4' = ANY(enumvals) FROM pg_settings "
                                       "WHERE name = 'default_toast_compression'")).scalar():
            return
    # When a quote is submitted with an Idempotency-Key
    created = as_role("submitter").post("/api/v1/submissions", json=submission_document,
                                        headers={"Idempotency-Key": "lz4-1"})
    assert created.status_code == 201, created.get_json()

    # Then its record (large enough to be compressed) is stored with LZ4, and reads back as the JSON text written
    with get_db(app).engine.connect() as connection:
        method, record_text = connection.execute(
            text("SELECT pg_column_compression(document), CAST(document AS TEXT) FROM record WHERE id = :id"),
            {"id": created.get_json()["evaluation"]["record_id"]}).one()
        columns = dict(connection.execute(text(
            "SELECT attrelid::regclass::text || '.' || attname, attcompression FROM pg_attribute "
            "WHERE (attrelid::regclass::text, attname) IN (('revision', 'document'), ('check_result', 'evidence'), "
            "('record', 'document'), ('idempotency_key', 'response'))")).all())
    assert method == "lz4"
    assert record_text == json.dumps(json.loads(record_text))
    assert columns == {"revision.document": "l", "check_result.evidence": "l", "record.document": "l",
                       "idempotency_key.response": "l"}

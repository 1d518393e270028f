"""The audit anchor of signed records and `quotecheck audit verify --against RECORD`, on SQLite and PostgreSQL.

Each record the service signs carries the audit chain's length N and head hash from just before the event
that issued it (event N + 1). Someone with write access to the database can cut the chain's tail and fix
the head row, or rewrite an event and re-hash everything after it: `audit verify` alone then reports OK.
Held against a signed record that was served over HTTP, it does not.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from api_support import Caller, url, waive_all
from click.testing import CliRunner
from sqlalchemy import text
from sqlmodel import col, select

from service.accounts.actors import Actor
from service.cli import main
from service.persistence import audit
from service.persistence.db import get_db
from service.persistence.models import AuditChainHead, AuditEvent
from service.record import SigningKeys, sign_record
from service.signals import audit_anchored

PO = {"po_number": "PO-2026/0042", "system": "SAP S/4HANA"}


# --- helpers ------------------------------------------------------------------------------------------------

def run_cli(database_url: str, tmp_path: Path, *args: str) -> tuple[int, str]:
    """Returns the exit code and output (stdout and stderr) of `quotecheck ARGS` on the test's database.

    The instance folder is the app's, so the CLI trusts the key the service signed with.
    """
    env = {"QUOTECHECK_DATABASE_URL": database_url, "QUOTECHECK_INSTANCE_PATH": str(tmp_path / "instance")}
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def approve(as_role: Any, submitted: tuple[Caller, dict[str, Any]]) -> tuple[Caller, str]:
    """Returns the approver and the final record id after waiving every blocking check and approving."""
    _, view = submitted
    view = waive_all(as_role("reviewer"), view)
    approver = as_role("approver")
    response = approver.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])
    assert response.status_code == 201, response.get_json()
    return approver, response.get_json()["final_record_id"]


def download(caller: Caller, record_id: str, tmp_path: Path, suffix: str = ".json") -> Path:
    """Returns the file the signed record (JSON envelope or PDF) was saved to, as a user saves a download."""
    response = caller.get(f"/api/v1/records/{record_id}{suffix}")
    assert response.status_code == 200 and response.headers["Record-Status"] == "signed"
    path = tmp_path / f"{record_id}{suffix}"
    path.write_bytes(response.data)
    return path


def stored_events(app: Any) -> list[AuditEvent]:
    with get_db(app).session() as session:
        return list(session.exec(select(AuditEvent).order_by(col(AuditEvent.id))).all())


def cut_tail_and_fix_head(app: Any, keep: int) -> None:
    """Deletes every event after ``keep`` and sets the head row to match: the chain alone then looks whole."""
    with get_db(app).engine.begin() as connection:
        connection.execute(text("DELETE FROM audit_event WHERE id > :keep"), {"keep": keep})
        last = connection.execute(text("SELECT hash FROM audit_event WHERE id = :keep"), {"keep": keep}).scalar_one()
        connection.execute(text("UPDATE audit_chain_head SET length = :keep, last_hash = :last WHERE id = 1"),
                           {"keep": keep, "last": last})


def rewrite_and_rehash(app: Any, event_id: int, **changes: Any) -> None:
    """Changes event ``event_id`` and recomputes every hash from it on, head row included (a thorough forger)."""
    with get_db(app).session() as session:
        events = session.exec(select(AuditEvent).where(col(AuditEvent.id) >= event_id)
                              .order_by(col(AuditEvent.id))).all()
        previous = session.get(AuditEvent, event_id - 1)
        prev_hash = previous.hash if previous is not None else audit.GENESIS_HASH
        for event in events:
            if event.id == event_id:
                for name, value in changes.items():
                    setattr(event, name, value)
            event.prev_hash = prev_hash
            event.hash = audit.event_hash(event)
            prev_hash = event.hash
            session.add(event)
        head = session.get(AuditChainHead, audit.HEAD_ID)
        head.last_hash = prev_hash
        session.add(head)
        session.commit()


# --- what a record carries ------------------------------------------------------------------------------------

def test_the_signed_record_anchors_the_chain_just_before_the_approval(app, as_role, submitted, tmp_path):
    approver, record_id = approve(as_role, submitted)

    record = json.loads(download(approver, record_id, tmp_path).read_bytes())["record"]

    anchor = record["audit_anchor"]
    events = {e.id: e for e in stored_events(app)}
    issuing = events[anchor["events"] + 1]
    assert anchor["head_hash"] == "sha256:" + events[anchor["events"]].hash
    assert issuing.action == "decision.approve" and issuing.detail["record_id"] == record_id
    assert issuing.prev_hash == events[anchor["events"]].hash


# --- an untouched chain holds ---------------------------------------------------------------------------------

def test_an_untouched_chain_holds_the_anchor_of_each_issue_as_events_are_added(app, as_role, submitted,
                                                                               database_url, tmp_path):
    # Given the first issue, saved, and then a purchase order that issues a second one, and more events after
    approver, first_id = approve(as_role, submitted)
    first = download(approver, first_id, tmp_path)
    link = approver.post(f"/api/v1/records/{first_id}/purchase-orders", json=PO)
    assert link.status_code == 201, link.get_json()
    second = download(approver, link.get_json()["record_id"], tmp_path)
    as_role("reviewer")  # another token: one more event
    total = len(stored_events(app))

    # When each issue is held against the chain, Then both hold
    for path, issue, action in ((first, 1, "decision.approve"), (second, 2, "purchase_order.linked")):
        code, output = run_cli(database_url, tmp_path, "audit", "verify", "--against", str(path))
        assert code == 0, output
        lines = output.splitlines()
        assert lines[0].startswith(f"audit chain OK: {total} events")
        assert lines[1].startswith(f"anchor OK: record {path.stem} (issue {issue}) anchors event ")
        assert f"({action}, " in output and f"issued record {path.stem}" in output


def test_the_record_pdf_is_held_against_the_chain_too(app, as_role, submitted, database_url, tmp_path):
    approver, record_id = approve(as_role, submitted)
    pdf = download(approver, record_id, tmp_path, ".pdf")  # its first download appends record.pdf_issued

    code, output = run_cli(database_url, tmp_path, "audit", "verify", "--against", str(pdf))

    assert code == 0, output
    assert f"anchor OK: record {record_id} (issue 1)" in output


def test_a_published_certificate_can_stand_in_for_the_instance_key(app, client, as_role, submitted, database_url,
                                                                   tmp_path):
    approver, record_id = approve(as_role, submitted)
    record = download(approver, record_id, tmp_path)
    certificate = tmp_path / "service.cert.pem"
    certificate.write_text(client.get("/api/v1/keys").get_json()["keys"][0]["certificate_pem"])
    stranger = tmp_path / "stranger.pem"
    stranger.write_text(SigningKeys.generate().certificate_pem())

    assert run_cli(database_url, tmp_path, "audit", "verify", "--against", str(record),
                   "--key", str(certificate))[0] == 0
    code, output = run_cli(database_url, tmp_path, "audit", "verify", "--against", str(record), "--key", str(stranger))
    assert code == 1
    assert f"record {record_id} in {record} does NOT verify" in output and "unknown key id" in output


# --- a cut or rewritten chain does not ------------------------------------------------------------------------

@pytest.mark.parametrize("keep", ["anchor", "before-anchor"])
def test_deleting_the_tail_after_signing_is_detected_even_with_the_head_row_fixed(app, as_role, submitted,
                                                                                database_url, tmp_path, keep):
    # Given a signed record, saved; the chain grows afterwards
    approver, record_id = approve(as_role, submitted)
    path = download(approver, record_id, tmp_path)
    anchored = json.loads(path.read_bytes())["record"]["audit_anchor"]["events"]
    as_role("reviewer")

    # When someone deletes the approval and everything after it (or more) and fixes the head row
    kept = anchored if keep == "anchor" else anchored - 3
    cut_tail_and_fix_head(app, kept)

    # Then the chain alone still looks whole ...
    code, output = run_cli(database_url, tmp_path, "audit", "verify")
    assert code == 0 and f"audit chain OK: {kept} events" in output
    # ... but held against the record it does not, and the output says what is missing
    code, output = run_cli(database_url, tmp_path, "audit", "verify", "--against", str(path))
    assert code == 1, output
    assert output.splitlines()[1].startswith(f"anchor BROKEN: record {record_id} (issue 1) anchors event {anchored}")
    if keep == "anchor":
        assert (f"x the chain has {kept} events, but event {anchored + 1}, which issued record {record_id}, is "
                "missing: the tail of the chain was deleted") in output
    else:
        assert (f"x the chain has {kept} events, but record {record_id} was signed when it had {anchored}: "
                f"event {anchored} is missing") in output


def test_rewriting_an_event_before_the_anchor_and_rehashing_is_detected(app, as_role, submitted, database_url,
                                                                       tmp_path):
    # Given a signed record, saved
    approver, record_id = approve(as_role, submitted)
    path = download(approver, record_id, tmp_path)
    waiver = next(e for e in stored_events(app) if e.action == "waiver.created")

    # When someone rewrites who waived and re-hashes the whole chain from there, head row included
    rewrite_and_rehash(app, waiver.id, actor="mallory")

    # Then the chain alone verifies, but not against the record: the anchored event's hash changed
    assert run_cli(database_url, tmp_path, "audit", "verify")[0] == 0
    code, output = run_cli(database_url, tmp_path, "audit", "verify", "--against", str(path))
    assert code == 1, output
    anchor = json.loads(path.read_bytes())["record"]["audit_anchor"]
    assert f"but record {record_id} anchors {anchor['head_hash']}: events up to {anchor['events']} were rewritten" \
        in output


def test_a_chain_broken_in_place_is_reported_along_with_the_anchor(app, as_role, submitted, database_url, tmp_path):
    approver, record_id = approve(as_role, submitted)
    path = download(approver, record_id, tmp_path)
    with get_db(app).engine.begin() as connection:
        connection.execute(text("UPDATE audit_event SET actor = 'mallory' WHERE id = 2"))

    code, output = run_cli(database_url, tmp_path, "audit", "verify", "--against", str(path))

    assert code == 1
    assert output.startswith("audit chain BROKEN at event 2:")
    assert "anchor OK" in output  # the anchored event itself was not touched; the break is named above


# --- what cannot be held against the chain ----------------------------------------------------------------------

def test_a_tampered_record_is_no_evidence(app, as_role, submitted, database_url, tmp_path):
    approver, record_id = approve(as_role, submitted)
    path = download(approver, record_id, tmp_path)
    # Changing the anchor (to make it fit a cut chain) breaks the record's signature
    path.write_bytes(path.read_bytes().replace(b'"audit_anchor":{"events":', b'"audit_anchor":{"events":1'))

    code, output = run_cli(database_url, tmp_path, "audit", "verify", "--against", str(path))

    assert code == 1
    assert f"record {record_id} in {path} does NOT verify, so its audit anchor is no evidence" in output
    assert "does not match signed digest" in output


def test_records_without_an_anchor_or_signature_are_bad_input(app, as_role, submitted, database_url, tmp_path):
    submitter, view = submitted
    # An evaluation record signed with the instance key outside the workflow carries no anchor
    evaluation = submitter.get(f"/api/v1/records/{view['evaluation']['record_id']}.json")
    keys = SigningKeys.load_or_create(tmp_path / "instance")
    signed = tmp_path / "evaluation.signed.json"
    signed.write_text(json.dumps(sign_record(json.loads(evaluation.data), keys)))
    unsigned = tmp_path / "evaluation.json"
    unsigned.write_bytes(evaluation.data)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("not json")

    code, output = run_cli(database_url, tmp_path, "audit", "verify", "--against", str(signed))
    assert code == 2 and "carries no audit_anchor" in output
    code, output = run_cli(database_url, tmp_path, "audit", "verify", "--against", str(unsigned))
    assert code == 1 and "does NOT verify" in output and "unsigned record" in output
    code, output = run_cli(database_url, tmp_path, "audit", "verify", "--against", str(garbage))
    assert code == 2 and "neither a PDF nor JSON" in output
    code, output = run_cli(database_url, tmp_path, "audit", "verify", "--against", str(tmp_path / "missing.json"))
    assert code == 2 and "cannot read" in output


# --- taken under the chain's lock -------------------------------------------------------------------------------

def test_an_event_written_while_a_record_is_issued_comes_after_the_issuing_event(app, as_role, submitted,
                                                                                database_url, tmp_path):
    """Between taking the anchor and appending the approval, another writer must wait, or the anchor lies."""
    _, view = submitted
    view = waive_all(as_role("reviewer"), view)
    approver = as_role("approver")
    writers: list[threading.Thread] = []

    def append_other_event() -> None:
        with get_db(app).session() as session:
            audit.append(session, action="test.concurrent", actor=Actor("other", "admin"),
                         occurred_at=datetime.now(UTC))
            session.commit()

    def write_meanwhile(_sender: Any, **_: Any) -> None:
        writer = threading.Thread(target=append_other_event)
        writers.append(writer)
        writer.start()
        # Give it the chance to slip in; holding the chain's lock, the approval makes it wait until commit.
        writer.join(timeout=2)

    audit_anchored.connect(write_meanwhile, weak=False)
    try:
        response = approver.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])
    finally:
        audit_anchored.disconnect(write_meanwhile)
    for writer in writers:
        writer.join(timeout=60)
    assert response.status_code == 201, response.get_json()
    record_id = response.get_json()["final_record_id"]

    actions = [e.action for e in stored_events(app)]
    assert actions[-2:] == ["decision.approve", "test.concurrent"]
    code, output = run_cli(database_url, tmp_path, "audit", "verify", "--against",
                           str(download(approver, record_id, tmp_path)))
    assert code == 0, output

"""The signed record over HTTP: keys, signed JSON and PDF, verification, purchase orders, on SQLite and PostgreSQL.

Every signature is checked the way an outsider would: with the key published at GET /api/v1/keys and the
record package's verify functions, never by asking the server whether its own output is fine.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from api_support import Caller, url, waive_all
from sqlalchemy import text

import schemas
from service import create_app
from service.persistence import audit
from service.persistence.db import get_db
from service.record import SigningError, TrustedKeys, load_signing_keys, verify_document, verify_record

PO = {"po_number": "PO-2026/0042", "system": "SAP S/4HANA"}


# --- helpers ------------------------------------------------------------------------------------------------

def records(record_id: str, suffix: str = ".json") -> str:
    return f"/api/v1/records/{record_id}{suffix}"


def published_keys(client: Any) -> TrustedKeys:
    """Returns the trust roots an outsider takes from GET /api/v1/keys (no token)."""
    response = client.get("/api/v1/keys")
    assert response.status_code == 200, response.get_json()
    pem = "".join(key["certificate_pem"] for key in response.get_json()["keys"])
    return TrustedKeys.from_pem(pem.encode(), "GET /api/v1/keys")


def pdftotext(pdf: bytes, tmp_path: Path) -> str:
    tool = shutil.which("pdftotext")
    if tool is None:
        pytest.skip("pdftotext is not installed (apt-get install -y poppler-utils)")
    source = tmp_path / "record.pdf"
    source.write_bytes(pdf)
    return subprocess.run([tool, str(source), "-"], capture_output=True, text=True, check=True, timeout=60).stdout


def events(app: Any, submission_id: str, action: str) -> list[Any]:
    with get_db(app).session() as session:
        return [e for e in audit.events_of(session, submission_id) if e.action == action]


def chain_ok(app: Any) -> bool:
    with get_db(app).session() as session:
        return audit.verify(session).ok


@pytest.fixture
def approved(as_role, submitted) -> dict[str, Any]:
    """An approved submission: the failing quote, every blocking check waived, approved by an approver."""
    _, view = submitted
    view = waive_all(as_role("reviewer"), view)
    approver = as_role("approver")
    response = approver.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])
    assert response.status_code == 201, response.get_json()
    result = response.get_json()
    assert result["state"] == "approved" and result["final_record_id"]
    return {"view": result, "approver": approver, "record_id": result["final_record_id"]}


# --- keys ---------------------------------------------------------------------------------------------------

def test_keys_are_public_and_name_the_key_that_signs(client, app):
    response = client.get("/api/v1/keys")

    assert response.status_code == 200 and response.mimetype == "application/json"
    (key,) = response.get_json()["keys"]
    assert key["key_id"].startswith("sha256:") and key["algorithm"] == "ecdsa-p256-sha256"
    assert "BEGIN CERTIFICATE" in key["certificate_pem"] and "BEGIN PUBLIC KEY" in key["public_key_pem"]
    # Generated in the instance folder when the app was created, private key for the owner only
    key_file = Path(app.instance_path) / "signing" / "record-signing.key.pem"
    assert key_file.stat().st_mode & 0o077 == 0
    assert client.get("/api/v1/keys", headers={"If-None-Match": response.headers["ETag"]}).status_code == 304


def _load_keys_in_child(instance: str, start: Any, results: Any) -> None:
    start.wait()
    results.put(load_signing_keys({}, instance).key_id)


def test_processes_starting_at_once_generate_one_key(tmp_path):
    # gunicorn workers each create the app, and so load the signing key, at the same moment.
    context = multiprocessing.get_context("fork")
    start, results = context.Barrier(6), context.Queue()
    workers = [context.Process(target=_load_keys_in_child, args=(str(tmp_path), start, results)) for _ in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [w.exitcode for w in workers] == [0] * 6
    key_ids = {results.get(timeout=5) for _ in workers}
    assert len(key_ids) == 1
    assert key_ids == {load_signing_keys({}, str(tmp_path)).key_id}


def test_signing_configuration_errors_stop_the_start(tmp_path):
    with pytest.raises(SigningError, match="set both"):
        create_app({"INSTANCE_PATH": str(tmp_path), "SIGNING_KEY_FILE": str(tmp_path / "key.pem")})
    with pytest.raises(SigningError, match="must be a string"):
        create_app({"INSTANCE_PATH": str(tmp_path), "SIGNING_KEY_FILE": str(tmp_path / "key.pem"),
                    "SIGNING_CERT_FILE": str(tmp_path / "cert.pem"), "SIGNING_KEY_PASSWORD": 1234})


# --- the signed JSON record ---------------------------------------------------------------------------------

def test_approved_record_is_a_signed_envelope_that_verifies_with_the_published_key(client, approved):
    approver, record_id = approved["approver"], approved["record_id"]

    response = approver.get(records(record_id))

    assert response.status_code == 200 and response.mimetype == "application/json"
    assert response.headers["Record-Status"] == "signed"
    envelope = json.loads(response.data)
    result = verify_record(envelope, published_keys(client))
    assert result.ok, result.all_reasons()
    record = envelope["record"]
    assert record["record_id"] == record_id and record["issue"] == 1 and "supersedes" not in record
    assert [d["action"] for d in record["decisions"]] == ["approve"]
    assert schemas.validate("record", record) == []
    # The same request returns the same bytes, so the ETag holds and revalidation works
    again = approver.get(records(record_id))
    assert again.data == response.data and again.headers["ETag"] == response.headers["ETag"]
    assert approver.get(records(record_id), headers={"If-None-Match": response.headers["ETag"]}).status_code == 304
    # The approval's audit event names the record it issued, by digest
    (event,) = events(client.application, approved["view"]["id"], "decision.approve")
    assert event.detail["record_id"] == record_id and event.detail["record_digest"] == result.record_digest


def test_unapproved_evaluation_record_is_unsigned_and_marked_draft(submitted):
    submitter, view = submitted

    response = submitter.get(records(view["evaluation"]["record_id"]))

    assert response.status_code == 200 and response.headers["Record-Status"] == "draft"
    record = response.get_json()
    assert "signature" not in record and record["decisions"] == []
    assert schemas.validate("record", record) == []
    assert submitter.get(records(view["evaluation"]["record_id"])).data == response.data


def test_a_record_approved_before_signing_existed_is_signed_once_on_first_read(app, client, approved):
    approver, record_id = approved["approver"], approved["record_id"]
    with get_db(app).engine.begin() as connection:
        connection.execute(text("UPDATE record SET envelope = NULL WHERE id = :id"), {"id": record_id})

    first = approver.get(records(record_id))

    assert verify_record(json.loads(first.data), published_keys(client)).ok
    assert approver.get(records(record_id)).data == first.data
    assert len(events(app, approved["view"]["id"], "record.signed")) == 1
    assert chain_ok(app)


def test_unknown_record_is_404(as_role):
    response = as_role("reviewer").get(records("no-such-record"))
    assert response.status_code == 404 and response.mimetype == "application/problem+json"


# --- the PDF and verification ----------------------------------------------------------------------------

def test_signed_pdf_verifies_offline_and_through_the_api_and_never_changes(app, client, approved, tmp_path):
    approver, record_id = approved["approver"], approved["record_id"]
    envelope = json.loads(approver.get(records(record_id)).data)

    response = approver.get(records(record_id, ".pdf"))

    assert response.status_code == 200 and response.mimetype == "application/pdf"
    assert response.headers["Record-Status"] == "signed"
    assert f"commissioning-record-{record_id}.pdf" in response.headers["Content-Disposition"]
    pdf = response.data
    # Offline, with the published certificate only
    offline = verify_document(pdf, published_keys(client))
    assert offline.ok, offline.all_reasons()
    assert offline.record_digest == verify_record(envelope, published_keys(client)).record_digest
    # The PDF carries the envelope as issued, the same signed bytes as the JSON record
    from service.record.verify import pdf_attachments

    assert json.loads(pdf_attachments(pdf)["commissioning-record.json"]) == envelope
    # Through the API, without a token
    checked = client.post("/api/v1/records/verify", data=pdf, headers={"Content-Type": "application/pdf"})
    assert checked.status_code == 200
    assert checked.get_json()["ok"] is True and checked.get_json()["record_id"] == record_id
    # Stored when first rendered: served unchanged, and its digest is in the audit chain
    again = approver.get(records(record_id, ".pdf"))
    assert again.data == pdf and again.headers["ETag"] == response.headers["ETag"]
    (issued,) = events(app, approved["view"]["id"], "record.pdf_issued")
    assert issued.detail["pdf_digest"] == "sha256:" + hashlib.sha256(pdf).hexdigest()
    assert "PO-" not in pdftotext(pdf, tmp_path)  # no purchase order linked yet


def test_tampered_documents_verify_as_invalid_with_a_reason(client, approved):
    approver, record_id = approved["approver"], approved["record_id"]
    envelope = json.loads(approver.get(records(record_id)).data)

    # A changed verdict in the JSON record
    forged = {**envelope, "record": {**envelope["record"], "verdict": "pass" if envelope["record"]["verdict"] != "pass"
                                     else "fail"}}
    response = client.post("/api/v1/records/verify", json=forged)
    assert response.status_code == 200
    result = response.get_json()
    assert result["ok"] is False
    assert any("does not match signed digest" in reason for reason in result["reasons"])

    # One changed byte inside the signed range of a PDF
    pdf = bytearray(approver.get(records(record_id, ".pdf")).data)
    position = pdf.index(b"/Type /Page") + 1 if b"/Type /Page" in pdf else len(pdf) // 3
    pdf[position] ^= 0x01
    response = client.post("/api/v1/records/verify", data=bytes(pdf), headers={"Content-Type": "application/pdf"})
    assert response.status_code == 200
    assert response.get_json()["ok"] is False and response.get_json()["reasons"]


@pytest.mark.parametrize("body", [b"", b"not a record", b"\xff\xfe binary"])
def test_unreadable_input_to_verify_is_422(client, body):
    response = client.post("/api/v1/records/verify", data=body, headers={"Content-Type": "application/octet-stream"})
    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    assert response.get_json()["type"].endswith("/unreadable-document")


def test_verify_refuses_bodies_over_the_size_limit(make_app):
    client = make_app(MAX_CONTENT_LENGTH=1000).test_client()
    response = client.post("/api/v1/records/verify", data=b"{" + b" " * 2000 + b"}",
                           headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and response.mimetype == "application/problem+json"


def test_draft_pdf_of_an_unapproved_evaluation_says_draft_and_is_unsigned(client, submitted, tmp_path):
    submitter, view = submitted
    record_id = view["evaluation"]["record_id"]

    response = submitter.get(records(record_id, ".pdf"))

    assert response.status_code == 200 and response.mimetype == "application/pdf"
    assert response.headers["Record-Status"] == "draft" and response.headers["Cache-Control"] == "no-cache"
    assert "DRAFT" in response.headers["Content-Disposition"]
    assert "DRAFT" in pdftotext(response.data, tmp_path)
    result = verify_document(response.data, published_keys(client))
    assert not result.ok and any("no signature" in r or "DRAFT" in r for r in result.all_reasons())
    checked = client.post("/api/v1/records/verify", data=response.data, headers={"Content-Type": "application/pdf"})
    assert checked.status_code == 200 and checked.get_json()["ok"] is False


def test_a_draft_pdf_is_rendered_once_and_served_as_stored(app, submitted, monkeypatch):
    # Given a draft whose PDF a reader fetched once
    submitter, view = submitted
    record_id = view["evaluation"]["record_id"]
    first = submitter.get(records(record_id, ".pdf"))
    assert first.status_code == 200 and first.headers["ETag"] == '"' + hashlib.sha256(first.data).hexdigest() + '"'

    # When it is read again, with the renderer out of reach
    def refuse(record):
        raise AssertionError("the stored draft was rendered again")

    monkeypatch.setattr("service.approval.draft_pdfs.draft_pdf", refuse)
    again = submitter.get(records(record_id, ".pdf"))

    # Then the stored bytes come back, and the ETag revalidates
    assert again.status_code == 200 and again.data == first.data and again.headers["ETag"] == first.headers["ETag"]
    revalidated = submitter.get(records(record_id, ".pdf"), headers={"If-None-Match": first.headers["ETag"]})
    assert revalidated.status_code == 304


# --- purchase orders --------------------------------------------------------------------------------------

def test_linking_a_purchase_order_issues_a_new_signed_version(app, client, approved, tmp_path):
    approver, first_id = approved["approver"], approved["record_id"]
    first_body = approver.get(records(first_id)).data
    first = json.loads(first_body)
    submission_etag = approved["view"]["etag"]

    response = approver.post(f"/api/v1/records/{first_id}/purchase-orders", json=PO)

    assert response.status_code == 201, response.get_json()
    link = response.get_json()
    assert link["linked"] is True and link["issue"] == 2 and link["record_id"] != first_id
    assert link["supersedes"] == {"record_id": first_id, "digest": first["signature"]["record_digest"]}
    assert response.headers["Location"] == records(link["record_id"])
    # The new version is signed and lists the order, with who linked it
    trusted = published_keys(client)
    second = json.loads(approver.get(records(link["record_id"])).data)
    result = verify_record(second, trusted)
    assert result.ok, result.all_reasons()
    assert second["record"]["purchase_orders"] == [{**PO, "actor": approver.name, "role": "approver",
                                                    "linked_at": link["purchase_order"]["linked_at"]}]
    assert schemas.validate("record", second["record"]) == []
    # Everything else is the record that was approved; the audit anchor is taken anew, later in the chain
    unchanged = {k: v for k, v in second["record"].items() if k not in ("record_id", "issue", "supersedes",
                                                                        "purchase_orders", "audit_anchor")}
    assert unchanged == {k: v for k, v in first["record"].items() if k not in ("record_id", "issue",
                                                                               "purchase_orders", "audit_anchor")}
    assert second["record"]["audit_anchor"]["events"] > first["record"]["audit_anchor"]["events"]
    # The first version is kept, byte for byte, still verifies, and points to its successor
    old = approver.get(records(first_id))
    assert old.data == first_body and verify_record(json.loads(old.data), trusted).ok
    assert f'<{records(link["record_id"])}>; rel="latest-version"' in old.headers["Link"]
    assert 'rel="successor-version"' in old.headers["Link"]
    assert f'<{records(first_id)}>; rel="predecessor-version"' in approver.get(records(link["record_id"])).headers[
        "Link"]
    # The submission now points to the new version, under a new ETag
    view = approver.get(url(approved["view"]["id"])).get_json()
    assert view["final_record_id"] == link["record_id"] and view["etag"] != submission_etag
    # The signed PDF of the new version shows the order and verifies
    pdf = approver.get(records(link["record_id"], ".pdf")).data
    assert verify_document(pdf, trusted).ok
    assert PO["po_number"] in pdftotext(pdf, tmp_path)
    # Audited with actor, role, time and the digest of the record it issued; the chain holds
    (event,) = events(app, approved["view"]["id"], "purchase_order.linked")
    assert (event.actor, event.actor_role) == (approver.name, "approver")
    assert event.detail["record_digest"] == result.record_digest and event.detail["po_number"] == PO["po_number"]
    assert event.detail["supersedes"]["record_id"] == first_id
    assert chain_ok(app)


def test_linking_the_same_order_again_changes_nothing(app, approved):
    approver, first_id = approved["approver"], approved["record_id"]
    created = approver.post(f"/api/v1/records/{first_id}/purchase-orders", json=PO).get_json()

    # Again, on the version it was linked to, and on the first version
    for target in (created["record_id"], first_id):
        again = approver.post(f"/api/v1/records/{target}/purchase-orders", json=PO)
        assert again.status_code == 200
        assert again.get_json()["linked"] is False and again.get_json()["record_id"] == created["record_id"]
    assert len(events(app, approved["view"]["id"], "purchase_order.linked")) == 1

    # Another system's order with the same number is another link: a third version lists both
    other = approver.post(f"/api/v1/records/{first_id}/purchase-orders", json={**PO, "system": "Coupa"})
    assert other.status_code == 201 and other.get_json()["issue"] == 3
    assert other.get_json()["supersedes"]["record_id"] == created["record_id"]
    assert [po["system"] for po in other.get_json()["purchase_orders"]] == [PO["system"], "Coupa"]


def test_concurrent_links_extend_one_chain(app, approved, as_role):
    record_id = approved["record_id"]
    callers = [approved["approver"], as_role("admin")]
    start = threading.Barrier(len(callers))
    statuses: list[int] = []

    def link(caller: Caller, number: str) -> None:
        start.wait()
        statuses.append(caller.post(f"/api/v1/records/{record_id}/purchase-orders",
                                    json={"po_number": number, "system": "SAP"}).status_code)

    threads = [threading.Thread(target=link, args=(caller, f"PO-{i}")) for i, caller in enumerate(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert statuses == [201, 201]
    latest = approved["approver"].get(url(approved["view"]["id"])).get_json()["final_record_id"]
    record = json.loads(approved["approver"].get(records(latest)).data)["record"]
    assert record["issue"] == 3
    assert sorted(po["po_number"] for po in record["purchase_orders"]) == ["PO-0", "PO-1"]
    assert chain_ok(app)


def test_purchase_orders_need_an_approved_record(as_role, submitted):
    _, view = submitted
    approver = as_role("approver")

    evaluation = approver.post(f"/api/v1/records/{view['evaluation']['record_id']}/purchase-orders", json=PO)
    assert evaluation.status_code == 409 and evaluation.mimetype == "application/problem+json"
    assert "approved records only" in evaluation.get_json()["detail"]

    rejected = approver.post(url(view["id"], "decisions"), json={"action": "reject"}, if_match=view["etag"])
    assert rejected.status_code == 201
    final_id = rejected.get_json()["final_record_id"]
    assert approver.get(records(final_id)).headers["Record-Status"] == "draft"
    assert approver.post(f"/api/v1/records/{final_id}/purchase-orders", json=PO).status_code == 409
    assert approver.post("/api/v1/records/nope/purchase-orders", json=PO).status_code == 404


def test_only_approvers_and_admins_link_purchase_orders(client, as_role, approved):
    path = f"/api/v1/records/{approved['record_id']}/purchase-orders"
    for role in ("submitter", "reviewer"):
        response = as_role(role).post(path, json=PO)
        assert response.status_code == 403, role
        assert "link purchase orders" in response.get_json()["detail"]
    assert client.post(path, json=PO).status_code == 401
    assert as_role("admin").post(path, json=PO).status_code == 201


@pytest.mark.parametrize("body, pointer", [
    ({"po_number": "PO 42", "system": "SAP"}, "/po_number"),
    ({"po_number": "P" * 65, "system": "SAP"}, "/po_number"),
    ({"po_number": "PO-42\n", "system": "SAP"}, "/po_number"),
    ({"po_number": "", "system": "SAP"}, "/po_number"),
    ({"po_number": "PO-42", "system": "S" * 65}, "/system"),
    ({"po_number": "PO-42", "system": " SAP"}, "/system"),
    ({"po_number": "PO-42", "system": "SAP\u0007"}, "/system"),
    ({"po_number": "PO-42"}, "/system"),
    ({"po_number": "PO-42", "system": "SAP", "amount": 1}, "/amount"),
])
def test_purchase_order_fields_are_validated(approved, body, pointer):
    response = approved["approver"].post(f"/api/v1/records/{approved['record_id']}/purchase-orders", json=body)
    assert response.status_code == 422, response.get_json()
    assert pointer in [e["pointer"] for e in response.get_json()["errors"]]


def test_the_records_routes_are_documented(client):
    paths = client.get("/api/v1/openapi.json").get_json()["paths"]
    assert paths["/api/v1/keys"]["get"]["security"] == []
    verify = paths["/api/v1/records/verify"]["post"]
    assert verify["security"] == [] and {"application/json", "application/pdf"} <= set(
        verify["requestBody"]["content"])
    link = paths["/api/v1/records/{record_id}/purchase-orders"]["post"]
    assert link["x-roles"] == ["admin", "approver"] and {"201", "200", "403", "409", "422"} <= set(link["responses"])
    pdf = paths["/api/v1/records/{record_id}.pdf"]["get"]["responses"]["200"]
    assert "application/pdf" in pdf["content"] and "Record-Status" in pdf["headers"]

"""A record the service signs against a real PKI is PAdES B-LTA as the user downloads it over HTTP.

The service is configured with a certificate issued by the loopback PKI (Certomancer: CA, OCSP, CRL and TSA on
127.0.0.1) and its TSA. The record is approved through the API, downloaded (GET …json and …pdf), saved, and
verified as a user does: `quotecheck verify FILE --key <the PKI's root>`, offline.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from api_support import Caller, url, waive_all
from click.testing import CliRunner
from flask import Flask

from service.cli import main

pytest.importorskip("certomancer", reason="certomancer (a dev dependency) serves the test PKI; pip install -e '.[dev]'")

from service.record.loopback_pki import LoopbackPki  # noqa: E402  (needs certomancer)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackPki]:
    with LoopbackPki(tmp_path_factory.mktemp("pki")) as served:
        yield served


@pytest.fixture
def lta_app(make_app: Callable[..., Flask], pki: LoopbackPki) -> Flask:
    return make_app(**pki.settings())


def _approved_record(app: Flask, submission: dict[str, Any]) -> tuple[Caller, str]:
    from api_support import caller_for

    response = caller_for(app, "submitter").post("/api/v1/submissions", json=submission)
    assert response.status_code == 201, response.get_json()
    view = waive_all(caller_for(app, "reviewer"), response.get_json())
    approver = caller_for(app, "approver")
    response = approver.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])
    assert response.status_code == 201, response.get_json()
    return approver, response.get_json()["final_record_id"]


def _submission_of(app: Flask, record_id: str) -> str:
    from service.persistence.db import get_db
    from service.persistence.models import Record

    with app.app_context(), get_db(app).session() as session:
        return session.get(Record, record_id).submission_id


def _verify(path: Path, root: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["verify", str(path), "--key", str(root), "--format", "json"])
    return result.exit_code, result.output


def test_a_downloaded_record_verifies_as_b_lta_pdf_and_timestamped_json_with_the_pki_root_only(
        lta_app: Flask, pki: LoopbackPki, submission_document: dict[str, Any], tmp_path: Path) -> None:
    # Given a record approved through the API of a service that signs against the PKI
    approver, record_id = _approved_record(lta_app, submission_document)

    # When the approver downloads it and saves both files
    pdf_response = approver.get(f"/api/v1/records/{record_id}.pdf")
    json_response = approver.get(f"/api/v1/records/{record_id}.json")
    assert pdf_response.status_code == json_response.status_code == 200
    (tmp_path / "record.pdf").write_bytes(pdf_response.data)
    (tmp_path / "record.json").write_bytes(json_response.data)

    # Then `quotecheck verify` with the root alone finds B-LTA and the TSA's time in the PDF, B-T in the JSON
    pdf_code, pdf_out = _verify(tmp_path / "record.pdf", pki.root_cert_file)
    json_code, json_out = _verify(tmp_path / "record.json", pki.root_cert_file)
    pdf_report, json_report = json.loads(pdf_out), json.loads(json_out)
    assert pdf_code == 0 and pdf_report["ok"], pdf_report["reasons"]
    assert pdf_report["level"] == "B-LTA" and pdf_report["signing_time"]
    assert json_code == 0 and json_report["ok"], json_report["reasons"]
    assert json_report["level"] == "B-T" and json_report["signing_time"]
    assert json_report["signing_time"] <= pdf_report["signing_time"]  # the envelope is signed at approval, first
    envelope = json.loads(json_response.data)
    assert pdf_report["record_digest"] == envelope["signature"]["record_digest"]


def test_the_published_keys_give_the_root_that_verifies_a_downloaded_lta_record(
        lta_app: Flask, pki: LoopbackPki, submission_document: dict[str, Any], tmp_path: Path) -> None:
    # Given a record approved through the API of a service that signs against the PKI, downloaded as a PDF
    approver, record_id = _approved_record(lta_app, submission_document)
    (tmp_path / "record.pdf").write_bytes(approver.get(f"/api/v1/records/{record_id}.pdf").data)

    # When a verifier reads the service's published keys (no token) as an ordinary JSON reader does
    published = json.loads(lta_app.test_client().get("/api/v1/keys").get_data(as_text=True))
    [key] = published["keys"]

    # Then they give the signer's chain up to the PKI's root and the TSA's root
    assert key["chain_pem"][-1].strip() == pki.root_cert_file.read_text().strip()
    assert key["tsa_trust_roots_pem"]
    # and the chain's last certificate, saved and passed to `quotecheck verify`, verifies the PDF as B-LTA
    (tmp_path / "root.pem").write_text(key["chain_pem"][-1])
    code, output = _verify(tmp_path / "record.pdf", tmp_path / "root.pem")
    report = json.loads(output)
    assert code == 0 and report["ok"] and report["level"] == "B-LTA", report["reasons"]


def test_the_text_report_names_the_level_and_the_tsas_signing_time(
        lta_app: Flask, pki: LoopbackPki, submission_document: dict[str, Any], tmp_path: Path) -> None:
    approver, record_id = _approved_record(lta_app, submission_document)
    (tmp_path / "record.pdf").write_bytes(approver.get(f"/api/v1/records/{record_id}.pdf").data)

    result = CliRunner().invoke(main, ["verify", str(tmp_path / "record.pdf"), "--key", str(pki.root_cert_file)])

    assert result.exit_code == 0, result.output
    assert "  level B-LTA, signing time 20" in result.output and "(the TSA's timestamp)" in result.output


def test_the_services_verify_endpoint_reports_the_level_of_its_own_lta_pdf(
        lta_app: Flask, submission_document: dict[str, Any]) -> None:
    approver, record_id = _approved_record(lta_app, submission_document)
    pdf = approver.get(f"/api/v1/records/{record_id}.pdf").data

    report = lta_app.test_client().post("/api/v1/records/verify", data=pdf,
                                        headers={"Content-Type": "application/pdf"}).get_json()

    assert report["ok"], report["reasons"]
    assert report["level"] == "B-LTA" and report["signing_time"]


# --- the audit chain's head, timestamped by the TSA ------------------------------------------------------------

def _audit(app: Flask, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["audit", *args], obj={"app": app})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def _cut_tail_and_fix_head(app: Flask, keep: int) -> None:
    """Deletes every event after ``keep`` and sets the head row to match: the chain's links alone all hold."""
    from sqlalchemy import text

    from service.persistence.db import get_db

    with get_db(app).engine.begin() as connection:
        connection.execute(text("DELETE FROM audit_event WHERE id > :keep"), {"keep": keep})
        last = connection.execute(text("SELECT hash FROM audit_event WHERE id = :keep"), {"keep": keep}).scalar_one()
        connection.execute(text("UPDATE audit_chain_head SET length = :keep, last_hash = :last WHERE id = 1"),
                           {"keep": keep, "last": last})


def _chain_length(app: Flask) -> int:
    from service.persistence import audit
    from service.persistence.db import get_db

    with get_db(app).session() as session:
        return audit.count(session)


def test_deleting_the_last_events_after_a_decision_is_found_and_the_missing_range_named(
        lta_app: Flask, submission_document: dict[str, Any]) -> None:
    # Given an approval, whose decision had the TSA timestamp the chain's head, and nothing issued since
    _approved_record(lta_app, submission_document)
    events = _chain_length(lta_app)
    code, output = _audit(lta_app, "verify")
    assert code == 0 and f"head timestamps OK: 1; the latest: the TSA timestamped the head at event {events}" \
        in output, output

    # When someone deletes the last three events (the decision among them) and rewrites the head row to match
    _cut_tail_and_fix_head(lta_app, events - 3)

    # Then the chain's links still hold, but audit verify exits 1 naming the events that are missing
    code, output = _audit(lta_app, "verify")
    assert code == 1, output
    assert output.startswith(f"audit chain OK: {events - 3} events")
    assert f"events {events - 2}–{events} are missing: the TSA timestamped the chain's head at " in output, output


def test_a_scheduled_head_timestamp_covers_the_events_after_the_last_decision(
        lta_app: Flask, submission_document: dict[str, Any]) -> None:
    approver, record_id = _approved_record(lta_app, submission_document)
    assert approver.get(f"/api/v1/records/{record_id}.pdf").status_code == 200  # record.pdf_issued, after the decision
    events = _chain_length(lta_app)

    code, output = _audit(lta_app, "timestamp")
    assert code == 0 and f"head timestamped: event {events}" in output, output
    _cut_tail_and_fix_head(lta_app, events - 1)

    code, output = _audit(lta_app, "verify")
    assert code == 1 and f"event {events} is missing: the TSA timestamped" in output, output


def test_an_altered_head_timestamp_token_is_reported(lta_app: Flask, submission_document: dict[str, Any]) -> None:
    from sqlalchemy import text

    from service.persistence.db import get_db

    _approved_record(lta_app, submission_document)
    with get_db(lta_app).engine.begin() as connection:
        token = bytearray(connection.execute(text("SELECT token FROM audit_head_timestamp")).scalar_one())
        token[len(token) // 2] ^= 0x01
        connection.execute(text("UPDATE audit_head_timestamp SET token = :t"), {"t": bytes(token)})

    code, output = _audit(lta_app, "verify")

    assert code == 1 and "(decision, " in output and "does not verify" in output, output


def test_the_lta_demo_writes_a_record_that_verifies_as_b_lta_with_the_root_it_writes(tmp_path: Path) -> None:
    from service.cli import demo_lta

    assert demo_lta.main(["--out", str(tmp_path / "out")]) == 0

    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["pki-root.cert.pem", "record-lta.json", "record-lta.pdf"]
    code, output = _verify(out / "record-lta.pdf", out / "pki-root.cert.pem")
    report = json.loads(output)
    assert code == 0 and report["ok"] and report["level"] == "B-LTA" and report["signing_time"], output
    code, output = _verify(out / "record-lta.json", out / "pki-root.cert.pem")
    assert code == 0 and json.loads(output)["level"] == "B-T", output


# --- as-built addenda: a signed PDF too, anchored in the audit chain ---------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dgx-h100-70b-finetune.json"
MEASUREMENTS: dict[str, Any] = {"storage": {"write_gbs": 25, "read_gbs": 60},
                                "power": {"sustained_w_per_node": 9000}}


def test_an_addendum_made_over_http_verifies_as_json_and_as_pdf_and_audit_verify_finds_its_anchor(
        lta_app: Flask, pki: LoopbackPki, tmp_path: Path) -> None:
    from api_support import caller_for

    # Given the example quote approved, and a reviewer who attaches acceptance measurements over HTTP
    _, record_id = _approved_record(lta_app, json.loads(EXAMPLE.read_text(encoding="utf-8")))
    reviewer = caller_for(lta_app, "reviewer")
    attached = reviewer.post(f"/api/v1/records/{record_id}/addenda", json={"measurements": MEASUREMENTS})
    assert attached.status_code == 201, attached.get_json()
    addendum_id = attached.get_json()["record"]["addendum_id"]

    # When the reviewer downloads it as JSON and as PDF (twice: the PDF is stored once and served unchanged)
    base = f"/api/v1/records/{record_id}/addenda/{addendum_id}"
    (tmp_path / "addendum.json").write_bytes(reviewer.get(base).data)
    first, again = reviewer.get(base + ".pdf"), reviewer.get(base + ".pdf")
    assert first.status_code == 200 and first.mimetype == "application/pdf" and again.data == first.data
    (tmp_path / "addendum.pdf").write_bytes(first.data)

    # Then both verify with the PKI's root alone, the PDF as B-LTA holding the addendum
    for name, level in (("addendum.json", "B-T"), ("addendum.pdf", "B-LTA")):
        code, output = _verify(tmp_path / name, pki.root_cert_file)
        report = json.loads(output)
        assert code == 0 and report["ok"], (name, report["reasons"])
        assert report["level"] == level and report["addendum_of"]["record_id"] == record_id
    # and `audit verify --against` finds the anchor the addendum carries, from either file
    for name in ("addendum.json", "addendum.pdf"):
        code, output = _audit(lta_app, "verify", "--against", str(tmp_path / name), "--key", str(pki.root_cert_file))
        assert code == 0, output
        assert f"issued record {addendum_id}" in output and "(addendum.issued, " in output, output
    # and the PDF's first issue is in the audit trail once, with the digest of the bytes served
    trail = reviewer.get(f"/api/v1/submissions/{_submission_of(lta_app, record_id)}/audit").get_json()
    issued = [e for e in trail["events"] if e["action"] == "addendum.pdf_issued"]
    assert len(issued) == 1 and issued[0]["detail"]["addendum_id"] == addendum_id
    assert issued[0]["detail"]["pdf_digest"] == "sha256:" + hashlib.sha256(first.data).hexdigest()


def test_records_retimestamp_adds_a_document_timestamp_to_every_stored_pdf_which_still_verifies(
        lta_app: Flask, pki: LoopbackPki, submission_document: dict[str, Any], tmp_path: Path) -> None:
    from pyhanko.pdf_utils.reader import PdfFileReader

    # Given a signed record PDF the service stored on its first download
    approver, record_id = _approved_record(lta_app, submission_document)
    first = approver.get(f"/api/v1/records/{record_id}.pdf")

    # When the TSA timestamps the stored PDFs anew
    result = CliRunner().invoke(main, ["records", "retimestamp"], obj={"app": lta_app})

    # Then the served PDF is the old one plus a document timestamp, still B-LTA with the same signing time
    assert result.exit_code == 0 and "1 of 1 stored signed PDFs timestamped anew" in result.output, result.output
    renewed = approver.get(f"/api/v1/records/{record_id}.pdf")
    assert renewed.data.startswith(first.data) and renewed.headers["ETag"] != first.headers["ETag"]
    types = [str(s.sig_object_type) for s in PdfFileReader(BytesIO(renewed.data)).embedded_signatures]
    assert types == ["/Sig", "/DocTimeStamp", "/DocTimeStamp"]
    (tmp_path / "before.pdf").write_bytes(first.data)
    (tmp_path / "after.pdf").write_bytes(renewed.data)
    before = json.loads(_verify(tmp_path / "before.pdf", pki.root_cert_file)[1])
    code, output = _verify(tmp_path / "after.pdf", pki.root_cert_file)
    after = json.loads(output)
    assert code == 0 and after["ok"] and after["level"] == "B-LTA", after["reasons"]
    assert after["signing_time"] == before["signing_time"]
    # and the replacement is in the audit log with both digests, and the chain holds
    from sqlalchemy import text

    from service.persistence.db import get_db

    with get_db(lta_app).engine.connect() as connection:
        detail = connection.execute(text("SELECT detail FROM audit_event WHERE action = 'record.pdf_retimestamped'")
                                    ).scalar_one()
    detail = json.loads(detail) if isinstance(detail, str) else detail
    assert detail["pdf_digest"] == "sha256:" + renewed.headers["ETag"].strip('"')
    assert _audit(lta_app, "verify")[0] == 0

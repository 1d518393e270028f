"""The signed record procurement receives carries the layout search: the best layout beside the submitted one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from api_support import url, waive_all

import schemas
from rules.advice.search import search_submission
from service.record import TrustedKeys, verify_record

ROOT = Path(__file__).parent.parent.parent
EXAMPLE = ROOT / "examples" / "fail-70b-ddp-one-rack.json"


def _approved(as_role, document):
    submitter, approver = as_role("submitter"), as_role("approver")
    created = submitter.post("/api/v1/submissions", json=document)
    assert created.status_code == 201, created.get_json()
    view = waive_all(as_role("reviewer"), created.get_json())
    decided = approver.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])
    assert decided.status_code == 201, decided.get_json()
    return approver, created.get_json(), decided.get_json()["final_record_id"]


def test_the_approved_record_reports_the_best_layout_and_the_checks_at_it(client, as_role, tmp_path):
    # Given the bundled 70B example approved over HTTP, its signed record downloaded and read back as JSON
    document = json.loads(EXAMPLE.read_text())
    approver, created, record_id = _approved(as_role, document)
    envelope = json.loads(approver.get(f"/api/v1/records/{record_id}.json").data)
    pem = "".join(key["certificate_pem"] for key in client.get("/api/v1/keys").get_json()["keys"])
    assert verify_record(envelope, TrustedKeys.from_pem(pem.encode(), "GET /api/v1/keys")).ok
    record = envelope["record"]
    assert schemas.validate("record", record) == []

    # Then it holds the search of the quoted GPUs, the same one `quotecheck search` finds
    section = record["layout_search"]
    searched = search_submission(document)
    assert section["best"] == searched["best"] and section["submitted"] == searched["submitted"]
    assert section["layouts_searched"] == searched["layouts_searched"] > 1000
    assert section["submitted_vs_best"].startswith("the submitted layout is ")
    # and the layout-dependent checks at the best layout: the submitted DDP does not fit, the best one does
    rows = {row["id"]: row for row in section["checks"]}
    assert set(rows) == {"peak-memory", "sharding", "gradient-accumulation", "time-to-result"}
    assert rows["peak-memory"]["submitted"]["status"] == "fail"
    assert rows["peak-memory"]["best"]["status"] in ("pass", "warn")  # it fits (a warning: with little headroom)
    assert section["patch"]["workload"]["training"]["parallelism"]["sharding"] == section["best"]["sharding"]
    # while the checks themselves are the evaluation's, so the waivers bound to their digests still hold
    evaluation = json.loads(approver.get(f"/api/v1/records/{created['evaluation']['record_id']}.json").data)
    assert "layout_search" not in evaluation
    assert [c["evidence"] for c in record["checks"]] == [c["evidence"] for c in evaluation["checks"]]


def test_the_signed_pdf_shows_the_layout_search(as_role, tmp_path):
    approver, _, record_id = _approved(as_role, json.loads(EXAMPLE.read_text()))
    pdf = tmp_path / "record.pdf"
    pdf.write_bytes(approver.get(f"/api/v1/records/{record_id}.pdf").data)

    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout

    assert "Layout search" in text and "slower than the best that fits" in " ".join(text.split())
    assert "Best that fits" in text and "At the best layout the verdict is" in text

"""Cited defaults over HTTP: a buyer's first quote posted to the API is evaluated with every check decided, and the
record it serves (the draft, then the signed record once approved, verified with the published key) lists the
policy's defaults with their pointers and citations and each check's assumptions name them (tests/test_defaults.py:
the evaluation and the command line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from api_support import url

import schemas
from service.record import TrustedKeys, verify_record

FIRST_QUOTE = Path(__file__).resolve().parents[2] / "examples" / "hgx-h200-8b-first-quote.json"
MTBF = "/workload/training/reliability/node_mtbf_h"
DATALOADER = ("/workload/training/dataloader/workers_per_gpu", "/workload/training/dataloader/worker_rss_gib",
              "/workload/training/dataloader/pinned_gib_per_gpu")


def published_keys(client: Any) -> TrustedKeys:
    """Returns the trust roots an outsider takes from GET /api/v1/keys (no token)."""
    pem = "".join(key["certificate_pem"] for key in client.get("/api/v1/keys").get_json()["keys"])
    return TrustedKeys.from_pem(pem.encode(), "GET /api/v1/keys")


def test_a_first_quote_posted_is_decided_on_the_policy_defaults_and_its_signed_record_lists_them(client, as_role):
    # Given a buyer's first quote: no reliability, data, dataloader or racks
    submitter = as_role("submitter")

    # When it is posted
    response = submitter.post("/api/v1/submissions", json=json.loads(FIRST_QUOTE.read_text()))

    # then every check is decided, and the checks that read a default say so in their assumptions
    assert response.status_code == 201, response.get_json()
    view = response.get_json()
    checks = {check["id"]: check for check in view["evaluation"]["checks"]}
    assert [c for c, check in checks.items() if check["status"] == "insufficient-data"] == []
    assert view["evaluation"]["verdict"] in ("pass", "warn", "fail")
    restart = {a["pointer"]: a for a in checks["restart-behavior"]["assumptions"]}
    assert restart[MTBF]["value"] == 6334.6 and restart[MTBF]["source"] == "default"
    assert "arXiv 2407.21783" in restart[MTBF]["ref"]
    assert set(DATALOADER) <= {a["pointer"] for a in checks["host-ram"]["assumptions"]}
    assert checks["rack-power"]["status"] == "warn" and "no nodes in racks" in checks["rack-power"]["message"]

    # and the record served, read back as plain JSON, lists the defaults with their pointers and citations
    draft = json.loads(submitter.get(f"/api/v1/records/{view['evaluation']['record_id']}.json").data)
    fills = {fill["pointer"]: fill for fill in draft["default_fills"]}
    assert fills[MTBF]["value"] == 6334.6 and "2,048 nodes × 54 days × 24 h / 419" in fills[MTBF]["ref"]
    assert set(DATALOADER) <= set(fills) and {fill["source"] for fill in fills.values()} == {"default"}
    assert schemas.validate("record", draft) == []

    # When an approver approves it (nothing blocks: the quote only warns), the signed record keeps them and
    # verifies with the key published at GET /api/v1/keys
    approver = as_role("approver")
    decided = approver.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])
    assert decided.status_code == 201, decided.get_json()
    envelope = json.loads(approver.get(f"/api/v1/records/{decided.get_json()['final_record_id']}.json").data)
    result = verify_record(envelope, published_keys(client))
    assert result.ok, result.all_reasons()
    assert envelope["record"]["default_fills"] == draft["default_fills"]

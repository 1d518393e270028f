"""Approval as verification reports it: records the service approved say nothing of NOT APPROVED; others do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from api_support import url, waive_all

from service.record import SigningKeys, sign_record

ROOT = Path(__file__).parent.parent.parent


def quotecheck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "service.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_a_record_approved_through_the_api_verifies_without_a_not_approved_line(client, as_role, submitted,
                                                                                 tmp_path):
    # Given a quote approved over HTTP, its signed JSON and PDF saved as downloaded
    _, view = submitted
    view = waive_all(as_role("reviewer"), view)
    approver = as_role("approver")
    decided = approver.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])
    assert decided.status_code == 201, decided.get_json()
    record_id = decided.get_json()["final_record_id"]
    for suffix in (".json", ".pdf"):
        (tmp_path / f"record{suffix}").write_bytes(approver.get(f"/api/v1/records/{record_id}{suffix}").data)
    (tmp_path / "service.cert.pem").write_text(client.get("/api/v1/keys").get_json()["keys"][0]["certificate_pem"])

    for name in ("record.json", "record.pdf"):
        # When it is verified offline, Then the first line is VALID and approval is not questioned
        result = quotecheck("verify", name, "--key", "service.cert.pem", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.startswith(f"VALID  {name}") and "NOT APPROVED" not in result.stdout
        # and the endpoint says approved: true
        checked = client.post("/api/v1/records/verify", data=(tmp_path / name).read_bytes())
        assert checked.status_code == 200 and checked.get_json()["approved"] is True
        assert checked.get_json()["ok"] is True


def test_the_endpoint_reports_an_evaluation_signed_outside_the_workflow_as_not_approved(app, client, submitted,
                                                                                        tmp_path):
    submitter, view = submitted
    evaluation = json.loads(submitter.get(f"/api/v1/records/{view['evaluation']['record_id']}.json").data)
    # The service's own key, as `quotecheck sign --instance` on the server would use it
    keys = SigningKeys.load_or_create(tmp_path / "instance")
    envelope = sign_record(evaluation, keys)

    checked = client.post("/api/v1/records/verify", json=envelope)

    assert checked.status_code == 200
    assert checked.get_json()["ok"] is True and checked.get_json()["approved"] is False


def test_the_bundled_fail_example_approved_over_http_verifies_with_the_cli_and_the_endpoint(client, as_role,
                                                                                           tmp_path):
    # Given the bundled failing example, submitted over HTTP
    document = json.loads((ROOT / "examples" / "fail-70b-ddp-one-rack.json").read_text())
    submitter, reviewer, approver = as_role("submitter"), as_role("reviewer"), as_role("approver")
    created = submitter.post("/api/v1/submissions", json=document)
    assert created.status_code == 201, created.get_json()
    view = created.get_json()
    # When a reviewer waives rack-power, the vendor revises the sharding to fsdp-full and an approver approves
    waived = reviewer.post(url(view["id"], "checks", "rack-power", "waivers"),
                           json={"justification": "The facility adds a third 17.3 kW feed before delivery."},
                           if_match=view["etag"])
    assert waived.status_code == 201, waived.get_json()
    document["workload"]["training"]["parallelism"]["sharding"] = "fsdp-full"
    revised = submitter.post(url(view["id"], "revisions"), json=document, if_match=waived.get_json()["etag"])
    assert revised.status_code == 201, revised.get_json()
    failing = {c["id"] for c in revised.get_json()["evaluation"]["checks"] if c["effective_status"] == "fail"}
    assert not failing, failing
    decided = approver.post(url(view["id"], "decisions"), json={"action": "approve"},
                            if_match=revised.get_json()["etag"])
    assert decided.status_code == 201, decided.get_json()
    record_id = decided.get_json()["final_record_id"]
    # and the signed record is fetched as JSON and PDF, and the certificate from /api/v1/keys
    for suffix in (".json", ".pdf"):
        fetched = approver.get(f"/api/v1/records/{record_id}{suffix}")
        assert fetched.status_code == 200 and fetched.headers["Record-Status"] == "signed"
        (tmp_path / f"record{suffix}").write_bytes(fetched.data)
    (tmp_path / "service.cert.pem").write_text(client.get("/api/v1/keys").get_json()["keys"][0]["certificate_pem"])
    # its evidence holds numbers beyond 2^53 (hardware FLOPs), which Python's json reads back as integers
    evidence = json.loads((tmp_path / "record.json").read_bytes())["record"]["checks"]
    assert any(isinstance(v, int) and v > 2**53 for c in evidence for v in c["evidence"].values()
               if not isinstance(v, bool))

    for name in ("record.json", "record.pdf"):
        # Then the CLI calls both valid, without a traceback
        result = quotecheck("verify", name, "--key", "service.cert.pem", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.startswith(f"VALID  {name}") and "Traceback" not in result.stderr
        # and so does the endpoint
        checked = client.post("/api/v1/records/verify", data=(tmp_path / name).read_bytes())
        assert checked.status_code == 200, checked.get_json()
        assert checked.get_json()["ok"] is True and checked.get_json()["approved"] is True

"""As-built addenda over HTTP: measurements attached to an approved record, signed, verifiable, never changing it."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from api_support import Caller, token_for, url
from click.testing import CliRunner
from sqlalchemy import func, select

import schemas
from service.persistence import audit
from service.persistence.db import get_db
from service.persistence.models import Addendum, CalibrationPoint, Record
from service.record import TrustedKeys, record_digest, verify_record
from service.record.cli import verify as verify_command

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dgx-h100-70b-finetune.json"
# Acceptance tests of the example's 16 DGX H100 nodes: storage slower than quoted, sustained power under the
# nameplate, 800 tokens/s per GPU on one node and 700 at the job's 128 GPUs (scaling efficiency 0.875).
MEASUREMENTS: dict[str, Any] = {
    "storage": {"write_gbs": 25, "read_gbs": 60},
    "power": {"sustained_w_per_node": 9000},
    "scaling": [{"gpus": 8, "tokens_per_s": 6400}, {"gpus": 128, "tokens_per_s": 89600}],
}


def addenda_url(record_id: str, *parts: str) -> str:
    return "/".join([f"/api/v1/records/{record_id}/addenda", *parts])


def published_keys(client: Any) -> TrustedKeys:
    pem = "".join(key["certificate_pem"] for key in client.get("/api/v1/keys").get_json()["keys"])
    return TrustedKeys.from_pem(pem.encode(), "GET /api/v1/keys")


@pytest.fixture
def approved(as_role) -> dict[str, Any]:
    """The example quote (every check passes), submitted and approved: its final record and the callers."""
    submitter = as_role("submitter")
    created = submitter.post("/api/v1/submissions", json=json.loads(EXAMPLE.read_text(encoding="utf-8")))
    assert created.status_code == 201, created.get_json()
    view = created.get_json()
    decided = as_role("approver").post(url(view["id"], "decisions"), json={"action": "approve"},
                                       if_match=view["etag"])
    assert decided.status_code == 201, decided.get_json()
    return {"submitter": submitter, "reviewer": as_role("reviewer"), "view": view,
            "record_id": decided.get_json()["final_record_id"]}


def attach(caller: Caller, record_id: str, measurements: dict[str, Any] | None = None, **extra: Any) -> Any:
    return caller.post(addenda_url(record_id), json={"measurements": measurements or MEASUREMENTS, **extra})


def test_an_addendum_served_over_http_and_read_back_by_json_verifies(app, client, approved, tmp_path):
    # Given an approved record, When a reviewer attaches the acceptance measurements
    reviewer, record_id = approved["reviewer"], approved["record_id"]
    response = attach(reviewer, record_id, note="acceptance tests, hall B, week 49")
    assert response.status_code == 201, response.get_json()
    assert response.headers["Record-Status"] == "signed" and response.headers["Location"].endswith(
        "/addenda/" + response.get_json()["record"]["addendum_id"])

    # Then the stored addendum is served byte for byte, and read back by an ordinary JSON reader it verifies
    served = reviewer.get(response.headers["Location"])
    assert served.status_code == 200 and served.data == response.data
    assert served.headers["ETag"] == '"' + hashlib.sha256(served.data).hexdigest() + '"'
    assert reviewer.get(response.headers["Location"], headers={"If-None-Match": served.headers["ETag"]}
                        ).status_code == 304
    envelope = json.loads(served.data)
    result = verify_record(envelope, published_keys(client))
    assert result.ok, result.all_reasons()
    assert schemas.validate("addendum", envelope["record"]) == []
    # through the endpoint, which names the record it belongs to
    checked = client.post("/api/v1/records/verify", data=json.dumps(envelope))
    assert checked.get_json()["ok"] is True and checked.get_json()["approved"] is None
    assert checked.get_json()["addendum_of"] == {"record_id": record_id,
                                                 "digest": envelope["record"]["record"]["digest"]}
    # and offline with `quotecheck verify`, from a file re-written by json.dumps
    (tmp_path / "addendum.json").write_text(json.dumps(envelope, indent=1), encoding="utf-8")
    (tmp_path / "cert.pem").write_text(client.get("/api/v1/keys").get_json()["keys"][0]["certificate_pem"])
    verified = CliRunner().invoke(verify_command, [str(tmp_path / "addendum.json"),
                                                   "--key", str(tmp_path / "cert.pem")])
    assert verified.exit_code == 0, verified.output
    assert verified.output.startswith(f"AS-BUILT ADDENDUM of record {record_id}")
    assert "NOT APPROVED" not in verified.output and "VALID" in verified.output
    # the addendum without its envelope verifies as unsigned
    bare = client.post("/api/v1/records/verify", data=json.dumps(envelope["record"])).get_json()
    assert bare["ok"] is False and "unsigned as-built addendum" in bare["reasons"][0]
    # a changed figure breaks it
    envelope["record"]["estimates"][0]["measured"] = 999.0
    assert not verify_record(envelope, published_keys(client)).ok


def test_the_addendum_re_decides_each_check_beside_the_record(approved):
    reviewer, record_id = approved["reviewer"], approved["record_id"]
    record = json.loads(reviewer.get(f"/api/v1/records/{record_id}.json").data)["record"]

    addendum = json.loads(attach(reviewer, record_id).data)["record"]

    assert addendum["kind"] == "as-built" and addendum["record"]["record_id"] == record_id
    assert addendum["record"]["digest"] == record_digest(record)
    assert addendum["same_engine_and_policy"] is True and addendum["record"]["verdict"] == "pass"
    assert addendum["verdict"] == "warn"
    assert addendum["changes"] == [{"check_id": "interconnect-scaling", "from": "pass", "to": "warn"}]
    assert {"checkpoint-bandwidth", "data-feed", "rack-power", "interconnect-scaling"} <= set(
        addendum["measured_checks"])
    assert [c["id"] for c in addendum["checks"]] == [c["id"] for c in record["checks"]]
    by_estimator = {p["estimator"]: p for p in addendum["estimates"]}
    assert by_estimator["checkpoint-bandwidth write_gbs"]["estimated"] == pytest.approx(32.0)
    assert by_estimator["checkpoint-bandwidth write_gbs"]["measured"] == 25
    assert by_estimator["rack-power site_kw"]["measured"] == pytest.approx(144.0)
    assert by_estimator["interconnect-scaling efficiency"]["measured"] == pytest.approx(0.875)
    scaling = next(c for c in addendum["checks"] if c["id"] == "interconnect-scaling")
    assert scaling["original"]["status"] == "pass" and scaling["as_built"]["status"] == "warn"
    assert scaling["as_built"]["figures"]["efficiency"] == pytest.approx(0.875)
    assert addendum["submission"]["digest"] == record["submission"]["digest"] != addendum["submission"][
        "as_built_digest"]


def stored_record(app: Any, record_id: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    with get_db(app).session() as session:
        row = session.get(Record, record_id)
        return row.digest, row.document, row.envelope


def test_the_original_record_is_unchanged_by_an_addendum(app, client, approved):
    # Given the approved record as served and as stored
    reviewer, record_id = approved["reviewer"], approved["record_id"]
    before = reviewer.get(f"/api/v1/records/{record_id}.json")
    stored_before = stored_record(app, record_id)

    # When an addendum is attached to it
    addendum = json.loads(attach(reviewer, record_id).data)["record"]

    # Then its bytes, ETag, digest and stored row are the same, and the addendum names that very digest
    after = reviewer.get(f"/api/v1/records/{record_id}.json")
    assert after.data == before.data and after.headers["ETag"] == before.headers["ETag"]
    assert stored_record(app, record_id) == stored_before
    digest = record_digest(json.loads(after.data)["record"])
    assert digest == stored_before[0] == addendum["record"]["digest"]
    assert verify_record(json.loads(after.data), published_keys(client)).ok


def test_attaching_is_audited_and_the_same_body_again_changes_nothing(app, approved):
    reviewer, record_id = approved["reviewer"], approved["record_id"]

    first = attach(reviewer, record_id)
    again = attach(reviewer, record_id)

    assert first.status_code == 201 and again.status_code == 200 and again.data == first.data
    with get_db(app).session() as session:
        assert session.scalar(select(func.count()).select_from(Addendum)) == 1
        events = [e for e in audit.events_of(session, approved["view"]["id"]) if e.action == "addendum.issued"]
        assert audit.verify(session).ok
    (event,) = events
    addendum = json.loads(first.data)["record"]
    assert event.detail["addendum_id"] == addendum["addendum_id"] and event.detail["record_id"] == record_id
    assert event.before_state == event.after_state == "approved" and event.actor == reviewer.name
    assert event.detail["verdict"] == {"record": "pass", "as_built": "warn"}


def test_the_same_body_attached_twice_at_once_issues_one_addendum(app, approved, as_role):
    # Given a reviewer and an admin who send the same measurements at the same moment
    record_id = approved["record_id"]
    callers = [approved["reviewer"], as_role("admin")]
    start = threading.Barrier(len(callers))
    answers: list[Any] = []

    def send(caller: Caller) -> None:
        start.wait()
        answers.append(attach(caller, record_id))

    threads = [threading.Thread(target=send, args=(caller,)) for caller in callers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    # Then one addendum stands (whichever was stored first), and both answer with it
    assert sorted(answer.status_code for answer in answers) == [200, 201]
    assert answers[0].data == answers[1].data
    with get_db(app).session() as session:
        assert session.scalar(select(func.count()).select_from(Addendum)) == 1
        assert audit.verify(session).ok


def test_only_reviewers_and_admins_attach_and_never_whoever_sold_the_quote(app, client, approved, as_role):
    path = addenda_url(approved["record_id"])
    for role in ("submitter", "approver"):
        refused = as_role(role).post(path, json={"measurements": MEASUREMENTS})
        assert refused.status_code == 403, role
        assert "attach as-built measurements" in refused.get_json()["detail"]
    assert client.post(path, json={"measurements": MEASUREMENTS}).status_code == 401
    # A reviewer token of the user who submitted the quote
    seller = token_for(app, approved["submitter"].name, "reviewer")
    refused = seller.post(path, json={"measurements": MEASUREMENTS})
    assert refused.status_code == 403 and "four-eyes" in refused.get_json()["detail"]
    assert as_role("admin").post(path, json={"measurements": MEASUREMENTS}).status_code == 201


def test_only_an_approved_record_takes_an_addendum(as_role, approved, submitted):
    reviewer = approved["reviewer"]
    evaluation_id = approved["view"]["evaluation"]["record_id"]

    refused = attach(reviewer, evaluation_id)

    assert refused.status_code == 409 and refused.mimetype == "application/problem+json"
    assert "approved records only" in refused.get_json()["detail"]
    assert approved["record_id"] in refused.get_json()["detail"]  # names the record to attach them to
    # The final record of a rejected quote
    _, view = submitted
    rejected = as_role("approver").post(url(view["id"], "decisions"), json={"action": "reject"},
                                        if_match=view["etag"])
    final_id = rejected.get_json()["final_record_id"]
    assert attach(reviewer, final_id).status_code == 409
    assert attach(reviewer, "no-such-record").status_code == 404
    assert reviewer.get(addenda_url("no-such-record")).status_code == 404
    assert reviewer.get(addenda_url(approved["record_id"], "no-such-addendum")).status_code == 404


@pytest.mark.parametrize("body, pointer", [
    ({"measurements": {"storage": {"write_gbs": -1}}}, "/measurements/storage/write_gbs"),
    ({"measurements": {"storage": {"write_gbs": "fast"}}}, "/measurements/storage/write_gbs"),
    ({"measurements": {"storge": {"write_gbs": 20}}}, "/measurements/storge"),
    ({"measurements": {"scaling": [{"gpus": 8}]}}, "/measurements/scaling/0/tokens_per_s"),
    ({"measurements": {}}, "/measurements"),
    ({}, "/measurements"),
    ({"measurements": {"power": {"sustained_w_per_node": 9000}}, "by": "x"}, "/by"),
    ({"measurements": {"power": {"sustained_w_per_node": 9000}}, "note": ""}, "/note"),
])
def test_bad_measurements_are_refused_naming_the_json_pointer(approved, body, pointer):
    response = approved["reviewer"].post(addenda_url(approved["record_id"]), json=body)

    assert response.status_code == 422 and response.mimetype == "application/problem+json", response.get_json()
    assert pointer in [e["pointer"] for e in response.get_json()["errors"]]


def test_measurements_that_decide_nothing_in_the_record_are_refused(approved):
    serving = {"serving_latency": [{"batch": 16, "ttft_ms": 210, "tpot_ms": 12.5}]}

    response = attach(approved["reviewer"], approved["record_id"], serving)

    assert response.status_code == 422
    (error,) = response.get_json()["errors"]
    assert error["pointer"] == "/measurements" and "serving_latency" in error["message"]


def test_addenda_of_every_version_are_listed_and_calibrated(app, approved, as_role):
    reviewer, record_id = approved["reviewer"], approved["record_id"]
    attach(reviewer, record_id)
    # A purchase order issues version 2; an addendum attached to it is listed with the first
    linked = as_role("approver").post(f"/api/v1/records/{record_id}/purchase-orders",
                                      json={"po_number": "PO-49", "system": "SAP"})
    second_version = linked.get_json()["record_id"]
    assert attach(reviewer, second_version, {"storage": {"write_gbs": 36}}).status_code == 201

    listing = reviewer.get(addenda_url(second_version))

    assert listing.status_code == 200 and listing.get_json()["total"] == 2
    first, second = listing.get_json()["items"]
    assert (first["record_id"], second["record_id"]) == (record_id, second_version)
    assert first["changes"] == [{"check_id": "interconnect-scaling", "from": "pass", "to": "warn"}]
    assert "checkpoint-bandwidth write_gbs" in first["estimators"]
    assert reviewer.get(first["links"]["self"]).status_code == 200
    assert reviewer.get(addenda_url(record_id)).get_json()["total"] == 2
    assert reviewer.get(addenda_url(approved["view"]["evaluation"]["record_id"])).get_json()["total"] == 0
    # The calibration: write bandwidth measured twice, 25 and 36 GB/s against 32 estimated
    calibration = reviewer.get("/api/v1/calibration").get_json()
    assert calibration["addenda"] == 2
    rows = {row["estimator"]: row for row in calibration["estimators"]}
    write = rows["checkpoint-bandwidth write_gbs"]
    assert write["count"] == 2 and write["median_ratio"] == pytest.approx((25 / 32 + 36 / 32) / 2)
    assert write["worst_ratio"] == pytest.approx(25 / 32) and write["optimistic_count"] == 1
    assert rows["rack-power site_kw"]["count"] == 1 and rows["peak-memory total_gib"]["count"] == 0
    with get_db(app).session() as session:
        assert session.scalar(select(func.count()).select_from(CalibrationPoint)) == sum(
            row["count"] for row in calibration["estimators"])
    # A vendor's token of scope own sees the calibration of its own submissions only
    vendor = token_for(app, "another-vendor", "submitter", scope="own")
    assert vendor.get("/api/v1/calibration").get_json()["addenda"] == 0
    assert vendor.get(addenda_url(record_id)).status_code == 404


def test_the_addenda_routes_are_documented(client):
    document = client.get("/api/v1/openapi.json").get_json()
    attach_op = document["paths"]["/api/v1/records/{record_id}/addenda"]["post"]
    assert attach_op["x-roles"] == ["admin", "reviewer"]
    assert {"200", "201", "403", "404", "409", "422"} <= set(attach_op["responses"])
    assert document["paths"]["/api/v1/calibration"]["get"]["responses"]["200"]["content"]["application/json"][
        "schema"] == {"$ref": "#/components/schemas/Calibration"}
    assert "AddendumDocument" in document["components"]["schemas"]

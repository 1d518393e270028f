"""The verdict as an in-toto Statement v1 (test-result predicate) in a DSSE envelope."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

from service.record import SigningKeys, pae, record_digest, sign_dsse, verdict_statement, verify_dsse


def test_statement_names_the_submission_and_sorts_checks_by_outcome(approved: dict[str, Any]) -> None:
    statement = verdict_statement(approved)

    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"] == [{"name": "submission",
                                     "digest": {"sha256": approved["submission"]["digest"].removeprefix("sha256:")}}]
    assert statement["predicateType"] == "https://in-toto.io/attestation/test-result/v0.1"
    predicate = statement["predicate"]
    assert predicate["result"] == {"pass": "PASSED", "warn": "WARNED"}.get(approved["verdict"], "FAILED")
    by_status = {c["id"]: c["status"] for c in approved["checks"]}
    assert predicate["passedTests"] == [i for i, s in by_status.items() if s in ("pass", "waived")]
    assert predicate["warnedTests"] == [i for i, s in by_status.items() if s == "warn"]
    assert predicate["failedTests"] == [i for i, s in by_status.items() if s in ("fail", "insufficient-data")]
    assert {"name": "commissioning-record", "digest": {"sha256": record_digest(approved)[7:]}} \
        in predicate["configuration"]


def test_an_incomplete_record_is_not_reported_as_passed(approved: dict[str, Any]) -> None:
    record = copy.deepcopy(approved)
    record["verdict"] = "incomplete"
    record["checks"][0]["status"] = "insufficient-data"

    predicate = verdict_statement(record)["predicate"]

    assert predicate["result"] == "FAILED"
    assert record["checks"][0]["id"] in predicate["failedTests"]


def test_pae_matches_the_dsse_specification_example() -> None:
    # DSSE protocol.md: PAE("http://example.com/HelloWorld", "hello world")
    assert pae("http://example.com/HelloWorld", b"hello world") == \
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


def test_dsse_envelope_round_trips(approved: dict[str, Any], keys: SigningKeys) -> None:
    envelope = sign_dsse(verdict_statement(approved), keys)

    result, statement = verify_dsse(envelope, keys.trusted())

    assert result.ok, result.all_reasons()
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert envelope["signatures"][0]["keyid"] == keys.key_id
    assert statement == verdict_statement(approved)


def test_a_changed_payload_does_not_verify(approved: dict[str, Any], keys: SigningKeys) -> None:
    envelope = sign_dsse(verdict_statement(approved), keys)
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["result"] = "PASSED" if statement["predicate"]["result"] != "PASSED" else "FAILED"
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()

    result, parsed = verify_dsse(envelope, keys.trusted())

    assert parsed is None
    assert result.reasons == [f"signature does not verify with trusted key {keys.key_id}"]


def test_payload_type_is_bound(approved: dict[str, Any], keys: SigningKeys) -> None:
    envelope = sign_dsse(verdict_statement(approved), keys)
    envelope["payloadType"] = "application/json"

    result, _ = verify_dsse(envelope, keys.trusted())

    assert result.reasons == ["payload type application/json is not application/vnd.in-toto+json"]


def test_untrusted_signer_is_refused(approved: dict[str, Any], keys: SigningKeys, other_keys: SigningKeys) -> None:
    result, _ = verify_dsse(sign_dsse(verdict_statement(approved), other_keys), keys.trusted())

    assert result.reasons == [f"unknown key id {other_keys.key_id} (trusted: {keys.key_id})"]

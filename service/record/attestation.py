"""The verdict as an in-toto Statement v1 (test-result predicate), signed as a DSSE envelope.

Sources: in-toto Attestation Framework, Statement v1 (spec/v1/statement.md) and the test-result predicate
v0.1 (spec/predicates/test-result.md); DSSE v1 protocol (secure-systems-lab/dsse, protocol.md) for the
pre-authentication encoding (PAE) and envelope.md for the JSON envelope.
"""

from __future__ import annotations

import json
from typing import Any

from service.record.canonical import canonical_bytes, record_digest
from service.record.keys import SigningKeys, TrustedKeys, b64decode, b64encode, verify_signature
from service.record.verification import Verification

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://in-toto.io/attestation/test-result/v0.1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"

# Record verdict → test-result "result". An incomplete record (a check lacked data) is not a pass: FAILED.
RESULT_OF_VERDICT = {"pass": "PASSED", "warn": "WARNED", "fail": "FAILED", "incomplete": "FAILED"}
# Check status → the test list it is reported in; not-applicable checks were not run and are not listed.
# A waived check counts as passed, as it does in the record's verdict.
LIST_OF_STATUS = {"pass": "passedTests", "waived": "passedTests", "warn": "warnedTests",
                  "fail": "failedTests", "insufficient-data": "failedTests"}


def verdict_statement(record: dict[str, Any]) -> dict[str, Any]:
    """Returns the in-toto Statement v1 of a record's verdict; its subject is the submission by digest."""
    tests: dict[str, list[str]] = {"passedTests": [], "warnedTests": [], "failedTests": []}
    for check in record["checks"]:
        name = LIST_OF_STATUS.get(check["status"])
        if name:
            tests[name].append(check["id"])
    policy, engine = record["policy"], record["engine"]
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": "submission",
                     "digest": {"sha256": record["submission"]["digest"].removeprefix("sha256:")}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "result": RESULT_OF_VERDICT[record["verdict"]],
            "configuration": [
                {"name": f"policy:{policy['id']}@{policy['version']}",
                 "digest": {"sha256": policy["digest"].removeprefix("sha256:")}},
                {"name": "commissioning-record",
                 "digest": {"sha256": record_digest(record).removeprefix("sha256:")}},
                {"name": f"engine:{engine['name']}@{engine['version']}",
                 "uri": f"pkg:pypi/{engine['name']}@{engine['version']}"},
            ],
            **tests,
        },
    }


def pae(payload_type: str, payload: bytes) -> bytes:
    """Returns the DSSE v1 pre-authentication encoding: ``DSSEv1 SP LEN(type) SP type SP LEN(body) SP body``."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(type_bytes), type_bytes, len(payload), payload)


def sign_dsse(statement: dict[str, Any], keys: SigningKeys) -> dict[str, Any]:
    """Returns the DSSE envelope of ``statement`` (payload: its RFC 8785 bytes), signed over the PAE."""
    payload = canonical_bytes(statement)
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": b64encode(payload),
        "signatures": [{"keyid": keys.key_id, "sig": b64encode(keys.sign(pae(PAYLOAD_TYPE, payload)))}],
    }


def verify_dsse(envelope: Any, trusted_keys: TrustedKeys) -> tuple[Verification, dict[str, Any] | None]:
    """Returns the verification of a DSSE envelope and, when its signature verifies, the statement it carries.

    Valid when at least one signature by a trusted key verifies over the PAE, the payload type is in-toto
    and the payload is a Statement v1; every other signature must be by a trusted key too (fails closed).
    """
    result = Verification("DSSE envelope")
    if not isinstance(envelope, dict) or not all(isinstance(envelope.get(k), str) for k in ("payloadType", "payload")) \
            or not isinstance(envelope.get("signatures"), list) or not envelope["signatures"]:
        result.fail("not a DSSE envelope: expected payloadType, payload and a non-empty signatures list")
        return result, None
    if envelope["payloadType"] != PAYLOAD_TYPE:
        result.fail(f"payload type {envelope['payloadType']} is not {PAYLOAD_TYPE}")
        return result, None
    try:
        payload = b64decode(envelope["payload"])
    except ValueError:
        result.fail("payload is not standard base64")
        return result, None
    message = pae(envelope["payloadType"], payload)
    for entry in envelope["signatures"]:
        key_id = entry.get("keyid") if isinstance(entry, dict) else None
        trusted = trusted_keys.get(key_id) if isinstance(key_id, str) else None
        if trusted is None:
            result.fail(f"unknown key id {key_id} (trusted: {trusted_keys.describe()})")
            continue
        try:
            signature = b64decode(entry.get("sig", ""))
        except (ValueError, AttributeError):
            result.fail(f"signature by {key_id} is not standard base64")
            continue
        if verify_signature(trusted.public_key, signature, message):
            result.key_id = key_id
            result.hold(f"DSSE signature by trusted key {key_id} verifies over the PAE")
        else:
            result.fail(f"signature does not verify with trusted key {key_id}")
    if result.reasons:
        return result, None
    try:
        statement = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        result.fail(f"payload is not JSON: {error}")
        return result, None
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        found = statement.get("_type") if isinstance(statement, dict) else type(statement).__name__
        result.fail(f"payload _type {found} is not {STATEMENT_TYPE}")
        return result, None
    result.hold(f"payload is an in-toto Statement v1 with predicate {statement.get('predicateType')}")
    return result, statement

"""The signed record envelope: round trip, and each way verification fails closed, saying found vs expected."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import rfc8785

from service.record import (
    SigningKeys,
    TrustedKeys,
    canonical_bytes,
    record_digest,
    sign_record,
    verify_record,
)
from service.record.keys import ED25519, b64decode, b64encode
from service.record.verify import verify_document


def test_signed_envelope_round_trips(approved: dict[str, Any], keys: SigningKeys) -> None:
    envelope = sign_record(approved, keys)

    result = verify_record(envelope, keys.trusted())

    assert result.ok, result.all_reasons()
    assert set(envelope) == {"record", "signature"}
    assert set(envelope["signature"]) == {"alg", "key_id", "record_digest", "value", "signed_at"}
    assert envelope["signature"]["alg"] == "ecdsa-p256-sha256"
    assert envelope["signature"]["key_id"] == keys.key_id and keys.key_id.startswith("sha256:")
    assert envelope["signature"]["record_digest"] == record_digest(approved) == result.record_digest
    assert result.key_id == keys.key_id


def test_envelope_survives_json_serialisation(approved: dict[str, Any], keys: SigningKeys) -> None:
    """The digest is of the RFC 8785 form, so pretty-printing or reordering the record does not matter."""
    envelope = sign_record(approved, keys)
    text = json.dumps(envelope, indent=3, sort_keys=False)

    result = verify_document(text.encode(), keys.trusted())

    assert result.ok, result.all_reasons()


def test_record_digest_is_sha256_of_rfc8785_bytes(approved: dict[str, Any]) -> None:
    import hashlib

    assert record_digest(approved) == "sha256:" + hashlib.sha256(rfc8785.dumps(approved)).hexdigest()
    assert canonical_bytes({"b": 1, "a": [1.0, "é"]}) == '{"a":[1,"é"],"b":1}'.encode()


def test_changed_value_is_refused_with_both_digests(approved: dict[str, Any], keys: SigningKeys) -> None:
    envelope = sign_record(approved, keys)
    tampered = copy.deepcopy(envelope)
    first = tampered["record"]["checks"][0]
    first["status"] = "pass" if first["status"] != "pass" else "fail"

    result = verify_record(tampered, keys.trusted())

    assert not result.ok
    found, signed = record_digest(tampered["record"]), envelope["signature"]["record_digest"]
    assert f"record digest {found} does not match signed digest {signed}" in result.reasons


def test_unknown_key_is_refused_and_named(approved: dict[str, Any], keys: SigningKeys,
                                          other_keys: SigningKeys) -> None:
    envelope = sign_record(approved, other_keys)

    result = verify_record(envelope, keys.trusted())

    assert not result.ok
    assert result.reasons == [f"unknown key id {other_keys.key_id} (trusted: {keys.key_id})"]


def test_forged_signature_does_not_verify(approved: dict[str, Any], keys: SigningKeys,
                                          other_keys: SigningKeys) -> None:
    """Someone re-signs a changed record with their own key but claims ours."""
    envelope = sign_record(approved, keys)
    forged = copy.deepcopy(envelope)
    forged["record"]["verdict"] = "pass"
    forged["signature"]["record_digest"] = record_digest(forged["record"])
    forged_by_other = sign_record(forged["record"], other_keys)
    forged["signature"]["value"] = forged_by_other["signature"]["value"]

    result = verify_record(forged, keys.trusted())

    assert not result.ok
    assert result.reasons == [f"signature does not verify with trusted key {keys.key_id}"]


def test_signing_time_is_covered_by_the_signature(approved: dict[str, Any], keys: SigningKeys) -> None:
    envelope = sign_record(approved, keys)
    envelope["signature"]["signed_at"] = "2020-01-01T00:00:00Z"

    result = verify_record(envelope, keys.trusted())

    assert result.reasons == [f"signature does not verify with trusted key {keys.key_id}"]


@pytest.mark.parametrize("mutate, reason", [
    (lambda e: e.pop("signature"), "not a signed record envelope"),
    (lambda e: e.update(extra=1), "not a signed record envelope"),
    (lambda e: e["signature"].pop("value"), "signature lacks value"),
    (lambda e: e["signature"].update(note="x"), "signature has unexpected members note"),
    (lambda e: e["signature"].update(value="not*base64"), "signature value is not standard base64"),
    (lambda e: e["signature"].update(alg="ed25519"), "signature algorithm ed25519 does not match"),
    (lambda e: e.update(record=[1]), "record is list, expected an object"),
])
def test_malformed_envelopes_fail_closed(approved: dict[str, Any], keys: SigningKeys, mutate: Any,
                                         reason: str) -> None:
    envelope = sign_record(approved, keys)
    mutate(envelope)

    result = verify_record(envelope, keys.trusted())

    assert not result.ok
    assert any(r.startswith(reason) for r in result.reasons), result.reasons


def test_nothing_trusted_means_nothing_verifies(approved: dict[str, Any], keys: SigningKeys) -> None:
    result = verify_record(sign_record(approved, keys), TrustedKeys())

    assert not result.ok and result.reasons == [f"unknown key id {keys.key_id} (trusted: none)"]


def test_duplicate_members_are_refused(approved: dict[str, Any], keys: SigningKeys) -> None:
    """Two "verdict" members would let two parsers read two verdicts under one signature."""
    text = json.dumps(sign_record(approved, keys)).replace('"verdict": ', '"verdict": "pass", "verdict": ', 1)

    with pytest.raises(Exception, match="duplicate member names verdict"):
        verify_document(text.encode(), keys.trusted())


def test_ed25519_keys_sign_and_verify(approved: dict[str, Any]) -> None:
    from cryptography.hazmat.primitives.asymmetric import ed25519

    from service.record.keys import self_signed_certificate

    private = ed25519.Ed25519PrivateKey.generate()
    keys = SigningKeys(private, self_signed_certificate(private))

    envelope = sign_record(approved, keys)

    assert envelope["signature"]["alg"] == ED25519
    assert len(b64decode(envelope["signature"]["value"])) == 64
    assert verify_record(envelope, keys.trusted()).ok


def test_base64_is_strict() -> None:
    assert b64decode(b64encode(b"\x00\xff")) == b"\x00\xff"
    with pytest.raises(ValueError):
        b64decode("AP8")  # missing padding

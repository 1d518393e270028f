"""The signed record envelope: the record, and a signature over the canonical bytes that bind it.

```
{"record": {...},
 "signature": {"alg": "ecdsa-p256-sha256", "key_id": "sha256:<hex SPKI>", "record_digest": "sha256:<hex>",
               "signed_at": "2026-11-29T15:46:40Z", "value": "<base64>"}}
```
``record_digest`` is the SHA-256 of the RFC 8785 canonical bytes of ``record``. ``value`` signs the RFC 8785
canonical bytes of the ``signature`` object without ``value`` — so the digest (hence the record), the key
id, the algorithm and the signing time are all covered, and none can be swapped without breaking it (the
way CMS signs its signed attributes). Verification recomputes the digest from the record it was given.

Two optional members: ``x5c`` (signed, like JWS's): the signer's certificate and its chain, base64 DER, when the
key is certified by a CA (``SIGNING_CERT_FILE`` with its chain), so a verifier needs only the CA's root;
``timestamp`` (not signed: it is over the signature): the TSA's RFC 3161 token over the decoded ``value``
bytes, when a TSA is configured. It proves the signature existed at the TSA's time.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from cryptography.hazmat.primitives import serialization

from service.record.canonical import canonical_bytes, record_digest
from service.record.certificates import chained_key
from service.record.keys import SigningKeys, TrustedKey, TrustedKeys, b64decode, b64encode, verify_signature
from service.record.timestamps import check_token
from service.record.verification import Verification

SIGNATURE_FIELDS = ("alg", "key_id", "record_digest", "signed_at", "value")
OPTIONAL_FIELDS = ("x5c", "timestamp")  # x5c is signed; timestamp is over the signature, so not


def _now_text(now: dt.datetime | None) -> str:
    moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def signed_attributes(signature: dict[str, Any]) -> bytes:
    """Returns the bytes a record signature signs: the canonical ``signature`` less ``value`` and ``timestamp``."""
    return canonical_bytes({k: v for k, v in signature.items() if k not in ("value", "timestamp")})


def sign_record(record: dict[str, Any], keys: SigningKeys, *, now: dt.datetime | None = None) -> dict[str, Any]:
    """Returns the signed envelope ``{"record", "signature"}`` of ``record`` (see the module docstring)."""
    signature: dict[str, Any] = {
        "alg": keys.algorithm,
        "key_id": keys.key_id,
        "record_digest": record_digest(record),
        "signed_at": _now_text(now),
    }
    if keys.chain:
        certificates = (keys.certificate, *keys.chain)
        signature["x5c"] = [b64encode(c.public_bytes(serialization.Encoding.DER)) for c in certificates]
    value = keys.sign(signed_attributes(signature))
    signature["value"] = b64encode(value)
    if keys.tsa is not None:
        signature["timestamp"] = b64encode(keys.tsa.token(value))
    return {"record": record, "signature": signature}


def verify_record(envelope: Any, trusted_keys: TrustedKeys) -> Verification:
    """Returns the verification of a signed record envelope against explicitly trusted keys.

    Fails closed: a malformed envelope, a record whose digest differs from the signed one, an unknown key
    id, an algorithm other than the key's, or a signature that does not verify each add a reason saying
    what was found and what was expected; ``ok`` holds only when none did.
    """
    result = Verification("record envelope")
    if not isinstance(envelope, dict) or set(envelope) != {"record", "signature"}:
        found = sorted(envelope) if isinstance(envelope, dict) else type(envelope).__name__
        result.fail(f"not a signed record envelope: expected exactly the members record and signature, found {found}")
        return result
    record, signature = envelope["record"], envelope["signature"]
    if not isinstance(record, dict):
        result.fail(f"record is {type(record).__name__}, expected an object")
        return result
    result.record = record
    if not isinstance(signature, dict):
        result.fail(f"signature is {type(signature).__name__}, expected an object")
        return result
    missing = [name for name in SIGNATURE_FIELDS if not isinstance(signature.get(name), str)]
    if missing:
        result.fail(f"signature lacks {', '.join(missing)} (expected strings: {', '.join(SIGNATURE_FIELDS)})")
        return result
    unknown = sorted(set(signature) - set(SIGNATURE_FIELDS) - set(OPTIONAL_FIELDS))
    if unknown:
        result.fail(f"signature has unexpected members {', '.join(unknown)}")
        return result

    try:
        digest = record_digest(record)
    except Exception as error:  # rfc8785 raises its own errors for values JSON cannot represent canonically
        result.fail(f"record cannot be canonicalised (RFC 8785): {error}")
        return result
    result.record_digest = digest
    if digest != signature["record_digest"]:
        result.fail(f"record digest {digest} does not match signed digest {signature['record_digest']}")
    else:
        result.hold(f"record digest {digest} matches the signed digest")

    key_id = signature["key_id"]
    trusted = trusted_keys.get(key_id)
    if trusted is None and "x5c" in signature:
        trusted = _certified_key(signature["x5c"], key_id, trusted_keys, result)
        if trusted is None:
            return result
    elif trusted is None:
        result.fail(f"unknown key id {key_id} (trusted: {trusted_keys.describe()})")
        return result
    result.key_id = key_id
    if signature["alg"] != trusted.algorithm:
        result.fail(f"signature algorithm {signature['alg']} does not match the algorithm of key {key_id} "
                    f"({trusted.algorithm})")
        return result
    try:
        value = b64decode(signature["value"])
    except ValueError:
        result.fail("signature value is not standard base64")
        return result
    if verify_signature(trusted.public_key, value, signed_attributes(signature)):
        result.hold(f"signature ({signature['alg']}) by trusted key {key_id}, signed at {signature['signed_at']}, "
                    "verifies")
    else:
        result.fail(f"signature does not verify with trusted key {key_id}")
    _check_timestamp(signature.get("timestamp"), value, trusted_keys, result)
    return result


def _certified_key(x5c: Any, key_id: str, trusted_keys: TrustedKeys, result: Verification) -> TrustedKey | None:
    """Returns the key of the envelope's certificate when it is ``key_id`` and chains to a trusted root."""
    if not isinstance(x5c, list) or not x5c or not all(isinstance(c, str) for c in x5c):
        result.fail("signature x5c is not a list of base64 certificates")
        return None
    try:
        certified = chained_key([b64decode(c) for c in x5c], trusted_keys)
    except ValueError as error:
        result.fail(f"the signer's certificate (x5c) does not chain to a trusted root: {error} "
                    f"(trusted: {trusted_keys.describe()})")
        return None
    if certified.key_id != key_id:
        result.fail(f"signature key id {key_id} is not the key of its certificate ({certified.key_id})")
        return None
    result.hold(f"the signer's certificate ({certified.certificate.subject.rfc4514_string()}) chains to a "  # type: ignore[union-attr]
                "trusted root")
    return certified


def _check_timestamp(token: Any, value: bytes, trusted_keys: TrustedKeys, result: Verification) -> None:
    """Checks the TSA's token over the signature value; sets ``result.level`` (B-T with one, else B-B)."""
    if token is None:
        result.level = "B-B"
        return
    result.level = "B-T"
    try:
        data = b64decode(token) if isinstance(token, str) else b""
    except ValueError:
        data = b""
    if not data:
        result.fail("signature timestamp is not standard base64 of an RFC 3161 token")
        return
    from asn1crypto import x509 as asn1_x509

    roots = [asn1_x509.Certificate.load(c.public_bytes(serialization.Encoding.DER)) for c in trusted_keys.certificates]
    check = check_token(data, value, roots)
    for reason in check.reasons:
        result.fail(f"signature timestamp: {reason}")
    if check.time is not None:
        result.signing_time = check.time
        result.hold(f"timestamp by {check.tsa} at {check.time.isoformat(timespec='seconds')} covers the signature")


def certified_signer(envelope: Any, trusted_keys: TrustedKeys) -> TrustedKeys:
    """Returns ``trusted_keys`` with the key of a verified envelope's certificate (``x5c``) added when it chains to
    one of them: what else that key signed beside the envelope (a PDF's verdict attestation) is then trusted."""
    signature = envelope.get("signature") if isinstance(envelope, dict) else None
    x5c = signature.get("x5c") if isinstance(signature, dict) else None
    if not isinstance(x5c, list) or not all(isinstance(c, str) for c in x5c) or not x5c:
        return trusted_keys
    try:
        return trusted_keys.merged(TrustedKeys.of([chained_key([b64decode(c) for c in x5c], trusted_keys)]))
    except ValueError:
        return trusted_keys

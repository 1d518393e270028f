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
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from service.record.canonical import canonical_bytes, record_digest
from service.record.keys import SigningKeys, TrustedKeys, b64decode, b64encode, verify_signature
from service.record.verification import Verification

SIGNATURE_FIELDS = ("alg", "key_id", "record_digest", "signed_at", "value")


def _now_text(now: dt.datetime | None) -> str:
    moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def signed_attributes(signature: dict[str, Any]) -> bytes:
    """Returns the bytes a record signature signs: the canonical ``signature`` object less its ``value``."""
    return canonical_bytes({k: v for k, v in signature.items() if k != "value"})


def sign_record(record: dict[str, Any], keys: SigningKeys, *, now: dt.datetime | None = None) -> dict[str, Any]:
    """Returns the signed envelope ``{"record", "signature"}`` of ``record`` (see the module docstring)."""
    signature: dict[str, Any] = {
        "alg": keys.algorithm,
        "key_id": keys.key_id,
        "record_digest": record_digest(record),
        "signed_at": _now_text(now),
    }
    signature["value"] = b64encode(keys.sign(signed_attributes(signature)))
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
    unknown = sorted(set(signature) - set(SIGNATURE_FIELDS))
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
    if trusted is None:
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
    return result

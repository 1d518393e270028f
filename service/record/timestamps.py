"""RFC 3161 timestamps from the configured time-stamping authority (TSA), and their verification offline.

The service asks the TSA at ``TSA_URL`` for a token over the bytes it signed (a record envelope's signature
value; pyHanko asks for the PDF's signature and document timestamps itself). The token proves that the
signature existed at the TSA's time, so a signature stays verifiable after its certificate is revoked or
expires, and it says when the record was signed by someone other than the signer. A verifier trusts the
TSA only through an explicit trust root (``TSA_TRUST_ROOT_FILE``; for a verifier, the roots it was given).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from service.record.errors import SigningError

# What the TSA may take to answer, per request: a TSA that does not answer fails the signing (fail closed)
# rather than issuing a record without the timestamp the configuration asks for.
TSA_TIMEOUT_S = 10


@dataclass(frozen=True)
class TimestampAuthority:
    """The TSA the service timestamps its signatures with, and the roots its certificate chains to."""

    url: str
    trust_roots: tuple[x509.Certificate, ...] = ()

    @classmethod
    def from_settings(cls, url: str | None, root_file: str | None) -> TimestampAuthority | None:
        """Returns the TSA of ``TSA_URL`` and ``TSA_TRUST_ROOT_FILE``; None when no URL is set (records are B-B)."""
        if not url:
            if root_file:
                raise SigningError("TSA_TRUST_ROOT_FILE is set but TSA_URL is not; set both, or neither")
            return None
        if not url.startswith(("http://", "https://")):
            raise SigningError(f"TSA_URL {url!r} is not an http(s) URL")
        if not root_file:
            raise SigningError("TSA_URL is set without TSA_TRUST_ROOT_FILE: a TSA is trusted only through an "
                               "explicit root")
        try:
            roots = x509.load_pem_x509_certificates(Path(root_file).read_bytes())
        except OSError as error:
            raise SigningError(f"cannot read TSA_TRUST_ROOT_FILE {root_file}: {error.strerror}") from None
        except ValueError as error:
            raise SigningError(f"TSA_TRUST_ROOT_FILE {root_file} holds no readable certificate: {error}") from None
        return cls(url, tuple(roots))

    def asn1_roots(self) -> list[Any]:
        from asn1crypto import x509 as asn1_x509

        return [asn1_x509.Certificate.load(c.public_bytes(serialization.Encoding.DER)) for c in self.trust_roots]

    def timestamper(self) -> Any:
        """Returns pyHanko's HTTP client of this TSA."""
        from pyhanko.sign.timestamps import HTTPTimeStamper

        return HTTPTimeStamper(self.url, timeout=TSA_TIMEOUT_S)

    def token(self, data: bytes) -> bytes:
        """Returns the DER RFC 3161 TimeStampToken (a CMS ContentInfo) over SHA-256 of ``data``.

        SigningError when the TSA cannot be reached or answers with anything but a granted token.
        """
        from service.record.sync import run_off_loop

        try:
            token = run_off_loop(_request_token, self.timestamper(), hashlib.sha256(data).digest())
        except Exception as error:
            raise SigningError(f"the time-stamping authority at {self.url} gave no timestamp: "
                               f"{type(error).__name__}: {error}") from error
        return token.dump()


def _request_token(timestamper: Any, digest: bytes) -> Any:
    import asyncio

    return asyncio.run(timestamper.async_timestamp(digest, "sha256"))


@dataclass(frozen=True)
class TokenCheck:
    """What a timestamp token showed: its time when it holds, else the reasons it does not."""

    time: dt.datetime | None
    tsa: str | None
    reasons: tuple[str, ...]


def check_token(token: bytes, data: bytes, trust_roots: list[Any]) -> TokenCheck:
    """Returns the verification of RFC 3161 ``token`` over ``data``: imprint, TSA signature, TSA chain to a root.

    Offline: the TSA's chain is built from the token's certificates and ``trust_roots`` (asn1crypto
    certificates) only. Fails closed on a token that cannot be read, an imprint of other data, a signature
    that does not verify, or a TSA that chains to no trusted root.
    """
    from asn1crypto import cms
    from pyhanko.sign.validation.generic_cms import validate_tst_signed_data
    from pyhanko_certvalidator import ValidationContext

    from service.record.sync import run_off_loop

    try:
        content = cms.ContentInfo.load(token)
        signed_data = content["content"]
        info = signed_data["encap_content_info"]["content"].parsed
        imprint = info["message_imprint"]["hashed_message"].native
        algorithm = info["message_imprint"]["hash_algorithm"]["algorithm"].native
    except Exception as error:
        return TokenCheck(None, None, (f"the timestamp token cannot be read ({type(error).__name__}: {error})",))
    if algorithm != "sha256":
        return TokenCheck(None, None, (f"the timestamp token hashes with {algorithm}, expected sha256",))
    expected = hashlib.sha256(data).digest()
    if imprint != expected:
        return TokenCheck(None, None, (f"the timestamp token is over sha256:{imprint.hex()}, but the signature value "
                                       f"hashes to sha256:{expected.hex()}: it timestamps something else",))
    context = ValidationContext(trust_roots=trust_roots, allow_fetching=False, revocation_mode="soft-fail")
    try:
        status = run_off_loop(_validate, validate_tst_signed_data, signed_data, context, lambda _algorithm: expected)
    except Exception as error:
        return TokenCheck(None, None, (f"the timestamp token does not verify ({type(error).__name__}: {error})",))
    tsa = status.signing_cert
    tsa_name = tsa.subject.human_friendly if tsa is not None else None
    reasons = []
    if not (status.intact and status.valid):
        reasons.append("the timestamp token's signature does not verify: the token was altered")
    if not status.trusted:
        reasons.append(f"the timestamp's TSA ({tsa_name}) does not chain to a trusted root "
                       f"({status.trust_problem_indic})")
    return TokenCheck(status.timestamp if not reasons else None, tsa_name, tuple(reasons))


def _validate(function: Any, signed_data: Any, context: Any, expected: Any) -> Any:
    import asyncio

    from pyhanko.sign.validation.status import TimestampSignatureStatus

    return TimestampSignatureStatus(**asyncio.run(function(signed_data, context, expected)))

"""Certificate paths of a record envelope's signer (its ``x5c``), validated offline against explicit roots."""

from __future__ import annotations

import asyncio
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from service.record.keys import TrustedKey, TrustedKeys, algorithm_of


def chained_key(certificates_der: list[bytes], trusted_keys: TrustedKeys) -> TrustedKey:
    """Returns the key of the first certificate once its path through the others reaches a trusted certificate.

    Offline: nothing is fetched and revocation is not checked here (a PDF's validation data is where a
    signature's revocation status lives). ValueError, saying why, when a certificate cannot be read, is of
    a key type records are not signed with, or the path does not reach a trusted root.
    """
    from asn1crypto import x509 as asn1_x509
    from pyhanko_certvalidator import CertificateValidator, ValidationContext

    from service.record.sync import run_off_loop

    try:
        leaf, *others = [asn1_x509.Certificate.load(der) for der in certificates_der]
        certificate = x509.load_der_x509_certificate(certificates_der[0])
        public_key = certificate.public_key()
        algorithm_of(public_key)  # type: ignore[arg-type]
    except Exception as error:
        raise ValueError(f"a certificate cannot be read ({type(error).__name__}: {error})") from None
    roots = [asn1_x509.Certificate.load(c.public_bytes(serialization.Encoding.DER)) for c in trusted_keys.certificates]
    if not roots:
        raise ValueError("no trusted certificate was given (a bare public key cannot anchor a certificate path)")
    context = ValidationContext(trust_roots=roots, allow_fetching=False, revocation_mode="soft-fail")
    validator = CertificateValidator(leaf, intermediate_certs=others, validation_context=context)
    try:
        run_off_loop(_validate_path, validator)
    except Exception as error:
        raise ValueError(f"{type(error).__name__}: {error}") from None
    return TrustedKey(public_key, certificate)  # type: ignore[arg-type]


def _validate_path(validator: Any) -> Any:
    return asyncio.run(validator.async_validate_path())

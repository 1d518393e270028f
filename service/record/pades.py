"""PAdES signing of the record PDF with pyHanko, and its validation against explicit trust roots only.

The signature is a certification signature (DocMDP: no changes allowed) with sub-filter
ETSI.CAdES.detached and the signing-certificate-v2 attribute, i.e. PAdES baseline B-B (ETSI EN 319 142-1).
It has no timestamp (B-T would need a TSA the service does not have).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

from cryptography.hazmat.primitives import serialization

from service.record.errors import SigningError
from service.record.keys import SigningKeys, TrustedKeys, key_id_of
from service.record.verification import Verification

SIGNATURE_FIELD = "QuotecheckRecordSignature"
PADES_SUBFILTER = "/ETSI.CAdES.detached"
# Bytes of a B-B CMS container beyond the signer's certificate: the signed attributes (content type, digest,
# signing time, signing-certificate-v2, CMS algorithm protection; about 300 bytes), the signer info around
# them and the signature value (ECDSA P-256 at most 72 bytes, Ed25519 64; keys.algorithm_of admits no
# other): 2,048 is more than three times that. pyHanko refuses a container that does not fit (SigningError).
CMS_OVERHEAD_BYTES = 2_048


def reserved_signature_bytes(keys: SigningKeys) -> int:
    """Returns the space to reserve for the CMS signature container, as hex (twice its DER bytes).

    Reserving it from the certificate's size spares pyHanko's estimate, which builds and signs a dummy
    container (a second CMS per PDF); the unused space is zero bytes inside the signature's /Contents.
    """
    certificate = keys.certificate.public_bytes(serialization.Encoding.DER)
    return 2 * (len(certificate) + CMS_OVERHEAD_BYTES)


def _pyhanko_signer(keys: SigningKeys) -> Any:
    from asn1crypto import keys as asn1_keys
    from asn1crypto import x509 as asn1_x509
    from pyhanko.sign import signers
    from pyhanko_certvalidator.registry import SimpleCertificateStore

    cert = asn1_x509.Certificate.load(keys.certificate.public_bytes(serialization.Encoding.DER))
    private = asn1_keys.PrivateKeyInfo.load(keys.private_key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return signers.SimpleSigner(signing_cert=cert, signing_key=private,
                                cert_registry=SimpleCertificateStore.from_certs([cert]))


def _run_off_loop(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Runs a pyHanko sync wrapper (which calls asyncio.run) in a thread when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function(*args, **kwargs)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function(*args, **kwargs)
        except BaseException as error:  # re-raised in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def sign_pdf(pdf: bytes, keys: SigningKeys, *, record_id: str | None = None) -> bytes:
    """Returns ``pdf`` with a PAdES B-B certification signature (no later changes permitted) by ``keys``.

    The signing time in the signature dictionary is the clock's (pyHanko's); the record envelope inside
    carries the service's ``signed_at``.
    """
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
    from pyhanko.sign import fields, signers

    metadata = signers.PdfSignatureMetadata(
        field_name=SIGNATURE_FIELD,
        md_algorithm="sha256",
        subfilter=fields.SigSeedSubFilter.PADES,
        certify=True,
        docmdp_permissions=fields.MDPPerm.NO_CHANGES,
        reason="quotecheck commissioning record" + (f" {record_id}" if record_id else ""),
        name=keys.certificate.subject.rfc4514_string(),
    )
    try:
        writer = IncrementalPdfFileWriter(BytesIO(pdf))
        output = _run_off_loop(signers.sign_pdf, writer, metadata, signer=_pyhanko_signer(keys),
                               bytes_reserved=reserved_signature_bytes(keys))
    except Exception as error:
        raise SigningError(f"PAdES signing failed: {type(error).__name__}: {error}") from error
    return output.getvalue()


@dataclass
class PdfSignatureReport:
    """What pyHanko's validator said about one embedded signature, in plain words."""

    field_name: str
    intact: bool
    valid: bool
    trusted: bool
    bottom_line: bool
    coverage: str
    modification_level: str | None
    docmdp_ok: bool | None
    signer_key_id: str | None
    pades_baseline_b: bool
    summary: str
    extra: dict[str, Any] = field(default_factory=dict)


def _validation_context(trusted: TrustedKeys, embedded_certs: list[Any]) -> Any:
    """Returns a pyHanko ValidationContext whose only trust roots are the trusted certificates.

    A trusted bare public key (no certificate given) pins the embedded signer certificate that carries
    exactly that key, which then serves as the trust root. Nothing is fetched (no AIA, CRL or OCSP).
    """
    from asn1crypto import x509 as asn1_x509
    from pyhanko_certvalidator import ValidationContext

    roots = [asn1_x509.Certificate.load(c.public_bytes(serialization.Encoding.DER)) for c in trusted.certificates]
    bare = {key_id for key_id, entry in trusted.keys.items() if entry.certificate is None}
    for cert in embedded_certs:
        if _asn1_key_id(cert) in bare:
            roots.append(cert)
    return ValidationContext(trust_roots=roots, allow_fetching=False, revocation_mode="soft-fail")


def _asn1_key_id(cert: Any) -> str:
    public_key = serialization.load_der_public_key(cert.public_key.dump())
    return key_id_of(public_key)  # type: ignore[arg-type]


def validate_pdf_signatures(reader: Any, trusted: TrustedKeys) -> list[PdfSignatureReport]:
    """Returns pyHanko's verdict on every signature embedded in the PDF read by ``reader``."""
    from pyhanko.sign.validation import validate_pdf_signature

    reports = []
    for embedded in reader.embedded_signatures:
        context = _validation_context(trusted, list(embedded.other_embedded_certs) + [embedded.signer_cert])
        status = _run_off_loop(validate_pdf_signature, embedded, context)
        signed_attrs = embedded.signer_info["signed_attrs"]
        attr_types = {attr["type"].native for attr in signed_attrs} if signed_attrs else set()
        subfilter = str(embedded.sig_object.get("/SubFilter"))
        reports.append(PdfSignatureReport(
            field_name=embedded.field_name,
            intact=bool(status.intact),
            valid=bool(status.valid),
            trusted=bool(status.trusted),
            bottom_line=bool(status.bottom_line),
            coverage=status.coverage.name if status.coverage is not None else "UNKNOWN",
            modification_level=status.modification_level.name if status.modification_level is not None else None,
            docmdp_ok=status.docmdp_ok,
            signer_key_id=_asn1_key_id(embedded.signer_cert) if embedded.signer_cert is not None else None,
            pades_baseline_b=subfilter == PADES_SUBFILTER and "signing_certificate_v2" in attr_types,
            summary=status.summary(),
        ))
    return reports


def check_pdf_signatures(reader: Any, trusted: TrustedKeys, result: Verification) -> str | None:
    """Adds to ``result`` what the PDF's signatures show; returns the signer's key id when all hold.

    Fails closed: no signature, more than one, or one that is not intact, not valid, not trusted, not
    PAdES, or that does not cover the whole file (bytes appended after signing) each add a reason.
    """
    reports = validate_pdf_signatures(reader, trusted)
    if not reports:
        result.fail("the PDF carries no signature (a DRAFT record is never signed)")
        return None
    if len(reports) > 1:
        result.fail(f"the PDF carries {len(reports)} signatures; a quotecheck record carries exactly one")
    report = reports[0]
    if not report.intact:
        result.fail("the PDF's signature is not intact: the signed bytes were changed after signing "
                    "(document digest does not match the signed digest)")
    elif not report.valid:
        result.fail("the PDF's signature does not verify (the CMS signature value is wrong for its signer)")
    if report.intact and report.valid:
        result.hold(f"PAdES signature {report.field_name} is intact and valid ({report.summary})")
    if not report.trusted:
        result.fail(f"the PDF's signer (key {report.signer_key_id}) does not chain to a trusted root "
                    f"(trusted: {trusted.describe()})")
    else:
        result.hold(f"signer key {report.signer_key_id} chains to a trusted root")
    if report.coverage != "ENTIRE_FILE":
        result.fail(f"the signature covers {report.coverage.lower().replace('_', ' ')}, not the entire file: "
                    f"the PDF was changed after signing (modification level {report.modification_level})")
    if not report.pades_baseline_b:
        result.fail("the signature is not PAdES baseline B-B (expected sub-filter ETSI.CAdES.detached with a "
                    "signing-certificate-v2 attribute)")
    else:
        result.hold("signature is PAdES B-B (ETSI.CAdES.detached, signing-certificate-v2)")
    return report.signer_key_id if not result.reasons else None

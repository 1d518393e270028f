"""Validation of the record PDF's PAdES signature against explicit trust roots only, offline, and its level.

The level is what the PDF holds (ETSI EN 319 142-1 baseline levels):

- ``B-B``: a signature with no timestamp; validated at the present time (no revocation data: soft-fail);
- ``B-T``: with the TSA's RFC 3161 timestamp on the signature, which gives the signing time;
- ``B-LT``: and the validation data (certificates, OCSP responses, CRLs) in the document security store;
- ``B-LTA``: and a document timestamp over that store.

B-LT and B-LTA are validated as PAdES-LTA (ETSI EN 319 102-1 §5.6.3) with the validation data in the PDF
only and revocation information required: a certificate revoked after the signature's timestamp leaves the
signature valid, one revoked before it does not.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import serialization

from service.record.keys import TrustedKeys, key_id_of
from service.record.pades import PADES_SUBFILTER
from service.record.sync import run_off_loop
from service.record.verification import Verification

LEVELS = ("B-B", "B-T", "B-LT", "B-LTA")


@dataclass
class PdfSignatureReport:
    """What pyHanko's validator said about the record's signature, in plain words."""

    field_name: str
    intact: bool
    valid: bool
    trusted: bool
    coverage: str
    modification_level: str | None
    signer_key_id: str | None
    pades_baseline_b: bool
    summary: str
    level: str
    signing_time: dt.datetime | None = None  # from the signature's timestamp (B-T and up)
    failure: str | None = None  # the AdES validation's failure (B-LT and up)
    extra: dict[str, Any] = field(default_factory=dict)


def _asn1_key_id(cert: Any) -> str:
    public_key = serialization.load_der_public_key(cert.public_key.dump())
    return key_id_of(public_key)  # type: ignore[arg-type]


def _trust_roots(trusted: TrustedKeys, embedded_certs: list[Any]) -> list[Any]:
    """Returns the trusted certificates as asn1crypto certificates.

    A trusted bare public key (no certificate given) pins the embedded certificate that carries exactly that
    key, which then serves as the trust root.
    """
    from asn1crypto import x509 as asn1_x509

    roots = [asn1_x509.Certificate.load(c.public_bytes(serialization.Encoding.DER)) for c in trusted.certificates]
    bare = {key_id for key_id, entry in trusted.keys.items() if entry.certificate is None}
    return roots + [cert for cert in embedded_certs if cert is not None and _asn1_key_id(cert) in bare]


def _level(reader: Any, embedded: Any, after: list[Any]) -> str:
    from pyhanko.sign.validation import DocumentSecurityStore
    from pyhanko.sign.validation.errors import NoDSSFoundError

    unsigned = embedded.signer_info["unsigned_attrs"]
    types = {attr["type"].native for attr in unsigned} if unsigned else set()
    if "signature_time_stamp_token" not in types:
        return "B-B"
    try:
        DocumentSecurityStore.read_dss(reader)
    except NoDSSFoundError:
        return "B-T"
    return "B-LTA" if after else "B-LT"


def _basic_report(embedded: Any, roots: list[Any], level: str) -> PdfSignatureReport:
    """Validates a B-B or B-T signature at the present time, nothing fetched."""
    from pyhanko.sign.validation import validate_pdf_signature
    from pyhanko_certvalidator import ValidationContext

    context = ValidationContext(trust_roots=roots, allow_fetching=False, revocation_mode="soft-fail")
    status = run_off_loop(validate_pdf_signature, embedded, context)
    timestamp = status.timestamp_validity
    holds = timestamp is not None and timestamp.intact and timestamp.valid and timestamp.trusted
    signing_time = timestamp.timestamp if holds else None
    failure = None
    if timestamp is not None and not holds:
        failure = f"the signature's timestamp does not hold ({timestamp.summary()})"
    return _report(embedded, status, level, signing_time, failure)


def _lta_report(embedded: Any, roots: list[Any], level: str) -> PdfSignatureReport:
    """Validates a B-LT or B-LTA signature as PAdES-LTA with the PDF's validation data only."""
    from pyhanko.sign.ades.report import AdESPassed
    from pyhanko.sign.validation import ades
    from pyhanko.sign.validation.policy_decl import (
        CertificateFetchingRule,
        PdfSignatureValidationSpec,
        RevinfoOnlineFetchingRule,
        RevocationInfoGatheringSpec,
        SignatureValidationSpec,
    )
    from pyhanko_certvalidator.context import CertValidationPolicySpec
    from pyhanko_certvalidator.policy_decl import REQUIRE_REVINFO, CertRevTrustPolicy
    from pyhanko_certvalidator.registry import SimpleTrustManager

    policy = CertValidationPolicySpec(trust_manager=SimpleTrustManager.build(trust_roots=roots),
                                      revinfo_policy=CertRevTrustPolicy(REQUIRE_REVINFO))
    offline = RevocationInfoGatheringSpec(online_fetching_rule=RevinfoOnlineFetchingRule.LOCAL_ONLY,
                                          certificate_fetching_rule=CertificateFetchingRule.NEVER_FETCH)
    spec = PdfSignatureValidationSpec(SignatureValidationSpec(cert_validation_policy=policy,
                                                              revinfo_gathering_policy=offline))
    result = run_off_loop(asyncio.run, ades.ades_lta_validation(embedded, spec))
    status = result.api_status
    failure = None
    if result.ades_subindic != AdESPassed.OK:
        failure = f"{result.ades_subindic.name}: {result.failure_msg or 'no further detail'}"
        revoked = getattr(status, "revocation_details", None)
        if revoked is not None:
            whose = "a CA certificate of the signer's chain" if revoked.ca_revoked else "the signer's certificate"
            failure = (f"{whose} was revoked at {revoked.revocation_date.isoformat(timespec='seconds')} "
                       f"({revoked.revocation_reason.native}), and the PDF holds no proof that the signature existed "
                       f"before then ({failure})")
    timestamp = result.signature_timestamp_status
    signing_time = None
    if timestamp is not None and timestamp.ades_subindic == AdESPassed.OK and timestamp.api_status is not None:
        signing_time = timestamp.api_status.timestamp
    return _report(embedded, status, level, signing_time, failure)


def _report(embedded: Any, status: Any, level: str, signing_time: dt.datetime | None,
            failure: str | None) -> PdfSignatureReport:
    signed_attrs = embedded.signer_info["signed_attrs"]
    attr_types = {attr["type"].native for attr in signed_attrs} if signed_attrs else set()
    subfilter = str(embedded.sig_object.get("/SubFilter"))
    return PdfSignatureReport(
        field_name=embedded.field_name,
        intact=bool(status is not None and status.intact),
        valid=bool(status is not None and status.valid),
        trusted=bool(status is not None and status.trusted),
        coverage=status.coverage.name if status is not None and status.coverage is not None else "UNKNOWN",
        modification_level=(status.modification_level.name
                             if status is not None and status.modification_level is not None else None),
        signer_key_id=_asn1_key_id(embedded.signer_cert) if embedded.signer_cert is not None else None,
        pades_baseline_b=subfilter == PADES_SUBFILTER and "signing_certificate_v2" in attr_types,
        summary=status.summary() if status is not None else "no status",
        level=level, signing_time=signing_time, failure=failure,
    )


def check_pdf_signatures(reader: Any, trusted: TrustedKeys, result: Verification) -> str | None:
    """Adds to ``result`` what the PDF's signature shows; returns the signer's key id when all holds.

    Sets ``result.level`` and ``result.signing_time``. Fails closed: no signature, more than one, document
    timestamps before it, a signature or timestamp that is not intact, not valid or not trusted, one that is
    not PAdES, a PAdES-LTA validation that does not pass, or a last signature (or document timestamp) that does
    not cover the whole file (bytes appended after signing) each add a reason.
    """
    signatures = list(reader.embedded_signatures)
    record_signatures = [s for s in signatures if s.sig_object_type == "/Sig"]
    if not record_signatures:
        result.fail("the PDF carries no signature (a DRAFT record is never signed)")
        return None
    if len(record_signatures) > 1:
        result.fail(f"the PDF carries {len(record_signatures)} signatures; a quotecheck record carries exactly one")
    embedded = record_signatures[0]
    position = signatures.index(embedded)
    if position > 0:
        result.fail(f"the PDF has {position} document timestamps before its signature; a record's timestamps follow it")
    after = signatures[position + 1:]
    level = _level(reader, embedded, after)
    roots = _trust_roots(trusted, list(embedded.other_embedded_certs) + [embedded.signer_cert])
    report = (_lta_report if level in ("B-LT", "B-LTA") else _basic_report)(embedded, roots, level)
    result.level, result.signing_time = report.level, report.signing_time
    _judge(report, trusted, result)
    if level in ("B-B", "B-T"):
        coverage = embedded.evaluate_signature_coverage().name
        if coverage != "ENTIRE_FILE":
            result.fail(f"the signature covers {coverage.lower().replace('_', ' ')}, not the entire file: the PDF was "
                        "changed after signing")
    elif not reader.stream.getvalue().rstrip().endswith(b"%%EOF"):
        # What follows the signature is judged revision by revision (validation data and document timestamps
        # only, _judge); bytes after the last revision belong to none.
        result.fail("bytes follow the PDF's last revision: the signature and its timestamps do not cover the entire "
                    "file, the PDF was changed after signing")
    return report.signer_key_id if not result.reasons else None


def _judge(report: PdfSignatureReport, trusted: TrustedKeys, result: Verification) -> None:
    if not report.intact:
        result.fail("the PDF's signature is not intact: the signed bytes were changed after signing "
                    "(document digest does not match the signed digest)")
    elif not report.valid:
        result.fail("the PDF's signature does not verify (the CMS signature value is wrong for its signer)")
    if report.intact and report.valid:
        result.hold(f"PAdES signature {report.field_name} is intact and valid ({report.summary})")
    if not report.trusted and report.intact and report.valid:
        result.fail(f"the PDF's signer (key {report.signer_key_id}) does not chain to a trusted root "
                    f"(trusted: {trusted.describe()})")
    elif report.trusted:
        result.hold(f"signer key {report.signer_key_id} chains to a trusted root")
    if report.modification_level not in (None, "NONE", "LTA_UPDATES"):
        result.fail(f"the PDF was changed after signing beyond validation data and document timestamps "
                    f"(modification level {report.modification_level})")
    if report.failure:
        result.fail(f"PAdES {report.level} validation failed: {report.failure}")
    if not report.pades_baseline_b:
        result.fail("the signature is not PAdES baseline B-B (expected sub-filter ETSI.CAdES.detached with a "
                    "signing-certificate-v2 attribute)")
    elif not report.failure:
        result.hold(f"signature is PAdES {report.level}" + (
            f", signed at {report.signing_time.astimezone(dt.UTC).isoformat(timespec='seconds')} by the TSA's "
            "timestamp" if report.signing_time else ": no timestamp, the signing time is the signer's own claim"))

"""Records that stay verifiable for years: PAdES B-LTA and timestamped envelopes against a real loopback PKI.

The PKI is Certomancer's, served over HTTP on 127.0.0.1 (CA, OCSP responder, CRL and TSA): signing fetches the
timestamps, OCSP responses and CRLs from it as from any PKI. Verification is offline, with the root only.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import dataclasses
import datetime as dt
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from record_support import pdftotext

from service.record import SigningError, SigningKeys, TrustedKeys, sign_record
from service.record.envelope import verify_record
from service.record.timestamps import TimestampAuthority
from service.record.verify import verify_document

pytest.importorskip("certomancer", reason="certomancer (a dev dependency) serves the test PKI; pip install -e '.[dev]'")

from service.record.loopback_pki import LoopbackPki  # noqa: E402  (needs certomancer)


def _keys(pki: LoopbackPki) -> SigningKeys:
    return SigningKeys.from_files(pki.signer_chain_file, pki.signer_key_file).with_tsa(
        TimestampAuthority.from_settings(pki.tsa_url, str(pki.root_cert_file)))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackPki]:
    with LoopbackPki(tmp_path_factory.mktemp("pki")) as served:
        yield served


@pytest.fixture(scope="module")
def root(pki: LoopbackPki) -> TrustedKeys:
    """The verifier's only trust root: the PKI's root certificate."""
    return TrustedKeys.from_files([pki.root_cert_file])


@pytest.fixture(scope="module")
def lta_pdf(pki: LoopbackPki, approved: dict[str, Any]) -> tuple[bytes, dt.datetime, dt.datetime]:
    """The approved record's PDF signed against the PKI, with the times just before and after signing."""
    from service.record import record_pdf

    keys = _keys(pki)
    before = dt.datetime.now(dt.UTC)
    pdf = record_pdf(approved, keys, envelope=sign_record(approved, keys))
    return pdf, before, dt.datetime.now(dt.UTC)


def _pyhanko_lta(pdf: bytes, root_file: Path) -> Any:
    """Returns pyHanko's own PAdES-LTA validation of the PDF's signature, offline, trusting ``root_file`` only."""
    from pyhanko.keys import load_cert_from_pemder
    from pyhanko.pdf_utils.reader import PdfFileReader
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

    reader = PdfFileReader(BytesIO(pdf))
    policy = CertValidationPolicySpec(SimpleTrustManager.build(trust_roots=[load_cert_from_pemder(str(root_file))]),
                                      CertRevTrustPolicy(REQUIRE_REVINFO))
    spec = PdfSignatureValidationSpec(SignatureValidationSpec(
        policy, RevocationInfoGatheringSpec(RevinfoOnlineFetchingRule.LOCAL_ONLY,
                                            certificate_fetching_rule=CertificateFetchingRule.NEVER_FETCH)))
    return reader, asyncio.run(ades.ades_lta_validation(reader.embedded_signatures[0], spec))


def test_an_approved_record_pdf_is_pades_b_lta_in_pyhanko_with_the_tsas_signing_time(
        pki: LoopbackPki, root: TrustedKeys, lta_pdf: tuple[bytes, dt.datetime, dt.datetime], tmp_path: Path) -> None:
    from pyhanko.sign.ades.report import AdESPassed

    pdf, before, after = lta_pdf

    reader, lta = _pyhanko_lta(pdf, pki.root_cert_file)
    result = verify_document(pdf, root)

    assert [str(s.sig_object_type) for s in reader.embedded_signatures] == ["/Sig", "/DocTimeStamp"]
    assert "/DSS" in reader.root
    assert lta.ades_subindic == AdESPassed.OK, lta.failure_msg
    tst_time = lta.signature_timestamp_status.api_status.timestamp
    assert before - dt.timedelta(seconds=1) <= tst_time <= after + dt.timedelta(seconds=1)
    assert result.ok, result.all_reasons()
    assert (result.level, result.signing_time) == ("B-LTA", tst_time)
    assert any("PAdES B-LTA, signed at" in finding for finding in result.findings)
    # and the record says so, as poppler reads it
    text = " ".join(pdftotext(pdf, tmp_path).split())
    assert "Signed PAdES B-LTA: its signing time is an RFC 3161 timestamp" in text


def test_the_envelope_carries_the_signatures_timestamp_and_verifies_with_the_root_only(
        pki: LoopbackPki, root: TrustedKeys, approved: dict[str, Any]) -> None:
    before = dt.datetime.now(dt.UTC)
    envelope = sign_record(approved, _keys(pki))

    result = verify_record(envelope, root)

    assert result.ok, result.reasons
    assert result.level == "B-T" and result.signing_time is not None
    assert before - dt.timedelta(seconds=1) <= result.signing_time <= dt.datetime.now(dt.UTC)
    assert {"x5c", "timestamp"} <= set(envelope["signature"])


@pytest.mark.parametrize("where", [0.25, 0.5, 0.75])
def test_one_altered_byte_of_the_envelopes_timestamp_token_fails_with_a_reason(
        pki: LoopbackPki, root: TrustedKeys, approved: dict[str, Any], where: float) -> None:
    envelope = sign_record(approved, _keys(pki))
    token = bytearray(base64.b64decode(envelope["signature"]["timestamp"]))
    token[int(len(token) * where)] ^= 0x01
    altered = copy.deepcopy(envelope)
    altered["signature"]["timestamp"] = base64.b64encode(bytes(token)).decode()

    result = verify_record(altered, root)

    assert not result.ok
    assert any(reason.startswith("signature timestamp: ") for reason in result.reasons), result.reasons
    assert result.signing_time is None


@pytest.mark.parametrize("where", [0.1, 0.4, 0.7, 0.95])
def test_one_altered_byte_of_the_lta_pdf_fails_verification_with_a_reason(
        root: TrustedKeys, lta_pdf: tuple[bytes, dt.datetime, dt.datetime], where: float) -> None:
    pdf = bytearray(lta_pdf[0])
    pdf[int(len(pdf) * where)] ^= 0x01

    result = verify_document(bytes(pdf), root)

    assert not result.ok
    assert result.all_reasons() and all(reason.strip() for reason in result.all_reasons())


def test_bytes_appended_after_the_last_timestamp_are_refused(
        root: TrustedKeys, lta_pdf: tuple[bytes, dt.datetime, dt.datetime]) -> None:
    result = verify_document(lta_pdf[0] + b"\n% appended after signing\n", root)

    assert not result.ok
    assert any("not cover the entire file" in reason for reason in result.reasons), result.reasons


def test_without_a_tsa_the_record_is_b_b_and_says_its_time_is_the_signers_claim(
        approved: dict[str, Any], keys: SigningKeys, tmp_path: Path) -> None:
    from service.record import record_pdf

    pdf = record_pdf(approved, keys, envelope=sign_record(approved, keys))

    result = verify_document(pdf, keys.trusted())

    assert result.ok and (result.level, result.signing_time) == ("B-B", None)
    assert any("no timestamp" in finding for finding in result.findings)
    assert verify_record(sign_record(approved, keys), keys.trusted()).level == "B-B"
    # and the record itself says so, as poppler reads it
    text = " ".join(pdftotext(pdf, tmp_path).split())
    assert "Signed PAdES B-B: no time-stamping authority is configured" in text


def _signed_after_revocation_without_the_services_check(pdf: bytes, keys: SigningKeys, pki: LoopbackPki) -> bytes:
    """Returns ``pdf`` signed with a timestamp by the revoked key, plus the OCSP response and CRL the PKI serves
    now (they say revoked) in its DSS: what a signer that skips the revocation check would issue."""
    from pyhanko.keys import load_cert_from_pemder
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
    from pyhanko.pdf_utils.reader import PdfFileReader
    from pyhanko.sign import fields, signers
    from pyhanko.sign.validation.dss import DocumentSecurityStore
    from pyhanko_certvalidator import ValidationContext

    from service.record.pades import SIGNATURE_FIELD, _pyhanko_signer

    metadata = signers.PdfSignatureMetadata(field_name=SIGNATURE_FIELD, md_algorithm="sha256",
                                            subfilter=fields.SigSeedSubFilter.PADES)
    signed = signers.sign_pdf(IncrementalPdfFileWriter(BytesIO(pdf)), metadata, signer=_pyhanko_signer(keys),
                              timestamper=keys.tsa.timestamper()).getvalue()  # type: ignore[union-attr]
    root_cert = load_cert_from_pemder(str(pki.root_cert_file))
    embedded = PdfFileReader(BytesIO(signed)).embedded_signatures[0]
    context = ValidationContext(trust_roots=[root_cert], allow_fetching=True)

    async def fetch() -> tuple[Any, Any]:
        return (await context.async_retrieve_ocsps(embedded.signer_cert, root_cert),
                await context.async_retrieve_crls(embedded.signer_cert))

    ocsps, crls = asyncio.run(fetch())
    writer = IncrementalPdfFileWriter(BytesIO(signed))
    DocumentSecurityStore.supply_dss_in_writer(writer, embedded.pkcs7_content, certs=[root_cert], ocsps=ocsps,
                                               crls=crls)
    output = BytesIO()
    writer.write(output)
    return output.getvalue()


def test_revoking_the_signer_after_signing_keeps_the_old_record_valid_and_invalidates_a_later_one(
        tmp_path: Path, approved: dict[str, Any]) -> None:
    from service.record import record_pdf
    from service.record.render import draft_pdf

    with LoopbackPki(tmp_path / "pki") as pki:
        root = TrustedKeys.from_files([pki.root_cert_file])
        keys = _keys(pki)
        old = record_pdf(approved, keys, envelope=sign_record(approved, keys))
        revoked_at = pki.revoke()

        with pytest.raises(SigningError, match="PAdES signing failed"):
            record_pdf(approved, keys, envelope=sign_record(approved, dataclasses.replace(keys, tsa=None)))
        later = _signed_after_revocation_without_the_services_check(draft_pdf(approved), keys, pki)

    old_result, later_result = verify_document(old, root), verify_document(later, root)

    assert old_result.ok, old_result.all_reasons()
    assert old_result.level == "B-LTA" and old_result.signing_time < revoked_at
    assert later_result.level == "B-LT" and not later_result.ok
    assert any("the signer's certificate was revoked at" in reason for reason in later_result.reasons), \
        later_result.reasons


def test_a_new_document_timestamp_keeps_the_record_b_lta_and_valid(
        pki: LoopbackPki, root: TrustedKeys, lta_pdf: tuple[bytes, dt.datetime, dt.datetime]) -> None:
    from pyhanko.pdf_utils.reader import PdfFileReader

    from service.record.pades import add_document_timestamp

    pdf = lta_pdf[0]

    renewed = add_document_timestamp(pdf, _keys(pki))

    assert renewed.startswith(pdf)  # an incremental update: the signed bytes are untouched
    types = [str(s.sig_object_type) for s in PdfFileReader(BytesIO(renewed)).embedded_signatures]
    assert types == ["/Sig", "/DocTimeStamp", "/DocTimeStamp"]
    result, before = verify_document(renewed, root), verify_document(pdf, root)
    assert result.ok, result.all_reasons()
    assert result.level == "B-LTA" and result.signing_time == before.signing_time


def test_the_instances_own_self_signed_key_with_a_tsa_signs_b_lta(pki: LoopbackPki, approved: dict[str, Any],
                                                                 keys: SigningKeys, other_keys: SigningKeys) -> None:
    from service.record import record_pdf

    timestamped = keys.with_tsa(TimestampAuthority.from_settings(pki.tsa_url, str(pki.root_cert_file)))

    pdf = record_pdf(approved, timestamped, envelope=sign_record(approved, timestamped))

    result = verify_document(pdf, timestamped.trusted())
    assert result.ok and result.level == "B-LTA" and result.signing_time is not None, result.all_reasons()
    stranger = verify_document(pdf, other_keys.trusted().merged(TrustedKeys.from_files([pki.root_cert_file])))
    assert not stranger.ok and any("does not chain to a trusted root" in r for r in stranger.reasons)

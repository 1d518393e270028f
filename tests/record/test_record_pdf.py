"""The record PDF: PAdES signature valid under the service certificate, content readable, record attached."""

from __future__ import annotations

import json
import subprocess
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from record_support import RECORD_ID, WAIVER_JUSTIFICATION, pdftotext, require_tool

from service.record import SigningKeys, UnsignableRecord, record_digest, record_pdf, verify_document
from service.record.render import ATTESTATION_ATTACHMENT, DRAFT_ATTACHMENT, RECORD_ATTACHMENT
from service.record.verify import pdf_attachments


def _pyhanko_status(pdf: bytes, trust_root: SigningKeys) -> Any:
    from asn1crypto import x509 as asn1_x509
    from cryptography.hazmat.primitives import serialization
    from pyhanko.pdf_utils.reader import PdfFileReader
    from pyhanko.sign.validation import validate_pdf_signature
    from pyhanko_certvalidator import ValidationContext

    root = asn1_x509.Certificate.load(trust_root.certificate.public_bytes(serialization.Encoding.DER))
    (signature,) = PdfFileReader(BytesIO(pdf)).embedded_signatures
    context = ValidationContext(trust_roots=[root], allow_fetching=False)
    return signature, validate_pdf_signature(signature, context)


def test_pyhanko_reports_the_signature_intact_valid_and_trusted(signed_pdf: bytes,
                                                                  instance_keys: SigningKeys) -> None:
    signature, status = _pyhanko_status(signed_pdf, instance_keys)

    assert status.intact and status.valid and status.trusted and status.bottom_line
    assert status.coverage.name == "ENTIRE_FILE"
    assert str(signature.sig_object["/SubFilter"]) == "/ETSI.CAdES.detached"  # PAdES
    assert "signing_certificate_v2" in {a["type"].native for a in signature.signer_info["signed_attrs"]}  # B-B
    assert status.docmdp_ok is not False


def test_pyhanko_does_not_trust_another_root(signed_pdf: bytes, other_keys: SigningKeys) -> None:
    _, status = _pyhanko_status(signed_pdf, other_keys)

    assert status.intact and status.valid and not status.trusted


def test_verify_accepts_the_pdf_and_its_attachments(signed_pdf: bytes, approved: dict[str, Any],
                                                    instance_keys: SigningKeys) -> None:
    result = verify_document(signed_pdf, instance_keys.trusted())

    assert result.ok, result.all_reasons()
    assert result.record == approved
    assert result.record_digest == record_digest(approved)
    assert [part.subject for part in result.parts] == [f"attached {RECORD_ATTACHMENT}",
                                                       f"attached {ATTESTATION_ATTACHMENT}"]


def test_attached_record_json_verifies_on_its_own(signed_pdf: bytes, approved: dict[str, Any],
                                                  instance_keys: SigningKeys) -> None:
    attachments = pdf_attachments(signed_pdf)

    envelope = attachments[RECORD_ATTACHMENT]
    result = verify_document(envelope, instance_keys.trusted())

    assert result.ok, result.all_reasons()
    assert json.loads(envelope)["record"] == approved
    assert verify_document(attachments[ATTESTATION_ATTACHMENT], instance_keys.trusted()).ok


def test_pdftotext_reads_verdict_check_ids_digest_and_waiver(signed_pdf: bytes, approved: dict[str, Any],
                                                             tmp_path: Path) -> None:
    text = pdftotext(signed_pdf, tmp_path)

    assert f"Verdict: {approved['verdict'].upper()}" in text
    for check in approved["checks"]:
        assert check["id"] in text, check["id"]
    assert text.count(record_digest(approved)) >= int(_page_count(signed_pdf))  # footer of every page
    assert RECORD_ID in text
    assert approved["submission"]["vendor"] in text and approved["submission"]["quote_id"] in text
    assert "ada.approver" in text and "2026-11-29T16:20:00Z" in text
    assert " ".join(WAIVER_JUSTIFICATION.split()[:6]) in " ".join(text.split())
    assert "DRAFT" not in text


def test_every_page_renders_with_pdftoppm(signed_pdf: bytes, tmp_path: Path) -> None:
    tool = require_tool("pdftoppm")
    source = tmp_path / "record.pdf"
    source.write_bytes(signed_pdf)

    subprocess.run([tool, "-r", "12", "-png", str(source), str(tmp_path / "page")], check=True, timeout=120)

    pages = sorted(tmp_path.glob("page-*.png"))
    assert len(pages) == _page_count(signed_pdf) >= 3
    assert all(page.stat().st_size > 100 for page in pages)


def test_charts_are_drawn_where_evidence_exists(signed_pdf: bytes, approved: dict[str, Any], tmp_path: Path) -> None:
    text = pdftotext(signed_pdf, tmp_path)

    ids = {c["id"] for c in approved["checks"]}
    if "peak-memory" in ids:
        assert "GiB per GPU" in text
    if "rack-power" in ids:
        assert "kW per rack" in text


def test_draft_is_watermarked_unsigned_and_refused_by_verify(draft_pdf: bytes, evaluation: dict[str, Any],
                                                             instance_keys: SigningKeys, tmp_path: Path) -> None:
    text = pdftotext(draft_pdf, tmp_path)
    pages = text.split("\f")[:-1]

    assert all("DRAFT" in page for page in pages), "every page carries the DRAFT mark"
    assert "not approved, not signed" in text
    assert set(pdf_attachments(draft_pdf)) == {DRAFT_ATTACHMENT}
    result = verify_document(draft_pdf, instance_keys.trusted())
    assert not result.ok
    assert "the PDF carries no signature (a DRAFT record is never signed)" in result.reasons
    assert result.record == evaluation


def test_an_unapproved_record_is_never_signed(evaluation: dict[str, Any], keys: SigningKeys) -> None:
    with pytest.raises(UnsignableRecord, match="only an approved record is issued as a signed PDF"):
        record_pdf(evaluation, keys)


def test_changed_byte_of_the_signed_pdf_is_refused(signed_pdf: bytes, instance_keys: SigningKeys) -> None:
    for offset in (len(signed_pdf) // 3, len(signed_pdf) // 2):
        tampered = bytearray(signed_pdf)
        tampered[offset] ^= 0x01

        result = verify_document(bytes(tampered), instance_keys.trusted())

        assert not result.ok, offset
        assert result.all_reasons()


def test_appended_update_is_refused(signed_pdf: bytes, instance_keys: SigningKeys) -> None:
    """An incremental update after signing (e.g. a swapped attachment) leaves the signature intact but partial."""
    tampered = signed_pdf + b"\n% appended after signing\n"

    result = verify_document(tampered, instance_keys.trusted())

    assert not result.ok
    assert any("not the entire file" in reason for reason in result.reasons), result.reasons


def _page_count(pdf: bytes) -> int:
    from pyhanko.pdf_utils.reader import PdfFileReader

    return int(PdfFileReader(BytesIO(pdf)).root["/Pages"]["/Count"])


def test_the_signature_fits_the_space_reserved_from_the_certificate() -> None:
    """sign_pdf reserves the CMS container's space from the certificate's size (no dummy signature first)."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from pyhanko.pdf_utils.reader import PdfFileReader

    from service.record.keys import self_signed_certificate
    from service.record.pades import reserved_signature_bytes, sign_pdf
    from service.record.render import html_to_pdf

    private = ec.generate_private_key(ec.SECP256R1())
    keys = SigningKeys(private, self_signed_certificate(private, subject="quotecheck " + "x" * 53))  # 64, the most

    signed = sign_pdf(html_to_pdf("<p>one page</p>", []), keys, record_id="r" * 64)

    (signature,) = PdfFileReader(BytesIO(signed)).embedded_signatures
    assert 2 * len(signature.signed_data.dump()) <= reserved_signature_bytes(keys)
    _, status = _pyhanko_status(signed, keys)
    assert status.intact and status.valid and status.trusted and status.coverage.name == "ENTIRE_FILE"


def test_a_render_leaves_the_garbage_collector_as_it_found_it() -> None:
    """html_to_pdf pauses the cyclic collector while it renders and resumes it after, even when the render fails;
    a collector already paused by the caller stays paused."""
    import gc

    from service.record.render import FetchRefused, html_to_pdf

    assert gc.isenabled()
    html_to_pdf("<p>one page</p>", [])
    assert gc.isenabled()
    with pytest.raises(FetchRefused):
        html_to_pdf('<img src="https://example.invalid/x.png">', [])
    assert gc.isenabled()
    gc.disable()
    try:
        html_to_pdf("<p>one page</p>", [])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_render_leaves_no_cyclic_garbage_for_a_later_collection() -> None:
    """The render's objects in reference cycles are freed when html_to_pdf returns (by the young-generation
    pass after the pause), not promoted to wait for a full collection."""
    import gc

    from service.record.render import html_to_pdf

    html = "<h1>A</h1>" + "<p>line <b>of</b> text</p>" * 200
    html_to_pdf(html, [])
    gc.collect()
    html_to_pdf(html, [])
    assert gc.collect() < 1_000  # an unpaused render leaves tens of thousands

"""PAdES signing of the record PDF with pyHanko (its validation: service/record/pades_check.py).

The signature is a certification signature (DocMDP: no changes allowed) with sub-filter
ETSI.CAdES.detached and the signing-certificate-v2 attribute, i.e. PAdES baseline B-B (ETSI EN 319 142-1).
With a TSA configured (``SigningKeys.tsa``) it is PAdES B-LTA: the TSA's RFC 3161 timestamp on the signature
(B-T), the chain's certificates, OCSP responses and CRLs fetched at signing and stored in the document
security store (B-LT), and a document timestamp over all of it (B-LTA). DocMDP's "no changes" permits those
two additions (ISO 32000-2 §12.8.2.2.2), and nothing else.
"""

from __future__ import annotations

from io import BytesIO
from typing import Any

from cryptography.hazmat.primitives import serialization

from service.record.errors import SigningError
from service.record.keys import SigningKeys
from service.record.sync import run_off_loop

SIGNATURE_FIELD = "QuotecheckRecordSignature"
PADES_SUBFILTER = "/ETSI.CAdES.detached"
# Bytes of a B-B CMS container beyond the signer's certificate: the signed attributes (content type, digest,
# signing time, signing-certificate-v2, CMS algorithm protection; about 300 bytes), the signer info around
# them and the signature value (ECDSA P-256 at most 72 bytes, Ed25519 64; keys.algorithm_of admits no
# other): 2,048 is more than three times that. pyHanko refuses a container that does not fit (SigningError).
CMS_OVERHEAD_BYTES = 2_048
# The TSA's token in the signature's unsigned attributes: its TSTInfo and signed attributes (about 400 bytes),
# its signature and the TSA's certificates (one P-256 certificate is some 600 bytes, an RSA-4096 chain of three
# some 6,000): 16,384 leaves room for a TSA that sends its whole chain.
TIMESTAMP_TOKEN_BYTES = 16_384


def reserved_signature_bytes(keys: SigningKeys) -> int:
    """Returns the space to reserve for the CMS signature container, as hex (twice its DER bytes).

    Reserving it from the certificate's size spares pyHanko's estimate, which builds and signs a dummy
    container (a second CMS per PDF); the unused space is zero bytes inside the signature's /Contents.
    """
    certificates = sum(len(c.public_bytes(serialization.Encoding.DER)) for c in (keys.certificate, *keys.chain))
    return 2 * (certificates + CMS_OVERHEAD_BYTES + (TIMESTAMP_TOKEN_BYTES if keys.tsa else 0))


def _pyhanko_signer(keys: SigningKeys) -> Any:
    from asn1crypto import keys as asn1_keys
    from asn1crypto import x509 as asn1_x509
    from pyhanko.sign import signers
    from pyhanko_certvalidator.registry import SimpleCertificateStore

    cert, *chain = [asn1_x509.Certificate.load(c.public_bytes(serialization.Encoding.DER))
                    for c in (keys.certificate, *keys.chain)]
    private = asn1_keys.PrivateKeyInfo.load(keys.private_key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return signers.SimpleSigner(signing_cert=cert, signing_key=private,
                                cert_registry=SimpleCertificateStore.from_certs([cert, *chain]))


def _fetching_context(keys: SigningKeys) -> Any:
    """Returns the ValidationContext that gathers the validation data to embed: the chain's root and the TSA's
    roots are trusted, revocation information is fetched from the certificates' OCSP and CRL addresses, and a
    revoked certificate, or one whose status cannot be fetched, fails the signing."""
    from asn1crypto import x509 as asn1_x509
    from pyhanko_certvalidator import ValidationContext

    root = (keys.chain or (keys.certificate,))[-1]
    roots = [asn1_x509.Certificate.load(root.public_bytes(serialization.Encoding.DER))]
    return ValidationContext(trust_roots=roots + (keys.tsa.asn1_roots() if keys.tsa else []), allow_fetching=True,
                             revocation_mode="hard-fail")


def sign_pdf(pdf: bytes, keys: SigningKeys, *, record_id: str | None = None) -> bytes:
    """Returns ``pdf`` with a PAdES certification signature (no later changes permitted) by ``keys``: B-LTA when
    ``keys`` have a TSA, else B-B.

    The signing time in the signature dictionary is the clock's (pyHanko's); the record envelope inside
    carries the service's ``signed_at``, and with a TSA the signature's timestamp gives the trusted time.
    SigningError when the TSA, an OCSP responder or a CRL cannot be reached, or the certificate is revoked.
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
        **({"embed_validation_info": True, "use_pades_lta": True, "validation_context": _fetching_context(keys)}
           if keys.tsa else {}),
    )
    try:
        writer = IncrementalPdfFileWriter(BytesIO(pdf))
        output = run_off_loop(signers.sign_pdf, writer, metadata, signer=_pyhanko_signer(keys),
                              timestamper=keys.tsa.timestamper() if keys.tsa else None,
                              bytes_reserved=reserved_signature_bytes(keys))
    except Exception as error:
        raise SigningError(f"PAdES signing failed: {type(error).__name__}: {error}") from error
    return output.getvalue()


def add_document_timestamp(pdf: bytes, keys: SigningKeys) -> bytes:
    """Returns ``pdf`` with a new document timestamp from ``keys``' TSA after the validation data of its latest one.

    What keeps a B-LTA record verifiable past its last timestamp's certificate or algorithm (ETSI EN 319 142-1
    §5.5): the DSS gains the OCSP responses and CRLs of the last timestamp's TSA, fetched now, and a new
    document timestamp covers them. A PDF without a document timestamp gets its first. SigningError when no TSA
    is configured or it, an OCSP responder or a CRL cannot be reached.
    """
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
    from pyhanko.pdf_utils.reader import PdfFileReader
    from pyhanko.sign import signers

    if keys.tsa is None:
        raise SigningError("no TSA is configured (TSA_URL): there is nothing to timestamp with")
    stamper = signers.PdfTimeStamper(keys.tsa.timestamper())
    try:
        reader = PdfFileReader(BytesIO(pdf))
        if any(s.sig_object_type == "/DocTimeStamp" for s in reader.embedded_signatures):
            output = run_off_loop(stamper.update_archival_timestamp_chain, reader, _fetching_context(keys),
                                  in_place=False)
        else:
            output = run_off_loop(stamper.timestamp_pdf, IncrementalPdfFileWriter(BytesIO(pdf)), "sha256",
                                  validation_context=_fetching_context(keys))
    except Exception as error:
        raise SigningError(f"the document timestamp failed: {type(error).__name__}: {error}") from error
    return output.getvalue()

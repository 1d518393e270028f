"""Verification of whatever a user holds: a signed record JSON, a DSSE verdict attestation, or the record PDF.

Trust roots are always explicit (``TrustedKeys``); nothing falls back to a system trust store.
"""

from __future__ import annotations

import json
from collections import Counter
from io import BytesIO
from typing import Any

from service.record.attestation import RESULT_OF_VERDICT, verify_dsse
from service.record.canonical import record_digest
from service.record.envelope import verify_record
from service.record.errors import UnreadableDocument
from service.record.keys import TrustedKeys
from service.record.render import ATTESTATION_ATTACHMENT, DRAFT_ATTACHMENT, RECORD_ATTACHMENT
from service.record.verification import Verification

MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
MAX_NAME_TREE_DEPTH = 16
# What one stream of a PDF under verification may inflate to, and all of its streams together. A record
# PDF's largest stream (a font, the attached record) is well under 1 MiB; pyHanko's defaults for untrusted
# input (256 MiB a stream) would let a 2 MiB upload cost half a GiB of memory.
MAX_STREAM_DECODED_BYTES = 16 * 1024 * 1024
MAX_DOCUMENT_DECODED_BYTES = 64 * 1024 * 1024


def _pdf_reader(data: bytes) -> Any:
    """Returns a pyHanko reader of untrusted PDF ``data`` whose stream decoding is bounded (see above)."""
    from pyhanko.pdf_utils.decode_limits import DecodeLimits, DocumentDecodeBudget, StreamDecodeLimits
    from pyhanko.pdf_utils.reader import PdfFileReader

    limits = DecodeLimits(per_stream=StreamDecodeLimits(max_output_size=MAX_STREAM_DECODED_BYTES),
                          document_budget=DocumentDecodeBudget(base_allowance=MAX_DOCUMENT_DECODED_BYTES, max_ratio=0))
    return PdfFileReader(BytesIO(data), strict=False, decode_limits=limits)


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Two members of one name would let two verifiers see two different records under one signature.
    members = dict(pairs)
    if len(members) != len(pairs):  # counted only then: counting every object's names would be quadratic
        duplicated = sorted(name for name, count in Counter(name for name, _ in pairs).items() if count > 1)
        raise ValueError(f"duplicate member names {', '.join(duplicated)}")
    return members


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(data: bytes, origin: str = "document") -> Any:
    """Returns the JSON value in ``data`` (UTF-8, no duplicate member names, no NaN/Infinity).

    Raises UnreadableDocument when it is not such JSON.
    """
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
    except UnicodeDecodeError as error:
        raise UnreadableDocument(f"{origin} is not UTF-8 text: {error.reason} at byte {error.start}") from None
    except RecursionError:
        raise UnreadableDocument(f"{origin} nests arrays and objects too deeply to be read") from None
    except ValueError as error:
        raise UnreadableDocument(f"{origin} is not valid JSON: {error}") from None


def is_pdf(data: bytes) -> bool:
    """Returns True when ``data`` starts like a PDF file (``%PDF-``, ISO 32000 §7.5.2)."""
    return data[:1024].lstrip(b"\x00\t\n\r\f ").startswith(b"%PDF-")


def verify_document(data: bytes, trusted_keys: TrustedKeys, origin: str = "document") -> Verification:
    """Returns the verification of a signed record envelope, a DSSE envelope or a record PDF in ``data``.

    Raises UnreadableDocument when ``data`` is none of these (not a PDF, not JSON); any document that
    can be read but does not verify gives a Verification with ``ok`` False and its reasons.
    """
    if len(data) > MAX_DOCUMENT_BYTES:
        raise UnreadableDocument(f"{origin} is {len(data):,} bytes; the limit is {MAX_DOCUMENT_BYTES:,}")
    if not data.strip():
        raise UnreadableDocument(f"{origin} is empty")
    if is_pdf(data):
        return verify_pdf(data, trusted_keys)
    return verify_json(parse_json(data, f"{origin} (neither a PDF nor JSON)"), trusted_keys)


def verify_json(document: Any, trusted_keys: TrustedKeys) -> Verification:
    """Returns the verification of a parsed JSON document: a record envelope, a DSSE envelope, or neither."""
    if isinstance(document, dict) and "payloadType" in document:
        result, _statement = verify_dsse(document, trusted_keys)
        return result
    if isinstance(document, dict) and "record_version" in document and "signature" not in document:
        result = Verification("record envelope", record=document, record_digest=_digest_quietly(document))
        result.fail("this is an unsigned record (no signature envelope): there is nothing to verify it against")
        return result
    return verify_record(document, trusted_keys)


def _name_tree_leaves(node: Any, depth: int = 0) -> list[tuple[str, Any]]:
    if depth > MAX_NAME_TREE_DEPTH:
        raise ValueError("embedded-file name tree is nested too deeply")
    leaves = []
    names = node.get("/Names")
    if names is not None:
        for i in range(0, len(names) - 1, 2):
            leaves.append((str(names[i]), names[i + 1].get_object()))
    for kid in node.get("/Kids") or []:
        leaves += _name_tree_leaves(kid.get_object(), depth + 1)
    return leaves


def embedded_files(reader: Any) -> dict[str, bytes]:
    """Returns the embedded files of a PDF (pyHanko reader) by file name."""
    root = reader.root
    names = root.get("/Names")
    tree = names.get_object().get("/EmbeddedFiles") if names is not None else None
    if tree is None:
        return {}
    files = {}
    for name, spec in _name_tree_leaves(tree.get_object()):
        stream = spec.get("/EF", {}).get("/F")
        if stream is not None:
            files[str(spec.get("/UF") or spec.get("/F") or name)] = stream.get_object().data
    return files


def pdf_attachments(data: bytes) -> dict[str, bytes]:
    """Returns the files embedded in PDF ``data`` by name; UnreadableDocument when it cannot be parsed."""
    try:
        return embedded_files(_pdf_reader(data))
    except Exception as error:
        raise UnreadableDocument(f"the PDF cannot be parsed: {type(error).__name__}: {error}") from None


def verify_pdf(data: bytes, trusted_keys: TrustedKeys) -> Verification:
    """Returns the verification of a record PDF: its PAdES signature, then the record envelope and attestation in it.

    The PDF is valid only when its single PAdES signature is intact, valid, chains to a trusted root and
    covers the whole file, the attached record envelope verifies with the same key, and the attached
    verdict attestation (when present) verifies and agrees with the record.
    """
    from service.record.pades import check_pdf_signatures

    result = Verification("PDF")
    try:
        reader = _pdf_reader(data)
        signer_key_id = check_pdf_signatures(reader, trusted_keys, result)
        files = embedded_files(reader)
    except Exception as error:  # a damaged PDF is an invalid one: say so rather than crash
        result.fail(f"the PDF cannot be parsed or its signature cannot be read ({type(error).__name__}: {error}); "
                    "it is damaged or was altered")
        return result
    result.key_id = signer_key_id

    if RECORD_ATTACHMENT not in files:
        if DRAFT_ATTACHMENT in files:
            result.fail(f"the PDF carries only an unsigned DRAFT record ({DRAFT_ATTACHMENT}); it was never approved")
            result.record = _parse_quietly(files[DRAFT_ATTACHMENT])
            result.record_digest = _digest_quietly(result.record) if result.record else None
        else:
            result.fail(f"the PDF has no attached record {RECORD_ATTACHMENT} (found: {', '.join(files) or 'none'})")
        return result
    try:
        envelope = parse_json(files[RECORD_ATTACHMENT], RECORD_ATTACHMENT)
    except UnreadableDocument as error:
        result.fail(str(error))
        return result
    record_check = verify_record(envelope, trusted_keys)
    record_check.subject = f"attached {RECORD_ATTACHMENT}"
    result.parts.append(record_check)
    result.record, result.record_digest = record_check.record, record_check.record_digest
    if signer_key_id and record_check.key_id and signer_key_id != record_check.key_id:
        result.fail(f"the record envelope is signed by key {record_check.key_id}, the PDF by key {signer_key_id}; "
                    "expected one key")
    if ATTESTATION_ATTACHMENT in files and record_check.record is not None:
        result.parts.append(_check_attestation(files[ATTESTATION_ATTACHMENT], record_check.record, trusted_keys))
    return result


def _parse_quietly(data: bytes) -> dict[str, Any] | None:
    try:
        value = parse_json(data)
    except UnreadableDocument:
        return None
    return value if isinstance(value, dict) else None


def _digest_quietly(document: dict[str, Any]) -> str | None:
    try:
        return record_digest(document)
    except Exception:  # a value RFC 8785 cannot represent; the digest is only informative here
        return None


def _check_attestation(data: bytes, record: dict[str, Any], trusted_keys: TrustedKeys) -> Verification:
    try:
        envelope = parse_json(data, ATTESTATION_ATTACHMENT)
    except UnreadableDocument as error:
        failed = Verification(f"attached {ATTESTATION_ATTACHMENT}")
        failed.fail(str(error))
        return failed
    result, statement = verify_dsse(envelope, trusted_keys)
    result.subject = f"attached {ATTESTATION_ATTACHMENT}"
    if statement is None:
        return result
    subjects = statement.get("subject") or [{}]
    found = (subjects[0].get("digest") or {}).get("sha256")
    expected = record["submission"]["digest"].removeprefix("sha256:")
    if found != expected:
        result.fail(f"attestation subject sha256:{found} is not the record's submission digest sha256:{expected}")
    predicate = statement.get("predicate") or {}
    if predicate.get("result") != RESULT_OF_VERDICT.get(record.get("verdict")):
        result.fail(f"attestation result {predicate.get('result')} does not match the record verdict "
                    f"{record.get('verdict')}")
    digests = [c.get("digest", {}).get("sha256") for c in predicate.get("configuration") or []
               if c.get("name") == "commissioning-record"]
    if digests != [record_digest(record).removeprefix("sha256:")]:
        result.fail(f"attestation names record digest {digests} but the attached record is {record_digest(record)}")
    if not result.reasons:
        result.hold("attestation subject, result and record digest agree with the record")
    return result

"""Verification of whatever a user holds: a signed record JSON, a DSSE verdict attestation, or the record PDF.

Trust roots are always explicit (``TrustedKeys``); nothing falls back to a system trust store.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from io import BytesIO
from typing import Any

from service.record.attestation import RESULT_OF_VERDICT, verify_dsse
from service.record.canonical import SAFE_INTEGER, record_digest
from service.record.envelope import certified_signer, verify_record
from service.record.errors import UnreadableDocument
from service.record.keys import TrustedKeys
from service.record.render import ADDENDUM_ATTACHMENT, ATTESTATION_ATTACHMENT, DRAFT_ATTACHMENT, RECORD_ATTACHMENT
from service.record.verification import Verification, is_addendum

logger = logging.getLogger(__name__)

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


def _double_of_integer(text: str) -> int | float:
    # I-JSON (RFC 7493 §2.2): a number is a double; an integer beyond ±(2^53 - 1) is read as the double it
    # denotes, as JavaScript's JSON.parse reads it (RFC 8785 writes the double 9.11068987392e20 as
    # 911068987392000000000).
    value = int(text)
    if -SAFE_INTEGER <= value <= SAFE_INTEGER:
        return value
    return _double_of_number(text)


def _double_of_number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]}{'…' if len(text) > 40 else ''} is beyond the range of JSON "
                         "numbers (IEEE 754 doubles)")
    return value


def parse_json(data: bytes, origin: str = "document") -> Any:
    """Returns the JSON value in ``data`` (UTF-8, no duplicate member names, no NaN/Infinity), numbers as I-JSON.

    Every number is read as the double it denotes (integers within ±(2^53 - 1) stay ints, which RFC 8785
    writes identically), so what verification canonicalises is what any conforming reader holds. Raises
    UnreadableDocument when it is not such JSON or holds a number beyond the range of doubles.
    """
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant,
                          parse_int=_double_of_integer, parse_float=_double_of_number)
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
    document = None if is_pdf(data) else parse_json(data, f"{origin} (neither a PDF nor JSON)")
    try:
        return verify_pdf(data, trusted_keys) if document is None else verify_json(document, trusted_keys)
    except Exception as error:  # noqa: BLE001 - fail closed: a verifier that stops half-way has verified nothing
        logger.exception("verification of %s stopped on an unexpected error", origin)
        result = Verification("PDF" if document is None else "JSON document")
        result.fail(f"verification could not be completed ({type(error).__name__}: {error}); the document is "
                    "treated as invalid")
        return result


def verify_json(document: Any, trusted_keys: TrustedKeys) -> Verification:
    """Returns the verification of a parsed JSON document: a record envelope, a DSSE envelope, or neither."""
    if isinstance(document, dict) and "payloadType" in document:
        result, _statement = verify_dsse(document, trusted_keys)
        return result
    if isinstance(document, dict) and "signature" not in document and (
            "record_version" in document or is_addendum(document)):
        what = "as-built addendum" if is_addendum(document) else "record"
        result = Verification(f"{what} envelope", record=document, record_digest=_digest_quietly(document))
        result.fail(f"this is an unsigned {what} (no signature envelope): there is nothing to verify it against")
        return result
    result = verify_record(document, trusted_keys)
    if is_addendum(result.record):
        result.subject = "as-built addendum envelope"
    return result


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
    from service.record.pades_check import check_pdf_signatures

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

    attached = RECORD_ATTACHMENT if RECORD_ATTACHMENT in files or ADDENDUM_ATTACHMENT not in files \
        else ADDENDUM_ATTACHMENT
    if attached not in files:
        if DRAFT_ATTACHMENT in files:
            result.fail(f"the PDF carries only an unsigned DRAFT record ({DRAFT_ATTACHMENT}); it was never approved")
            result.record = _parse_quietly(files[DRAFT_ATTACHMENT])
            result.record_digest = _digest_quietly(result.record) if result.record else None
        else:
            result.fail(f"the PDF has no attached record {RECORD_ATTACHMENT} (found: {', '.join(files) or 'none'})")
        return result
    try:
        envelope = parse_json(files[attached], attached)
    except UnreadableDocument as error:
        result.fail(str(error))
        return result
    record_check = verify_record(envelope, trusted_keys)
    record_check.subject = f"attached {attached}"
    if (attached == ADDENDUM_ATTACHMENT) != is_addendum(record_check.record):
        result.fail(f"the attached {attached} holds {'no ' if attached == ADDENDUM_ATTACHMENT else 'an '}as-built "
                    "addendum")
    result.parts.append(record_check)
    result.record, result.record_digest = record_check.record, record_check.record_digest
    if signer_key_id and record_check.key_id and signer_key_id != record_check.key_id:
        result.fail(f"the record envelope is signed by key {record_check.key_id}, the PDF by key {signer_key_id}; "
                    "expected one key")
    if ATTESTATION_ATTACHMENT in files and record_check.record is not None:
        signer_trust = certified_signer(envelope, trusted_keys) if record_check.ok else trusted_keys
        result.parts.append(_check_attestation(files[ATTESTATION_ATTACHMENT], record_check.record, signer_trust))
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


def _member(node: Any, *path: str | int) -> Any:
    """Returns the member at ``path`` of parsed JSON ``node``, or None where the document has another shape."""
    for step in path:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and len(node) > step else None
        else:
            node = node.get(step) if isinstance(node, dict) else None
    return node


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
    found = _member(statement, "subject", 0, "digest", "sha256")
    submission_digest = _member(record, "submission", "digest")
    expected = submission_digest.removeprefix("sha256:") if isinstance(submission_digest, str) else None
    if found != expected or expected is None:
        result.fail(f"attestation subject sha256:{found} is not the record's submission digest sha256:{expected}")
    verdict = record.get("verdict")
    if _member(statement, "predicate", "result") != RESULT_OF_VERDICT.get(verdict if isinstance(verdict, str) else ""):
        result.fail(f"attestation result {_member(statement, 'predicate', 'result')} does not match the record "
                    f"verdict {verdict}")
    configuration = _member(statement, "predicate", "configuration")
    digests = [_member(c, "digest", "sha256") for c in configuration if _member(c, "name") == "commissioning-record"] \
        if isinstance(configuration, list) else []
    attached = _digest_quietly(record)
    if attached is None or digests != [attached.removeprefix("sha256:")]:
        result.fail(f"attestation names record digest {digests} but the attached record is {attached}")
    if not result.reasons:
        result.hold("attestation subject, result and record digest agree with the record")
    return result

"""The signed commissioning record: canonical JSON, signed envelope, in-toto/DSSE verdict, PDF, verification.

What the API wires (service/api/records.py, service/api/keys.py; docs/records.md "Over HTTP"):

- ``GET /api/v1/records/{id}.json``  → the envelope ``sign_record(record, signing_keys(app))`` made when the
  approved record was issued (service.approval.record_store), stored and served as it is
- ``GET /api/v1/records/{id}.pdf``   → ``service.approval.record_store.issue_signed_pdf`` (``signed_pdf`` with the
  stored envelope, stored when first rendered; the PDF task calls it too) when approved, else ``draft_pdf``
- ``POST /api/v1/records/verify``    → ``verify_document(body_bytes, signing_keys(app).trusted()).as_dict()``
- ``GET /api/v1/keys``               → ``public_keys_document(signing_keys(app))``

Heavy modules (WeasyPrint, pyHanko) are imported only when a PDF is rendered or checked.
"""

from __future__ import annotations

from typing import Any

from service.record.attestation import pae, sign_dsse, verdict_statement, verify_dsse
from service.record.canonical import canonical_bytes, is_approved, record_digest
from service.record.envelope import sign_record, verify_record
from service.record.errors import SigningError, UnreadableDocument, UnsignableRecord
from service.record.keys import SigningKeys, TrustedKey, TrustedKeys, key_id_of, public_keys_document
from service.record.timestamps import TimestampAuthority
from service.record.verification import Verification

EXTENSION = "quotecheck.signing"

__all__ = [
    "SigningError", "SigningKeys", "TrustedKey", "TrustedKeys", "UnreadableDocument", "UnsignableRecord",
    "Verification", "canonical_bytes", "draft_pdf", "is_approved", "key_id_of", "pae", "public_keys_document",
    "record_digest", "record_pdf", "sign_dsse", "sign_record", "signed_pdf", "signing_keys", "verdict_statement",
    "verify_document", "verify_dsse", "verify_record", "init_app",
]


def __getattr__(name: str) -> Any:
    # The PDF side pulls in WeasyPrint and pyHanko; import it on first use, not with the package.
    if name in ("record_pdf", "draft_pdf", "signed_pdf", "record_html"):
        from service.record import render

        return getattr(render, name)
    if name in ("verify_document", "verify_pdf", "pdf_attachments"):
        from service.record import verify

        return getattr(verify, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_signing_keys(config: dict[str, Any], instance_path: str) -> SigningKeys:
    """Returns the configured signing keys: SIGNING_CERT_FILE + SIGNING_KEY_FILE when set, else the instance folder's,
    timestamping with the TSA of TSA_URL and TSA_TRUST_ROOT_FILE when set.

    ``SIGNING_KEY_PASSWORD`` (str) decrypts an encrypted configured key. Setting only one of the two files
    is an error, not a silent fallback to a generated key.
    """
    tsa = TimestampAuthority.from_settings(config.get("TSA_URL"), config.get("TSA_TRUST_ROOT_FILE"))
    return _signing_key_files(config, instance_path).with_tsa(tsa)


def _signing_key_files(config: dict[str, Any], instance_path: str) -> SigningKeys:
    cert_file, key_file = config.get("SIGNING_CERT_FILE"), config.get("SIGNING_KEY_FILE")
    if cert_file or key_file:
        if not (cert_file and key_file):
            raise SigningError("set both SIGNING_CERT_FILE and SIGNING_KEY_FILE, or neither (to use the key "
                               "generated in the instance folder)")
        password = config.get("SIGNING_KEY_PASSWORD")
        if password is not None and not isinstance(password, str):
            raise SigningError(f"SIGNING_KEY_PASSWORD must be a string, found {type(password).__name__} (in the "
                               "environment, JSON-quote it: QUOTECHECK_SIGNING_KEY_PASSWORD='\"...\"')")
        return SigningKeys.from_files(cert_file, key_file, password.encode() if password else None)
    return SigningKeys.load_or_create(instance_path)


def init_app(app: Any) -> None:
    """Registers the signing subsystem on a Flask app and, when SIGNING_KEYS_AT_START (the default), loads its keys.

    Loading at start makes a bad configuration stop the process instead of the first approval, and generates
    the instance folder's key before any request needs it. Processes that start at once (gunicorn workers)
    serialise on the key folder's lock file, so exactly one of them generates the key and the others load it.
    """
    app.extensions.setdefault(EXTENSION, None)
    if app.config.get("SIGNING_KEYS_AT_START", True):
        signing_keys(app)


def signing_keys(app: Any = None) -> SigningKeys:
    """Returns the app's signing keys (``current_app`` when ``app`` is None), loading them once per app."""
    if app is None:
        from flask import current_app

        app = current_app._get_current_object()
    keys = app.extensions.get(EXTENSION)
    if keys is None:
        keys = load_signing_keys(app.config, app.instance_path)
        app.extensions[EXTENSION] = keys
    return keys

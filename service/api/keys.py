"""Keys: the public half of the record signing key, for anyone to verify records offline."""

from __future__ import annotations

import hashlib
import json

from flask import Blueprint, Response, current_app, request

from service.accounts.auth import public
from service.openapi import operation
from service.record import public_keys_document, signing_keys

bp = Blueprint("keys", __name__, url_prefix="/api/v1/keys")


@bp.get("")
@operation(tag="records", responses={200: ("The public keys and certificates that verify issued records", "PublicKeys"),
                                     304: ("Not modified: If-None-Match names the current ETag", None)},
           response_headers={200: ("ETag",)})
@public
def get_keys() -> Response:
    """Read the public keys that verify signed records, attestations and PDFs (no token needed).

    Each key has its id (`sha256:` + SHA-256 of the DER SubjectPublicKeyInfo, as in a signature's
    `key_id`), algorithm, public key and certificate (PEM). Pin the key id or the certificate, then
    verify offline: `quotecheck verify record.pdf --key record-signing.cert.pem`. A certificate a CA
    issued comes with `chain_pem` (its issuers up to the root: pass the root to `--key`), and where
    records are timestamped (PAdES B-LTA) `tsa_trust_roots_pem` gives the TSA's roots.
    """
    body = json.dumps(public_keys_document(signing_keys()), ensure_ascii=False).encode()
    response = current_app.response_class(body, status=200, mimetype="application/json")
    response.headers["ETag"] = '"' + hashlib.sha256(body).hexdigest() + '"'
    return response.make_conditional(request)

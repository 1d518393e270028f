"""Records: the signed record (JSON and PDF), its verification, and the purchase orders linked to it.

An approved final record is signed once, when it is issued, and its envelope is stored; reads return the
stored bytes, so the same request always gets the same body and ETag. Any other record is returned
unsigned and marked ``Record-Status: draft``. Linking a purchase order issues the next version of the
final record (signed, superseding the previous one); every version stays readable by its id.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, Response, current_app, request

from service.accounts.auth import current_actor, public, require
from service.api_schemas.bodies import PURCHASE_ORDER_BODY
from service.app.records import link_purchase_order as link
from service.app.records import purchase_order_link, read_record, read_record_pdf
from service.app.responses import pdf_response, prefers_async, record_response
from service.http import now
from service.identifiers import body_digest
from service.inputs import accepts
from service.openapi import operation
from service.record import signing_keys, verify_document

bp = Blueprint("records", __name__, url_prefix="/api/v1/records")

NOT_MODIFIED = {304: ("Not modified: If-None-Match names the current ETag", None)}
RECORD_HEADERS = ("ETag", "Record-Status", "Link")


@bp.get("/<record_id>.json")
@operation(tag="records", errors=(404,),
           responses={200: ("The signed envelope of an approved record, else the unsigned record (a draft)",
                            "RecordRepresentation"), **NOT_MODIFIED},
           response_headers={200: RECORD_HEADERS})
@require("read")
def get_record(record_id: str) -> Response:
    """Read a record: an approved one as its signed envelope, any other unsigned and marked as a draft.

    An approved final record is returned as `{"record", "signature"}`, signed when it was issued; verify it
    offline with a key of `GET /api/v1/keys`. An evaluation record, or the record of a rejected quote, is
    returned as the record itself with `Record-Status: draft`. The body is RFC 8785 canonical JSON and
    never changes for a given record id, so its ETag is stable (If-None-Match gives 304). A final record
    superseded by a later version (a purchase order was linked) links to it with `Link: rel="latest-version"`.
    """
    return record_response(read_record(current_actor(), record_id, now()))


PREFER_PARAMETER = {"name": "Prefer", "in": "header", "required": False, "schema": {"type": "string"},
                    "description": "`respond-async` (RFC 7240): render an approved record's signed PDF that was "
                                   "not rendered yet in a background task and answer 202 with the task (with "
                                   "a broker configured that is what happens without the header too)"}


@bp.get("/<record_id>.pdf")
@operation(tag="records", errors=(404, 429, 503), media_type="application/pdf", parameters=(PREFER_PARAMETER,),
           responses={200: ("The signed PDF of an approved record, else an unsigned DRAFT", "Pdf"), **NOT_MODIFIED,
                      202: ("The signed PDF is not rendered yet and a worker renders it (a broker is configured, "
                            "or `Prefer: respond-async`): the task that renders and stores it (`Location`); then "
                            "GET this URL again", "Task", "application/json")},
           response_headers={200: (*RECORD_HEADERS, "Content-Disposition"), 202: ("Location", "Preference-Applied")})
@require("read")
def get_record_pdf(record_id: str) -> Response:
    """Read a record as PDF: signed (PAdES) when approved, otherwise an unsigned DRAFT.

    The signed PDF is rendered once, stored, and served unchanged from then on: its digest is in the
    audit log (`record.pdf_issued`). It carries the record's signed envelope as issued and the DSSE
    verdict attestation. When a broker is configured, a signed PDF not rendered yet is rendered by a
    worker: 202 with the task (`Location`, `GET /api/v1/tasks/{id}`), whose result links back here; ask
    again then. Without a broker it is rendered for the request (about a second), unless the request says
    `Prefer: respond-async`, which gives the 202 and the task too. A record that is not approved is a
    DRAFT (watermarked, unsigned), rendered on its first request, stored, and served from then on with an
    ETag; free text in it is cut at fixed bounds with a note (the attached JSON holds it whole).
    """
    return pdf_response(read_record_pdf(current_actor(), record_id, now, prefers_async()))


@bp.post("/verify")
@operation(tag="records",
           request_content={"application/json": "SignedDocument",
                            "application/vnd.dsse.envelope.v1+json": "DsseEnvelope", "application/pdf": "Pdf"},
           responses={200: ("The verification: `ok`, and the reasons when it is not valid", "Verification")})
@public
def verify_record() -> Response:
    """Verify a signed record or as-built addendum, a DSSE verdict attestation or a record PDF with this service's keys.

    The body is the document's bytes as they are (any Content-Type; at most MAX_CONTENT_LENGTH bytes). A
    document that can be read gets 200 whether it verifies or not: `ok` says which, `reasons` say why not
    (a changed byte, an unknown key, a DRAFT PDF, an unsigned record). A body that is neither JSON nor a
    PDF gets 422. Offline, `quotecheck verify FILE --key KEY` does the same with a key from GET /api/v1/keys.
    """
    data = request.get_data(cache=False)
    result = verify_document(data, signing_keys().trusted(), origin="the request body")
    return current_app.response_class(json.dumps(result.as_dict(), ensure_ascii=False), status=200,
                                      mimetype="application/json")


@bp.post("/<record_id>/purchase-orders")
@operation(tag="records", errors=(404, 409),
           responses={201: ("Linked: a new version of the record, signed, lists the order", "PurchaseOrderLink"),
                      200: ("Already linked: nothing changed; the newest version lists the order",
                            "PurchaseOrderLink")},
           response_headers={201: ("Location",), 200: ("Location",)})
@require("link-purchase-order")
@accepts(PURCHASE_ORDER_BODY)
def link_purchase_order(record_id: str, body: dict[str, Any]) -> Response:
    """Link a purchase order to an approved record; this issues a new signed version of the record.

    The record (any version of an approved final record) is re-issued with the order added to
    `purchase_orders`: a new record id, `issue` one higher, `supersedes` naming the previous version by id
    and digest, signed like the first. Earlier versions stay readable and verifiable. Linking the same
    (po_number, system) again changes nothing and returns 200. Any record that is not approved gets 409.
    No If-Match: links only add, so concurrent links cannot overwrite each other; they queue and each
    extends the newest version.
    """
    actor = current_actor()
    po_number, system = body["po_number"], body["system"]
    moment = now()
    record, linked = link(actor, record_id, po_number, system, body_digest(body), signing_keys(), moment)
    view = purchase_order_link(record, po_number, system, linked)
    response = current_app.response_class(json.dumps(view, ensure_ascii=False), status=201 if linked else 200,
                                          mimetype="application/json")
    response.headers["Location"] = view["links"]["record"]
    return response

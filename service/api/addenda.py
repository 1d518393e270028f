"""As-built addenda of approved records, and the calibration of the estimators they measured.

``POST /api/v1/records/{id}/addenda`` attaches acceptance-test measurements to an approved record: the
approved submission is re-evaluated with them merged in, and the signed addendum (the record's envelope
shape, schemas/addendum.schema.json) puts each check's original and as-built result side by side. The
record itself never changes. ``GET /api/v1/calibration`` summarises measured / estimated per estimator.
"""

from __future__ import annotations

import hashlib
from typing import Any

from flask import Blueprint, Response, current_app, request

from service.accounts.auth import current_actor, require
from service.api_schemas.addenda import ADDENDUM_REQUEST, ADDENDUM_REQUEST_DOCUMENTED
from service.app import addenda
from service.app.addenda import SignedAddendum
from service.http import json_response, now
from service.identifiers import body_digest
from service.inputs import Body, accepts
from service.openapi import operation
from service.record import canonical_bytes

bp = Blueprint("addenda", __name__, url_prefix="/api/v1")

ADDENDUM_BODY = Body("AddendumRequest", "addendum", ADDENDUM_REQUEST,
                     documented=ADDENDUM_REQUEST_DOCUMENTED)
SIGNED = "signed"


def _envelope_response(signed: SignedAddendum, status: int) -> Response:
    body = canonical_bytes(signed.envelope)
    response = current_app.response_class(body, status=status, mimetype="application/json")
    response.headers["ETag"] = '"' + hashlib.sha256(body).hexdigest() + '"'
    response.headers["Record-Status"] = SIGNED
    if request.method == "POST":
        response.headers["Location"] = addenda.self_link(signed.record_id, signed.addendum_id)
        return response
    return response.make_conditional(request)


@bp.post("/records/<record_id>/addenda")
@operation(tag="records", errors=(404, 409),
           responses={201: ("Attached: the signed as-built addendum", "SignedAddendum"),
                      200: ("The same measurements and note were attached to this record before: that addendum, "
                            "unchanged", "SignedAddendum")},
           response_headers={201: ("Location", "ETag", "Record-Status"), 200: ("Location", "ETag", "Record-Status")})
@require("attach-as-built")
@accepts(ADDENDUM_BODY)
def attach_addendum(record_id: str, body: dict[str, Any]) -> Response:
    """Attach acceptance-test measurements to an approved record as a signed as-built addendum.

    `measurements` is a submission's `measurements` object (nccl-tests runs, peak memory, scaling points,
    storage, sustained power, a restore test, serving latencies); each member given replaces the
    submitted one (RFC 7396). The approved submission is re-evaluated with them by this service's engine
    and policy, so each check is re-decided on measured basis where the measurements apply. The addendum
    names the record by id and digest and lists, per check, the record's status and deciding figures beside
    the as-built ones, and per estimator the estimate beside the measurement (stored for `GET
    /api/v1/calibration`). It is signed in the record envelope; the record itself never changes. Any record
    that is not an approved final record gets 409; measurements that decide nothing in the record get 422;
    whoever submitted or revised the quote gets 403. No If-Match: addenda only add.
    """
    signed, issued = addenda.attach(current_actor(), record_id, body["measurements"], body.get("note"),
                                    body_digest(body), now())
    return _envelope_response(signed, 201 if issued else 200)


@bp.get("/records/<record_id>/addenda")
@operation(tag="records", errors=(404,), responses={200: ("The addenda of the record", "AddendumList")})
@require("read")
def list_addenda(record_id: str) -> Response:
    """List the as-built addenda of a record: those of every version of its final record, oldest first.

    Each item names the version it was attached to, its verdict beside the record's, the checks whose
    status changed, and the estimators it measured; `links.self` is the signed addendum. An evaluation
    record or a rejected quote's record has none.
    """
    items = addenda.summaries(current_actor(), record_id)
    return json_response({"record_id": record_id, "items": items, "total": len(items)})


@bp.get("/records/<record_id>/addenda/<addendum_id>")
@operation(tag="records", errors=(404,),
           responses={200: ("The signed as-built addendum", "SignedAddendum"),
                      304: ("Not modified: If-None-Match names the current ETag", None)},
           response_headers={200: ("ETag", "Record-Status")})
@require("read")
def get_addendum(record_id: str, addendum_id: str) -> Response:
    """Read one as-built addendum: its signed envelope, as stored (RFC 8785 bytes, a stable ETag).

    Verify it offline with a key of `GET /api/v1/keys` (`quotecheck verify FILE --key KEY`) or with
    `POST /api/v1/records/verify`.
    """
    return _envelope_response(addenda.read(current_actor(), record_id, addendum_id), 200)


@bp.get("/records/<record_id>/addenda/<addendum_id>.pdf")
@operation(tag="records", errors=(404,), media_type="application/pdf",
           responses={200: ("The signed PDF of the as-built addendum", "Pdf"),
                      304: ("Not modified: If-None-Match names the current ETag", None)},
           response_headers={200: ("ETag", "Record-Status", "Content-Disposition")})
@require("read")
def get_addendum_pdf(record_id: str, addendum_id: str) -> Response:
    """Read one as-built addendum as a signed PDF: PAdES (B-LTA when the service has a TSA), its signed envelope
    attached as issued; rendered on the first request, stored, and served unchanged from then on.

    Verify it offline like the record's PDF (`quotecheck verify FILE --key KEY`).
    """
    stored = addenda.pdf(current_actor(), record_id, addendum_id, now())
    response = current_app.response_class(stored.pdf, status=200, mimetype="application/pdf")
    response.headers["ETag"] = '"' + stored.pdf_digest.removeprefix("sha256:") + '"'
    response.headers["Record-Status"] = SIGNED
    response.headers["Content-Disposition"] = f'attachment; filename="addendum-{addendum_id}.pdf"'
    return response.make_conditional(request)


@bp.get("/calibration")
@operation(tag="records", responses={200: ("Measured / estimated per estimator, over every addendum",
                                           "Calibration")})
@require("read")
def get_calibration() -> Response:
    """Read how each estimator compared with measurement: count, median and worst ratio measured / estimated.

    One row per estimator, named by the evidence figure it produces (`peak-memory total_gib`,
    `interconnect-scaling cluster_busbw_gbs`, `checkpoint-bandwidth write_gbs`, `rack-power site_kw`,
    `time-to-result tokens_per_s_per_gpu`, ...), over the calibration points every addendum stored when it
    was issued. Worst is the ratio furthest from 1 (0.5 and 2 are equally far); `optimistic_count` counts
    the addenda in which the estimate was on the side the plan cannot afford (memory, power and latency
    measured above the estimate; bandwidth, efficiency and throughput below it). A token of scope `own`
    sees the calibration of its own submissions only.
    """
    return json_response(addenda.calibration_of(current_actor()))

"""As-built addenda of approved records, and the calibration of the estimators they measured.

``POST /api/v1/records/{id}/addenda`` attaches acceptance-test measurements to an approved record: the
approved submission is re-evaluated with them merged in, and the signed addendum (the record's envelope
shape, schemas/addendum.schema.json) puts each check's original and as-built result side by side. The
record itself never changes. ``GET /api/v1/calibration`` summarises measured / estimated per estimator.
"""

from __future__ import annotations

import hashlib
from typing import Any

from flask import Blueprint, Response, current_app, request, url_for

from rules.as_built import calibration
from service.accounts.auth import current_actor, require
from service.api_schemas.addenda import ADDENDUM_REQUEST, ADDENDUM_REQUEST_DOCUMENTED
from service.app import evaluation
from service.approval import addenda
from service.http import json_response, now
from service.identifiers import body_digest
from service.inputs import Body, accepts
from service.openapi import operation
from service.persistence.db import get_db
from service.persistence.models import Addendum
from service.record import canonical_bytes, signing_keys

bp = Blueprint("addenda", __name__, url_prefix="/api/v1")

ADDENDUM_BODY = Body("AddendumRequest", "addendum", ADDENDUM_REQUEST,
                     documented=ADDENDUM_REQUEST_DOCUMENTED)
SIGNED = "signed"


def _self(row: Addendum) -> str:
    return url_for("addenda.get_addendum", record_id=row.record_id, addendum_id=row.id)


def _envelope_response(row: Addendum, status: int) -> Response:
    body = canonical_bytes(row.envelope)
    response = current_app.response_class(body, status=status, mimetype="application/json")
    response.headers["ETag"] = '"' + hashlib.sha256(body).hexdigest() + '"'
    response.headers["Record-Status"] = SIGNED
    if request.method == "POST":
        response.headers["Location"] = _self(row)
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
    actor = current_actor()
    moment = now()
    digest = body_digest(body)
    db = get_db()
    with db.session() as session:
        prepared = addenda.prepare(session, actor, record_id, body["measurements"], digest)
    if prepared.existing is not None:
        return _envelope_response(prepared.existing, 200)
    # The engine runs outside any transaction (up to about a second for a large training submission).
    as_built = evaluation.evaluate_submission(prepared.merged, moment)
    document = addenda.addendum_document(prepared, as_built, actor, moment, body.get("note"), body["measurements"])
    row, issued = addenda.issue_or_find(db, actor, prepared, document, digest, signing_keys(), moment)
    return _envelope_response(row, 201 if issued else 200)


def _summary(row: Addendum) -> dict[str, Any]:
    document = row.document
    return {"addendum_id": row.id, "record_id": row.record_id, "record_digest": document["record"]["digest"],
            "digest": row.digest, "verdict": row.verdict, "record_verdict": document["record"]["verdict"],
            "changes": document["changes"], "measured_checks": document["measured_checks"],
            "estimators": [pair["estimator"] for pair in document["estimates"]],
            "issued_at": document["issued_at"], "actor": row.actor, "note": document.get("note"),
            "links": {"self": _self(row), "record": url_for("records.get_record", record_id=row.record_id)}}


@bp.get("/records/<record_id>/addenda")
@operation(tag="records", errors=(404,), responses={200: ("The addenda of the record", "AddendumList")})
@require("read")
def list_addenda(record_id: str) -> Response:
    """List the as-built addenda of a record: those of every version of its final record, oldest first.

    Each item names the version it was attached to, its verdict beside the record's, the checks whose
    status changed, and the estimators it measured; `links.self` is the signed addendum. An evaluation
    record or a rejected quote's record has none.
    """
    with get_db().session() as session:
        rows = addenda.addenda_of(session, current_actor(), record_id)
    return json_response({"record_id": record_id, "items": [_summary(row) for row in rows], "total": len(rows)})


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
    with get_db().session() as session:
        row = addenda.get_addendum(session, current_actor(), record_id, addendum_id)
    return _envelope_response(row, 200)


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
    with get_db().session() as session:
        count, points = addenda.calibration_points(session, current_actor())
    return json_response({"addenda": count, "estimators": calibration(points)})

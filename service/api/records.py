"""Records: the stored record documents (signing and the PDF come with issue [6])."""

from __future__ import annotations

from flask import Blueprint, Response

from service.auth import require
from service.db import get_db
from service.errors import NotFound
from service.http import json_response
from service.models import Record
from service.openapi import operation

bp = Blueprint("records", __name__, url_prefix="/api/v1/records")


@bp.get("/<record_id>.json")
@operation(tag="records", errors=(404,), responses={200: ("The record document", "RecordDocument")},
           response_headers={200: ("ETag",)})
@require("read")
def get_record(record_id: str) -> Response:
    """Read a record as stored: an evaluation's record, or the final record issued at approval or rejection."""
    with get_db().session() as session:
        record = session.get(Record, record_id)
        if record is None:
            raise NotFound(f"there is no record {record_id!r}")
        return json_response(record.document, 200, {"ETag": f'"{record.digest.removeprefix("sha256:")}"'})

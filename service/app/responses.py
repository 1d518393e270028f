"""The HTTP responses of the application layer's reads, for the API and the reviewer pages alike.

A record (signed envelope or draft), its PDF (or 202 with the task that renders it), a submission's checks in
each export format and its audit trail are answered with the same bytes and headers whichever front end asks,
so both build them here; neither calls the other's views.
"""

from __future__ import annotations

import hashlib
from typing import Any

from flask import Response, current_app, request, url_for

from service import exports
from service.app.records import RecordRead
from service.app.submissions import Checks
from service.app.tasks import load_view
from service.exports import tables
from service.http import json_response, negotiated_format, text_response
from service.inputs import Query
from service.persistence.models import Record

SIGNED, DRAFT = "signed", "draft"
# The formats of a submission's checks: JSON, or an export (service/exports).
CHECK_FORMATS = {"json": "application/json", **exports.MEDIA_TYPES}
FILE_SUFFIXES = {"sarif": "sarif", "junit": "junit.xml", "csv": "csv"}
# A list is JSON, or CSV when `format=csv` or the Accept header asks for text/csv.
LIST_FORMATS = {"json": "application/json", "csv": tables.CSV_MEDIA_TYPE}
LIST_FORMAT = {"description": "json (default) or csv; without it the Accept header chooses (text/csv)",
               "enum": list(LIST_FORMATS)}
AUDIT_QUERY = Query({"type": "object", "properties": {"format": LIST_FORMAT}})


def accepted(task_id: str, **headers: str) -> Response:
    """Returns 202 Accepted with the task's representation and its Location."""
    view = load_view(task_id)
    return json_response(view, 202, {"Location": view["links"]["self"], **headers})


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest() + '"'


def version_links(read: RecordRead) -> str:
    """Returns the RFC 5829 Link header of a final record's versions ('' for an evaluation record)."""
    return ", ".join(f'<{url_for("records.get_record", record_id=rid)}>; rel="{rel}"' for rid, rel in read.versions)


def _conditional(body: bytes, mimetype: str, status_header: str, link: str,
                 extra: dict[str, str] | None = None, etag: bool = True) -> Response:
    response = current_app.response_class(body, status=200, mimetype=mimetype)
    if etag:
        response.headers["ETag"] = _etag(body)
    response.headers["Record-Status"] = status_header
    if link:
        response.headers["Link"] = link
    for name, value in (extra or {}).items():
        response.headers[name] = value
    return response.make_conditional(request)


def record_response(read: RecordRead) -> Response:
    """Returns the response of a record read: its body, ETag, Record-Status and version links."""
    return _conditional(read.body, "application/json", SIGNED if read.signed else DRAFT, version_links(read))


def prefers_async() -> bool:
    """Returns True when the request's Prefer header (RFC 7240) asks for ``respond-async``."""
    preferences = ",".join(request.headers.getlist("Prefer"))
    return any(p.split(";")[0].strip().lower() == "respond-async" for p in preferences.split(","))


def pdf_response(read: RecordRead) -> Response:
    """Returns the response of a record's PDF read: the PDF, or 202 with the task that renders it."""
    if read.task_id is not None:
        applied = {"Preference-Applied": "respond-async"} if prefers_async() else {}
        return accepted(read.task_id, **applied)
    return _pdf_response(read.body, read.record, SIGNED if read.signed else DRAFT, version_links(read))


def _pdf_response(pdf: bytes, record: Record, status: str, link: str) -> Response:
    suffix = "" if status == SIGNED else "-DRAFT"
    disposition = f'attachment; filename="commissioning-record-{record.id}{suffix}.pdf"'
    if status == SIGNED:
        return _conditional(pdf, "application/pdf", status, link, {"Content-Disposition": disposition})
    # A draft is stored once rendered, so its bytes stay the same until the renderer changes (a new release):
    # an ETag to revalidate against, and no-cache so that a client does revalidate.
    return _conditional(pdf, "application/pdf", status, link,
                        {"Content-Disposition": disposition, "Cache-Control": "no-cache"})


def checks_response(checks: Checks, fmt: str) -> Response:
    """Returns the response of a checks read in format ``fmt`` (a key of CHECK_FORMATS)."""
    if checks.listing is not None:
        return json_response(checks.listing)
    assert checks.export is not None
    name = f"quotecheck-{checks.submission_id}-r{checks.revision}.{FILE_SUFFIXES[fmt]}"
    return text_response(exports.render(fmt, checks.export), CHECK_FORMATS[fmt],
                         {"Content-Disposition": f'attachment; filename="{name}"'})


def audit_response(submission_id: str, events: list[dict[str, Any]], requested_format: str | None) -> Response:
    """Returns the response of an audit trail read: JSON, or CSV."""
    if negotiated_format(requested_format, LIST_FORMATS) == "csv":
        return text_response(tables.audit_csv(events), LIST_FORMATS["csv"])
    return json_response({"submission_id": submission_id, "events": events})

"""Downloads for a signed-in browser: records (JSON, PDF), a submission's checks (SARIF, JUnit, CSV), its audit
trail as CSV, and each revision's document.

A browser sends its session cookie, not a bearer token, so these routes read for the signed-in user through
the application layer the API reads through, and answer as the API does: the same bytes, ETags and visibility
(a token of scope ``own`` gets 404 for another's record).
"""

from __future__ import annotations

import json

from flask import Response, current_app, request

from service.app import history, responses
from service.app.records import read_record, read_record_pdf
from service.app.submissions import audit_trail, read_checks
from service.app.tasks import load_view
from service.errors import InvalidRequest
from service.http import now
from service.ui.blueprint import bp
from service.ui.render import TASK_REFRESH_S, current_visitor, page, reloading, signed_in

CHECK_FORMATS = ("sarif", "junit", "csv")


def _attachment(response: Response, name: str) -> Response:
    response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@bp.get("/ui/records/<record_id>.json")
@signed_in
def record_json(record_id: str) -> Response:
    """A record as the API serves it: an approved one as its signed envelope, any other as an unsigned draft."""
    response = responses.record_response(read_record(current_visitor().actor, record_id, now()))
    return _attachment(response, f"commissioning-record-{record_id}.json") if response.status_code == 200 else response


@bp.get("/ui/records/<record_id>.pdf")
@signed_in
def record_pdf(record_id: str) -> Response:
    """A record's PDF: signed (PAdES) when approved, otherwise an unsigned DRAFT.

    A signed PDF a worker still renders answers 202 as the API does: with the task's JSON to a client that asks for
    JSON (or for anything), and to a browser (HTML preferred) with a small page that says so and reloads itself
    (``Refresh``) until the PDF is there, so the first click on the link ends in the PDF, not in a task's JSON."""
    actor = current_visitor().actor
    read = read_record_pdf(actor, record_id, now, responses.prefers_async())
    if read.task_id is None or request.accept_mimetypes.best_match(["application/json", "text/html"]) != "text/html":
        return responses.pdf_response(read)
    response = page("pdf_pending.html", status=202, task=load_view(read.task_id, actor), record_id=record_id,
                    refresh_s=TASK_REFRESH_S)
    reloading(response)
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.get("/ui/submissions/<submission_id>/checks")
@signed_in
def checks_export(submission_id: str) -> Response:
    """The checks of the current evaluation as SARIF, JUnit XML or CSV (``?format=``)."""
    if request.args.get("format") not in CHECK_FORMATS:
        raise InvalidRequest(f"format must be one of: {', '.join(CHECK_FORMATS)}")
    fmt = request.args["format"]
    return responses.checks_response(read_checks(current_visitor().actor, submission_id, False, now().date()), fmt)


@bp.get("/ui/submissions/<submission_id>/audit.csv")
@signed_in
def audit_csv(submission_id: str) -> Response:
    """The audit trail as CSV, one row per event."""
    query = responses.AUDIT_QUERY.read()
    events = audit_trail(current_visitor().actor, submission_id)
    response = responses.audit_response(submission_id, events, query["format"])
    return _attachment(response, f"quotecheck-{submission_id}-audit.csv")


@bp.get("/ui/submissions/<submission_id>/revisions/<int:number>.json")
@signed_in
def revision_json(submission_id: str, number: int) -> Response:
    """The document of one revision, exactly the JSON that was submitted (parsed and written again)."""
    document = history.visible_revision_document(current_visitor().actor, submission_id, number)
    response = current_app.response_class(json.dumps(document, ensure_ascii=False, indent=2),
                                          mimetype="application/json")
    return _attachment(response, f"quotecheck-{submission_id}-revision-{number}.json")

"""Submitting a quote from a page, and revising one: a submission document pasted or uploaded as a file.

The document is read by the reader the API and the command line use (schemas.json_reader: at most
MAX_CONTENT_LENGTH bytes, UTF-8, no repeated member names, …) and validated against the submission schema
(rules.evaluate.validate_submission); a problem is listed on the form by JSON Pointer.
"""

from __future__ import annotations

from typing import Any

from flask import Response, current_app, redirect, request, url_for

from rules.errors import QuotecheckError
from rules.evaluate import validate_submission
from schemas.json_reader import JsonError, read_json
from service.accounts.auth import authorize
from service.app import intake
from service.errors import InvalidRequest, status_of
from service.http import now
from service.ui.actions import expect_version, refused
from service.ui.blueprint import bp
from service.ui.render import current_visitor, page, signed_in

# A pasted document longer than this is not shown again in the form after a refusal (it was sent, though).
ECHO_CHARS = 200_000


def read_document() -> tuple[dict[str, Any], str]:
    """Returns the submission document of the form (its file, else its pasted text) and the pasted text."""
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    pasted = request.form.get("document", "")
    upload = request.files.get("file")
    if upload is not None and upload.filename:
        raw: bytes | str = upload.read(limit + 1)
        origin = f"the file {upload.filename!r}"
    elif pasted.strip():
        raw, origin = pasted, "the pasted document"
    else:
        raise InvalidRequest("paste a submission document (JSON) into the field, or choose a file")
    try:
        document = read_json(raw, origin, max_bytes=limit)
    except JsonError as error:
        raise InvalidRequest(error.detail, error.problems) from None
    validate_submission(document, origin)
    return document, pasted


@bp.get("/ui/submissions/new")
@signed_in
def new_submission() -> Response:
    """The form to submit a quote (submitters and admins)."""
    authorize(current_visitor().actor, "submit")
    return page("new.html", pasted="", error=None)


@bp.post("/ui/submissions/new")
@signed_in
def create_submission() -> Response:
    """Store and evaluate a quote from the form; then its page."""
    actor = current_visitor().actor
    authorize(actor, "submit")
    try:
        document, _ = read_document()
    except QuotecheckError as error:
        pasted = request.form.get("document", "")
        return page("new.html", status=status_of(error), pasted=pasted if len(pasted) <= ECHO_CHARS else "",
                    error={"title": error.title, "detail": error.detail,
                           "problems": [p.as_dict() for p in error.problems]})
    submission_id = intake.submit(actor, document, now())["id"]
    return redirect(url_for("ui.submission", submission_id=submission_id, done="submitted"), 303)


@bp.post("/ui/submissions/<submission_id>/revisions")
@signed_in
def revise(submission_id: str) -> Response:
    """Send a revised quote (its original submitter, or an admin); it is evaluated and compared with the last."""
    actor = current_visitor().actor
    try:
        authorize(actor, "revise")
        document, _ = read_document()
        intake.revise(actor, submission_id, document, now, expect_version)
    except QuotecheckError as error:
        return refused(submission_id, error, {"revise": True})
    return redirect(url_for("ui.submission", submission_id=submission_id, done="revised"), 303)

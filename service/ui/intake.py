"""Submitting a quote from a page, and revising one: a submission document pasted or uploaded as a file, or made
by the quote form (service/ui/quote_form.py) for the common case, a catalogued server training a catalogued model.

A pasted document is read by the reader the API and the command line use (schemas.json_reader: at most
MAX_CONTENT_LENGTH bytes, UTF-8, no repeated member names, …); it and the quote form's document are validated
against the submission schema (rules.evaluate.validate_submission) and evaluated as the API evaluates a body
(service.app.intake). A problem is listed by JSON Pointer, and the form's shown beside the field it belongs to.
The bundled examples (examples/*.json) open in the JSON editor with ``?example=<name>``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flask import Response, current_app, redirect, request, url_for

from rules.catalogue import load_catalogue
from rules.errors import InvalidSubmission, QuotecheckError
from rules.evaluate import validate_submission
from schemas.json_reader import JsonError, read_json
from service.accounts.actors import Actor
from service.accounts.auth import authorize
from service.app import intake
from service.errors import InvalidRequest, status_of
from service.http import now
from service.ui import quote_form
from service.ui.actions import expect_version, refused
from service.ui.blueprint import bp
from service.ui.render import current_visitor, page, signed_in

# A pasted document longer than this is not shown again in the form after a refusal (it was sent, though).
ECHO_CHARS = 200_000
# The examples the README describes and the tests run; present where the service runs from the repository (an
# installed package has none, and the page then offers none).
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
FORM_ORIGIN = "the quote form"


def bundled_examples() -> dict[str, Path]:
    """Returns the bundled examples by name (file name without .json), in name order."""
    return {path.stem: path for path in sorted(EXAMPLES_DIR.glob("*.json"))} if EXAMPLES_DIR.is_dir() else {}


def new_page(status: int = 200, *, values: dict[str, str] | None = None, pasted: str = "",
             error: dict[str, Any] | None = None, form_refusal: QuotecheckError | None = None,
             example: str = "") -> Response:
    """Returns the "Submit a quote" page: the quote form with ``values`` (and the problems of ``form_refusal`` beside
    its fields), the examples with ``example`` chosen, and the JSON editor holding ``pasted`` (with ``error``)."""
    form = quote_form.sections(load_catalogue())
    form_error = None
    if form_refusal is not None:  # each problem with the field it is shown beside, for the summary's links
        form_error = {"title": form_refusal.title, "detail": form_refusal.detail,
                      "problems": [{**p.as_dict(), "field": quote_form.field_at(form, p.pointer)}
                                   for p in form_refusal.problems]}
    problems = form_refusal.problems if form_refusal else []
    return page("new.html", status=status, form=form, values=values or quote_form.values_of(form, {}),
                field_errors=quote_form.placed(form, problems), form_error=form_error, pasted=pasted, error=error,
                examples=list(bundled_examples()), example=example)


def shown_error(error: QuotecheckError) -> dict[str, Any]:
    """Returns ``error`` as the page shows it."""
    return {"title": error.title, "detail": error.detail, "problems": [p.as_dict() for p in error.problems]}


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
    example = request.args.get("example", "")
    if not example:
        return new_page()
    found = bundled_examples().get(example)
    if found is None:
        known = ", ".join(bundled_examples()) or "none here"
        error = InvalidRequest(f"there is no bundled example {example!r} (the examples: {known})")
        return new_page(404, error=shown_error(error))
    return new_page(pasted=found.read_text(encoding="utf-8"), example=example)


@bp.post("/ui/submissions/new")
@signed_in
def create_submission() -> Response:
    """Store and evaluate a quote from the form; then its page."""
    actor = current_visitor().actor
    authorize(actor, "submit")
    if request.form.get("entry") == "form":
        return _from_form(actor)
    try:
        document, _ = read_document()
    except QuotecheckError as error:
        pasted = request.form.get("document", "")
        return new_page(status_of(error), pasted=pasted if len(pasted) <= ECHO_CHARS else "",
                        error=shown_error(error))
    submission_id = intake.submit(actor, document, now())["id"]
    return redirect(url_for("ui.submission", submission_id=submission_id, done="submitted"), 303)


def _from_form(actor: Actor) -> Response:
    """Submits the quote form's document, as a pasted one is submitted; with "Show the JSON", shows the document in
    the JSON editor instead (and the form's problems, if any)."""
    form = quote_form.sections(load_catalogue())
    values = quote_form.values_of(form, request.form)
    document = quote_form.submission_of(form, values)
    problems = quote_form.missing_server_model(values)
    try:
        validate_submission(document, FORM_ORIGIN)
    except InvalidSubmission as error:
        problems += error.problems
    refusal = InvalidSubmission(f"{FORM_ORIGIN} does not satisfy the submission schema ({len(problems)} problem"
                                f"{'' if len(problems) == 1 else 's'}): see the fields marked", problems)
    if request.form.get("action") == "show-json":
        return new_page(values=values, form_refusal=refusal if problems else None,
                        pasted=json.dumps(document, indent=1, ensure_ascii=False))
    if problems:
        return new_page(status_of(refusal), values=values, form_refusal=refusal)
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

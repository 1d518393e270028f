"""The forms of the submission page: waive a check, decide (approve, reject, request changes), link a purchase
order. Each is checked as the API checks its request (the same declarations, roles, four-eyes rule and store
functions); the form carries the version of the submission it was rendered from, which stands in for If-Match.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from flask import Response, redirect, request, url_for

from rules.errors import QuotecheckError
from service.accounts.auth import authorize
from service.api_schemas.bodies import DECISION_BODY, PURCHASE_ORDER_BODY, WAIVER_BODY
from service.app import records, review
from service.errors import PreconditionFailed, status_of
from service.http import now
from service.identifiers import body_digest
from service.inputs import Body, validate_body
from service.record import signing_keys
from service.ui.blueprint import bp
from service.ui.render import current_visitor, signed_in
from service.ui.submission_views import submission_page

DECISIONS = ("approve", "reject", "request-changes")


def checked(spec: Body, body: dict[str, Any]) -> dict[str, Any]:
    """Returns ``body`` after the checks of the API's declaration ``spec`` (InvalidRequest otherwise)."""
    if spec.schema is not None:
        validate_body(body, spec.schema, spec.what)
    if spec.check is not None:
        spec.check(body)
    return body


def stale_words(current: int | None) -> str:
    """Returns what a form rendered from an older version of the quote is told (``current``: its version now)."""
    raw = request.form.get("version", "")
    seen = f"version {raw}" if raw.isdigit() else "a version the form did not name"
    now_at = f", it is at version {current} now" if current is not None else ""
    return (f"this quote changed after you opened the page: you saw {seen}{now_at} (someone waived a check, "
            "decided, linked a purchase order or sent a revision meanwhile). Nothing was saved. The page shows the "
            "quote as it is now: review the change, then send the form again.")


def expect_version(snap: review.Snapshot) -> None:
    """Raises PreconditionFailed, in words, unless the form was rendered from the submission's current version."""
    raw = request.form.get("version", "")
    if raw.isdigit() and int(raw) == snap.submission.version:
        return
    raise PreconditionFailed(stale_words(snap.submission.version))


def refused(submission_id: str, error: QuotecheckError, retry: dict[str, Any] | None = None) -> Response:
    """Returns the submission page as it is now, saying why the form was refused; a stale form is a conflict (409)."""
    stale = isinstance(error, PreconditionFailed)
    # Another request changed the quote between this one's read and its write (the store's compare-and-set):
    # told in the same words as a form rendered from an older version.
    detail = (error.detail if "after you opened the page" in error.detail else stale_words(None)) if stale \
        else error.detail
    return submission_page(submission_id, 409 if stale else status_of(error),
                           error={"title": "Changed meanwhile" if stale else error.title, "detail": detail,
                                  "problems": [p.as_dict() for p in error.problems]}, retry=retry)


def _done(submission_id: str, done: str, anchor: str = "") -> Response:
    return redirect(url_for("ui.submission", submission_id=submission_id, done=done) + anchor, 303)


@bp.post("/ui/submissions/<submission_id>/checks/<check_id>/waivers")
@signed_in
def waive(submission_id: str, check_id: str) -> Response:
    """Waive a check's current result with a justification and an optional expiry date."""
    actor = current_visitor().actor
    body: dict[str, Any] = {"justification": request.form.get("justification", "")}
    if request.form.get("expires"):
        body["expires"] = request.form["expires"]
    retry = {"check_id": check_id, **body}
    moment = now()
    try:
        authorize(actor, "waive")
        checked(WAIVER_BODY, body)
        expires = date.fromisoformat(body["expires"]) if "expires" in body else None
        review.waive(actor, submission_id, check_id, body["justification"].strip(), expires, body_digest(body),
                     moment, expect_version, lambda session, waiver: None)
    except QuotecheckError as error:
        return refused(submission_id, error, retry)
    return _done(submission_id, "waived", f"#check-{check_id}")


@bp.post("/ui/submissions/<submission_id>/decisions")
@signed_in
def decide(submission_id: str) -> Response:
    """Approve, reject or request changes to the current revision, with an optional comment."""
    actor = current_visitor().actor
    body: dict[str, Any] = {"action": request.form.get("action", "")}
    if request.form.get("comment", "").strip():
        body["comment"] = request.form["comment"].strip()
    retry = {"decision": body["action"], "comment": body.get("comment", "")}
    moment = now()
    try:
        authorize(actor, "decide")
        checked(DECISION_BODY, body)
        authorize(actor, body["action"])
        review.decide(actor, submission_id, body["action"], body.get("comment"), body_digest(body), moment,
                      signing_keys(), expect_version, lambda session, decision: None)
    except QuotecheckError as error:
        return refused(submission_id, error, retry)
    return _done(submission_id, body["action"])


@bp.post("/ui/records/<record_id>/purchase-orders")
@signed_in
def link_purchase_order(record_id: str) -> Response:
    """Link a purchase order to an approved record (a new signed version of the record lists it)."""
    actor = current_visitor().actor
    body = {"po_number": request.form.get("po_number", "").strip(), "system": request.form.get("system", "").strip()}
    submission_id = records.submission_of(actor, record_id)
    try:
        authorize(actor, "link-purchase-order")
        checked(PURCHASE_ORDER_BODY, body)
        _, linked = records.link_purchase_order(actor, record_id, body["po_number"], body["system"],
                                                body_digest(body), signing_keys(), now())
    except QuotecheckError as error:
        return refused(submission_id, error, {"purchase_order": body})
    return _done(submission_id, "purchase-order" if linked else "purchase-order-known", "#purchase-orders")

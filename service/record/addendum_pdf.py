"""The as-built addendum as a signed PDF: its signed envelope attached, PAdES-signed like a record (B-LTA with a TSA).

The PDF shows the addendum's headline (the record it is of, the checks whose status moved, each check's record
and as-built status, the estimates beside the measurements); the attached envelope holds everything and is what
the signature's checks hold against (``quotecheck verify``: the PDF's signature, then the attached envelope).
"""

from __future__ import annotations

from typing import Any

from service.record.canonical import canonical_bytes
from service.record.envelope import verify_record
from service.record.errors import SigningError
from service.record.keys import SigningKeys
from service.record.pades import sign_pdf
from service.record.render import ADDENDUM_ATTACHMENT, environment, html_to_pdf
from service.record.verification import is_addendum


def addendum_html(addendum: dict[str, Any]) -> str:
    """Returns the addendum as HTML for the PDF (all its text escaped by Jinja autoescape)."""
    return environment().get_template("addendum.html").render(a=addendum)


def signed_addendum_pdf(envelope: dict[str, Any], keys: SigningKeys) -> bytes:
    """Returns the signed PDF of the addendum in ``envelope`` (its signed envelope as issued, attached as it is).

    SigningError when ``envelope`` is not an addendum's, or does not verify with ``keys``.
    """
    check = verify_record(envelope, keys.trusted())
    if not check.ok or not is_addendum(check.record):
        raise SigningError("the given envelope is not a signed as-built addendum of these keys: "
                           + ("; ".join(check.all_reasons()) or "it holds another document"))
    addendum = envelope["record"]
    attachment = (ADDENDUM_ATTACHMENT, canonical_bytes(envelope),
                  "the signed as-built addendum (RFC 8785 JSON envelope)")
    pdf = html_to_pdf(addendum_html(addendum), [attachment])
    return sign_pdf(pdf, keys, record_id=addendum["addendum_id"])

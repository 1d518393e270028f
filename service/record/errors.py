"""Errors of the record subsystem: signing failures and documents that cannot be read at all."""

from __future__ import annotations

from rules.errors import QuotecheckError


class SigningError(QuotecheckError):
    """The record or its PDF could not be signed (no key, a key that may not be used, an unapproved record)."""

    title = "Signing error"
    http_status = 500
    type_slug = "signing-error"


class UnsignableRecord(SigningError):
    """The caller asked to sign something that must not be signed (e.g. a PDF of a record nobody approved)."""

    title = "Record cannot be signed"
    http_status = 409
    type_slug = "unsignable-record"


class UnreadableDocument(QuotecheckError):
    """A document given for verification is neither a signed record JSON nor a PDF; nothing was verified."""

    title = "Unreadable document"
    http_status = 422
    type_slug = "unreadable-document"

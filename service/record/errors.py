"""Errors of the record subsystem: signing failures and documents that cannot be read at all."""

from __future__ import annotations

from rules.errors import QuotecheckError


class SigningError(QuotecheckError):
    """The record or its PDF could not be signed (no key, a key that may not be used, an unapproved record)."""

    title = "Signing error"
    type_slug = "signing-error"


class UnsignableRecord(SigningError):
    """The caller asked to sign something that must not be signed (e.g. a PDF of a record nobody approved)."""

    title = "Record cannot be signed"
    type_slug = "unsignable-record"


class UnreadableDocument(QuotecheckError):
    """A document given for verification is neither a signed record JSON nor a PDF; nothing was verified."""

    title = "Unreadable document"
    type_slug = "unreadable-document"

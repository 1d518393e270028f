"""The outcome of a verification: valid or not, what held, and what did not with found vs expected."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from service.record.canonical import is_approved

ADDENDUM_KIND = "as-built"


def is_addendum(document: Any) -> bool:
    """Returns True for an as-built addendum (schemas/addendum.schema.json), which is signed like a record."""
    return isinstance(document, dict) and document.get("kind") == ADDENDUM_KIND and "addendum_version" in document


def addendum_of(document: Any) -> dict[str, Any] | None:
    """Returns the record an as-built addendum names (``record_id``, ``digest``); None for any other document."""
    named = document.get("record") if is_addendum(document) else None
    if not isinstance(named, dict):
        return None
    # The document may be anything a caller sent: only text is echoed back as a name.
    return {key: value if isinstance(value := named.get(key), str) else None for key in ("record_id", "digest")}


@dataclass
class Verification:
    """What a verification found. ``ok`` only when something was verified and nothing failed (fails closed)."""

    subject: str  # what was verified: "record envelope", "DSSE envelope", "PDF"
    reasons: list[str] = field(default_factory=list)  # each failure, saying what was found and what was expected
    findings: list[str] = field(default_factory=list)  # each property that held, for the reader
    key_id: str | None = None  # the key that signed, when known
    record_digest: str | None = None  # sha256 of the canonical record, when a record was found
    record: dict[str, Any] | None = None  # the record, when one was found (even when invalid, to show it)
    parts: list[Verification] = field(default_factory=list)  # e.g. a PDF's embedded record envelope
    level: str | None = None  # PAdES baseline level of a PDF (B-B, B-T, B-LT, B-LTA); an envelope's B-B or B-T
    signing_time: dt.datetime | None = None  # the TSA's time in the signature's timestamp, when there is one

    @property
    def ok(self) -> bool:
        return not self.reasons and bool(self.findings) and all(part.ok for part in self.parts)

    @property
    def approved(self) -> bool | None:
        """Returns whether the record found is an approved one (latest decision approve); None without a record
        and for an as-built addendum, whose approval is the record's it names."""
        return None if self.record is None or is_addendum(self.record) else is_approved(self.record)

    def fail(self, reason: str) -> None:
        self.reasons.append(reason)

    def hold(self, finding: str) -> None:
        self.findings.append(finding)

    def all_reasons(self) -> list[str]:
        """Returns this verification's reasons and those of its parts, each part's prefixed by its subject."""
        reasons = list(self.reasons)
        if not reasons and not self.findings:
            reasons.append(f"{self.subject}: nothing was verified")
        for part in self.parts:
            reasons += [f"{part.subject}: {reason}" for reason in part.all_reasons()]
        return reasons

    def as_dict(self) -> dict[str, Any]:
        """Returns the JSON shape of ``POST /api/v1/records/verify``: ok, subject, reasons, findings, ids, parts.

        ``approved`` is False for a record whose latest decision is not an approval (e.g. an evaluation
        signed with ``quotecheck sign``), whatever ``ok`` says of its signature; None when no record was found.
        ``addendum_of`` names the record an as-built addendum belongs to (None for anything else). ``level`` and
        ``signing_time`` (RFC 3339, the TSA's time; null without a timestamp) are the signature's.
        """
        return {
            "ok": self.ok,
            "subject": self.subject,
            "reasons": self.all_reasons() if not self.ok else [],
            "findings": list(self.findings),
            "key_id": self.key_id,
            "record_digest": self.record_digest,
            "record_id": (self.record or {}).get("record_id"),
            "verdict": (self.record or {}).get("verdict"),
            "approved": self.approved,
            "addendum_of": addendum_of(self.record),
            "level": self.level,
            "signing_time": _rfc3339(self.signing_time),
            "parts": [part.as_dict() for part in self.parts],
        }


def _rfc3339(moment: dt.datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")

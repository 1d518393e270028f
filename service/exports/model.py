"""What an export is made of: the evaluation, its checks after waivers, the submission they point into."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from service.record.view import deciding_figure


@dataclass(frozen=True)
class Artifact:
    """The submission document the checks' JSON Pointers point into, as a reader of the export can find it.

    ``uri`` names it (the file given on the command line, or ``submission.json`` for a stored submission);
    ``text``, when known, is the document exactly as read, from which line and column regions are found;
    ``sha256`` is the hex digest of the bytes ``uri`` names.
    """

    uri: str
    document: dict[str, Any]
    text: str | None = None
    sha256: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class Export:
    """One evaluation to export: its record, its checks and the submission they were decided on.

    Each check is the record's check result, optionally with ``effective_status`` (``waived`` when a valid
    waiver covers it), ``digest`` (the result digest a waiver binds to) and ``waiver`` (the active waiver:
    ``id``, ``justification``, ``author``, ``expires``, ``created_at``). ``subject`` names the stored
    submission (``id``, ``revision``, ``vendor``, ``quote_id``, ``state``); empty for a file.
    """

    record: dict[str, Any]
    checks: list[dict[str, Any]]
    artifact: Artifact
    verdict_after_waivers: str | None = None
    subject: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return self.record["verdict"]


def effective_status(check: dict[str, Any]) -> str:
    """Returns the check's status after waivers (its status when nothing says otherwise)."""
    return check.get("effective_status") or check["status"]


def headline(check: dict[str, Any]) -> str:
    """Returns the deciding figure of a check result in one line (its message when the check gives none)."""
    return deciding_figure(check)

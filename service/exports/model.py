"""What an export is made of: the evaluation, its checks after waivers, the submission they point into."""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

from rules.checks import CHECKS

# The deciding-figure template of each check (rules/checks/<id>.py ``headline``).
HEADLINES = {check.id: check.headline for check in CHECKS}

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
    template = HEADLINES.get(check["id"], "")
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    # A figure the check could not give (no GPU count fits memory: gpus_needed is null) is explained by the message.
    if check["status"] in ("pass", "warn", "fail") and template and all(
            check["evidence"].get(name) is not None for name in fields):
        try:
            return template.format(**check["evidence"])
        except (KeyError, ValueError, IndexError):
            pass
    return check["message"]

"""The raw diagnostics of ``measurements`` as the checks read them: parsed, noted as read, and named for the record.

A submission whose artifact does not parse was refused when it entered (rules.evaluate.validate_submission);
an evaluation of an unvalidated document that meets one reports the check inconsistent, naming the pointer.
"""

from __future__ import annotations

from typing import Any

import parsers
from rules import artifacts
from rules.artifacts import Artifact
from rules.checks.base import Context
from rules.errors import InconsistentInput


def read_artifact(ctx: Context, artifact: Artifact, pointer: str | None = None,
                  collective: str | None = None) -> dict[str, Any] | None:
    """Returns the parsed artifact at ``pointer`` (default the artifact's own), noted as read; None when absent."""
    pointer = pointer or artifact.pointer
    text = ctx.get(pointer)
    if not isinstance(text, str):
        return None
    try:
        return artifacts.parse(artifact, text, collective)
    except parsers.ParseError as error:
        raise InconsistentInput(f"{pointer}: {artifact.tool} output cannot be read: {error}") from None


def source(artifact: Artifact, pointer: str | None = None) -> str:
    """Returns the measurement's source as the record names it: the tool and where the submission holds its output."""
    return f"{artifact.tool} ({pointer or artifact.pointer})"

"""How the job's sections declare their fields: the submission member behind each, and its documented default."""

from __future__ import annotations

from dataclasses import field, fields
from typing import Any


def at(member: str, default: Any = None, *, section: type | None = None, each: type | None = None,
       scalars: bool = False) -> Any:
    """Declares a field read from the submission member ``member``: a leaf (with its ``default``), a nested
    ``section``, an array whose items are sections ``each``, or (``scalars``) an array of texts or numbers held
    as one leaf, a tuple."""
    return field(metadata={"at": member, "default": default, "section": section, "each": each, "scalars": scalars})


def pointer_of(section: Any, name: str) -> str:
    """Returns the JSON Pointer of the member behind field ``name`` of ``section`` (e.g. a node group's nics)."""
    return f"{section.pointer}/{next(f.metadata['at'] for f in fields(section) if f.name == name)}"

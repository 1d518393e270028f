"""How the job's sections declare their fields: the submission member behind each, and its documented default."""

from __future__ import annotations

from dataclasses import field, fields
from typing import Any


def at(member: str, default: Any = None, *, section: type | None = None, each: type | None = None,
       scalars: bool = False, keyed: bool = False) -> Any:
    """Declares a field read from the submission member ``member``: a leaf (with its ``default``), a nested
    ``section``, an array whose items are sections ``each``, (``scalars``) an array of texts or numbers held as
    one leaf, a tuple, or (``keyed``) an object whose members are leaves, as (name, Given) pairs in the
    submission's order."""
    return field(metadata={"at": member, "default": default, "section": section, "each": each, "scalars": scalars,
                           "keyed": keyed})


def member_pointer(section: Any, name: str) -> str:
    """Returns the JSON Pointer of the member that the field ``name`` of ``section`` is read from: how evidence names
    an array or an object of the submission, which has no Given of its own (e.g. a node group's nics)."""
    member = next(f.metadata["at"] for f in fields(section) if f.name == name)
    return f"{section.pointer}/{member}"

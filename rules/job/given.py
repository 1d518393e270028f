"""One value of the job with its provenance: where it sits in the submission and what vouches for it."""

from __future__ import annotations

from typing import Any, Generic, NamedTuple, TypeVar

from rules.status import Source

T = TypeVar("T")

# The source of a value the submission left out and the job parser filled with the convention the submission schema
# documents beside the field (rules/job/parse.py: one tensor-parallel rank, one epoch). Such a convention is not an
# input of the submission: a check that reads it names no pointer. (A policy's cited default, by contrast, has
# source ``default`` (rules.status.Source.DEFAULT) and is an assumption the checks that read it list.)
SPEC_DEFAULT = "spec default"
_DEFAULTS = (SPEC_DEFAULT, Source.DEFAULT)


class Given(NamedTuple, Generic[T]):
    """A value of the job: the value (None when absent), its JSON Pointer, and its source.

    ``source`` is the submission's (``assumption`` for a bare number, else the ``source`` it states), the
    catalogue's (``vendor_limit``, for a figure a server or GPU model filled in), ``default`` for the policy's cited
    default, SPEC_DEFAULT for a convention the job parser filled in, or None for text and flags (the submission
    format gives them no source) and for an absent value. Immutable; a named tuple because a submission holds
    hundreds of them.
    """

    value: T | None
    pointer: str
    source: str | None = None

    @property
    def stated(self) -> bool:
        """Returns whether the submission (or the catalogue on its behalf) holds the value: not absent, neither a
        convention nor a policy default."""
        return self.value is not None and self.source not in _DEFAULTS

    def or_(self, default: Any) -> Any:
        """Returns the value, or ``default`` when absent."""
        return default if self.value is None else self.value


def absent(pointer: str) -> Given[Any]:
    """Returns the Given of a value the submission does not hold."""
    return Given(None, pointer, None)

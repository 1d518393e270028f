"""A problem with an input document, located by JSON Pointer: what every validator of quotecheck reports."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input document, located by a JSON Pointer (RFC 6901)."""

    pointer: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"pointer": self.pointer, "message": self.message}

"""The one error every parser raises for input it cannot read."""

from __future__ import annotations


class ParseError(ValueError):
    """Malformed or truncated diagnostic output.

    The message names the 1-based line of the input and says what was expected and what was found,
    e.g. ``line 14: expected 16 columns (GPU0 ... CPU Affinity, NUMA Affinity), found 9``. ``line``
    and ``detail`` keep the two halves apart for callers that report them separately (an API's
    problem document, a CLI's error line).
    """

    def __init__(self, line: int, detail: str) -> None:
        self.line = line
        self.detail = detail
        super().__init__(f"line {line}: {detail}")

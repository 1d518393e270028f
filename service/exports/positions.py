"""Where each JSON Pointer of a JSON text lies in it: line and column regions for the exports' locations.

Python's JSON reader keeps no positions, so the text is walked once more here (after schemas.json_reader
accepted it): every value's span is noted under its RFC 6901 pointer, a member's from the opening quote of
its name to the end of its value, so an editor shows ``"count": 8`` rather than ``8`` alone.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from json.decoder import scanstring
from typing import Any

_BLANK = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null")
BYTE_ORDER_MARK = "\ufeff"
_INDEX = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True)
class Region:
    """A span of the text as SARIF counts it: lines and columns from 1, ``end_column`` just past the end."""

    start_line: int
    start_column: int
    end_line: int
    end_column: int

    def as_sarif(self) -> dict[str, int]:
        """Returns the region as a SARIF ``region`` object."""
        return {"startLine": self.start_line, "startColumn": self.start_column, "endLine": self.end_line,
                "endColumn": self.end_column}


def escape_token(token: str | int) -> str:
    """Returns one reference token of a JSON Pointer (``~`` as ``~0``, ``/`` as ``~1``)."""
    return str(token).replace("~", "~0").replace("/", "~1")


def unescape_token(token: str) -> str:
    """Returns the member name or index a pointer's reference token stands for."""
    return token.replace("~1", "/").replace("~0", "~")


def parent_pointer(pointer: str) -> str:
    """Returns the pointer of the value that holds the one ``pointer`` names (``""`` for the root)."""
    return pointer.rpartition("/")[0]


class _Walk:
    def __init__(self, text: str) -> None:
        self.text = text
        self.spans: dict[str, tuple[int, int]] = {}

    def blank(self, index: int) -> int:
        return _BLANK.match(self.text, index).end()  # type: ignore[union-attr]

    def value(self, index: int, pointer: str, start: int | None = None) -> int:
        """Notes the span of the value at ``index`` (and of everything in it); returns the index past it."""
        index = self.blank(index)
        char = self.text[index]
        if char == "{":
            end = self.members(index + 1, pointer)
        elif char == "[":
            end = self.elements(index + 1, pointer)
        elif char == '"':
            end = scanstring(self.text, index + 1)[1]
        else:
            match = _SCALAR.match(self.text, index)
            if match is None:
                raise ValueError(f"no JSON value at offset {index}")
            end = match.end()
        self.spans[pointer] = (index if start is None else start, end)
        return end

    def members(self, index: int, pointer: str) -> int:
        index = self.blank(index)
        if self.text[index] == "}":
            return index + 1
        while True:
            name_start = index
            name, index = scanstring(self.text, index + 1)
            index = self.blank(index)
            if self.text[index] != ":":
                raise ValueError(f"':' expected at offset {index}")
            index = self.blank(self.value(index + 1, f"{pointer}/{escape_token(name)}", start=name_start))
            if self.text[index] == "}":
                return index + 1
            index = self.blank(index + 1)  # past the ','

    def elements(self, index: int, pointer: str) -> int:
        index = self.blank(index)
        if self.text[index] == "]":
            return index + 1
        position = 0
        while True:
            index = self.blank(self.value(index, f"{pointer}/{position}"))
            if self.text[index] == "]":
                return index + 1
            index, position = index + 1, position + 1


class Positions:
    """The regions of every value of one JSON text, by pointer; empty when the text is not one JSON value."""

    def __init__(self, text: str) -> None:
        offset = 1 if text.startswith(BYTE_ORDER_MARK) else 0
        self._text = text[offset:]
        walk = _Walk(self._text)
        try:
            walk.value(0, "")
        except (ValueError, IndexError):
            walk.spans.clear()
        self._spans = walk.spans
        self._line_starts = [0] + [match.end() for match in re.finditer("\n", self._text)]

    def __contains__(self, pointer: str) -> bool:
        return pointer in self._spans

    def _line_column(self, index: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._line_starts, index)
        return line, index - self._line_starts[line - 1] + 1

    def region(self, pointer: str) -> Region | None:
        """Returns the region of the value ``pointer`` names (with its member name); None when there is none."""
        span = self._spans.get(pointer)
        if span is None:
            return None
        start, end = span
        return Region(*self._line_column(start), *self._line_column(end))


def nearest_present(pointer: str, present: Any) -> str:
    """Returns ``pointer`` itself when ``present`` holds it, else its nearest ancestor that it holds (``""`` last)."""
    while pointer and pointer not in present:
        pointer = parent_pointer(pointer)
    return pointer


def resolve(document: Any, pointer: str) -> tuple[bool, Any]:
    """Returns (True, the value) ``pointer`` names in ``document``, or (False, None) when it names nothing."""
    value = document
    for token in pointer.split("/")[1:]:
        name = unescape_token(token)
        if isinstance(value, dict) and name in value:
            value = value[name]
        elif isinstance(value, list) and _INDEX.fullmatch(name) and int(name) < len(value):
            value = value[int(name)]
        else:
            return False, None
    return True, value

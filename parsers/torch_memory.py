"""PyTorch CUDA memory figures: ``max_memory_allocated`` / ``max_memory_reserved`` or ``memory_stats()``.

PyTorch (``torch/cuda/memory.py``) reports bytes: ``max_memory_allocated()`` is
``memory_stats()["allocated_bytes.all.peak"]`` (the most memory tensors occupied) and
``max_memory_reserved()`` is ``memory_stats()["reserved_bytes.all.peak"]`` (the most the caching
allocator held from the driver); ``memory_stats()`` returns an ordered dict of
``<stat>.<pool>.<metric>`` keys plus ``num_alloc_retries`` and ``num_ooms``. Accepted inputs:

- ``print(torch.cuda.memory_stats())``: a dict or ``OrderedDict([...])`` repr, or the same as JSON;
- lines naming the figure: ``max_memory_allocated: 123456``, ``torch.cuda.max_memory_reserved() =
  123456``, ``memory_allocated=123456`` (several lines for one name, one per rank, keep the largest);
- bare numbers, one per line: max_memory_allocated, then max_memory_reserved.

GiB are 2^30 bytes.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from parsers._text import clean_lines
from parsers.errors import ParseError

BYTES_PER_GIB = 2**30
# memory_stats() key -> output name (without the _gib unit)
_STATS = {
    "allocated_bytes.all.peak": "max_allocated",
    "reserved_bytes.all.peak": "max_reserved",
    "allocated_bytes.all.current": "current_allocated",
    "reserved_bytes.all.current": "current_reserved",
}
_COUNTERS = ("num_alloc_retries", "num_ooms")
# function name -> output name
_FUNCTIONS = {
    "max_memory_allocated": "max_allocated",
    "max_memory_reserved": "max_reserved",
    "memory_allocated": "current_allocated",
    "memory_reserved": "current_reserved",
}
_NAMED = re.compile(
    r"(?<![\w.])(?:torch\.cuda\.)?(max_memory_allocated|max_memory_reserved|memory_allocated|memory_reserved)"
    r"(?:\([^)]*\))?\s*[:=]\s*(\S+)"
)
_OUTPUT = ("max_allocated", "max_reserved", "current_allocated", "current_reserved")


def parse(text: str) -> dict[str, Any]:
    """Return the peak and current allocated/reserved GiB, and allocator retry/OOM counts where given.

    Shape: ``{"max_allocated_gib", "max_reserved_gib", "current_allocated_gib",
    "current_reserved_gib", "num_alloc_retries", "num_ooms", "source"}``; a figure the input does not
    give is None; ``source`` is ``memory_stats``, ``named`` or ``bare``. Raises ParseError naming the
    line for a dict that does not parse, a value that is not a byte count, or input with no figure.
    """
    lines = clean_lines(text)
    stripped = "\n".join(lines).strip()
    if stripped.startswith(("{", "OrderedDict(")):
        return _from_stats(_literal(stripped, lines), lines)
    named = _from_named(lines)
    if named is not None:
        return named
    return _from_bare(lines)


def _result(
    figures: dict[str, int | None], counters: dict[str, int | None], source: str, reserved_line: int
) -> dict[str, Any]:
    # the caching allocator serves tensors from what it reserved, so a peak reserved below the
    # peak allocated means the figures were swapped or belong to different runs
    allocated, reserved = figures.get("max_allocated"), figures.get("max_reserved")
    if allocated is not None and reserved is not None and reserved < allocated:
        raise ParseError(
            reserved_line,
            f"expected max_memory_reserved ({reserved}) to be at least max_memory_allocated ({allocated})",
        )
    result: dict[str, Any] = {
        f"{name}_gib": None if figures.get(name) is None else figures[name] / BYTES_PER_GIB for name in _OUTPUT
    }
    result.update({name: counters.get(name) for name in _COUNTERS})
    result["source"] = source
    return result


def _first_line(lines: list[str]) -> int:
    return next((i + 1 for i, line in enumerate(lines) if line.strip()), 1)


def _literal(stripped: str, lines: list[str]) -> dict[str, Any]:
    offset = _first_line(lines) - 1
    body = stripped
    if body.startswith("OrderedDict("):
        if not body.endswith(")"):
            raise ParseError(len(lines), "expected ')' closing OrderedDict(...), found end of input")
        body = body[len("OrderedDict(") : -1]
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        try:
            value = ast.literal_eval(body)
        except (SyntaxError, ValueError) as error:
            line = offset + (getattr(error, "lineno", None) or 1)
            detail = f"expected a memory_stats() dict, found text that does not parse ({error})"
            raise ParseError(line, detail) from None
    if isinstance(value, list):
        try:
            value = dict(value)
        except (TypeError, ValueError):
            raise ParseError(offset + 1, "expected OrderedDict([(key, value), ...]), found another list") from None
    if not isinstance(value, dict):
        raise ParseError(offset + 1, f"expected a memory_stats() dict, found {type(value).__name__}")
    return value


def _line_of_key(lines: list[str], key: str) -> int:
    return next((i + 1 for i, line in enumerate(lines) if f"'{key}'" in line or f'"{key}"' in line), 1)


def _from_stats(stats: dict[str, Any], lines: list[str]) -> dict[str, Any]:
    if not any(key in stats for key in _STATS):
        raise ParseError(
            _first_line(lines), "expected memory_stats() keys such as 'allocated_bytes.all.peak', found none"
        )
    figures: dict[str, int | None] = {}
    for key, name in _STATS.items():
        figures[name] = _byte_count(stats.get(key), key, _line_of_key(lines, key))
    counters = {key: _byte_count(stats.get(key), key, _line_of_key(lines, key)) for key in _COUNTERS}
    return _result(figures, counters, "memory_stats", _line_of_key(lines, "reserved_bytes.all.peak"))


def _byte_count(value: object, what: str, line: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != int(value):
        raise ParseError(line, f"expected {what} as a whole number of bytes, found {value!r}")
    return int(value)


def _from_named(lines: list[str]) -> dict[str, Any] | None:
    figures: dict[str, int | None] = {}
    reserved_line = 1
    for index, line in enumerate(lines):
        for function, token in _NAMED.findall(line):
            token = token.rstrip(",;")
            if not token.isdigit():
                raise ParseError(index + 1, f"expected {function} as a whole number of bytes, found '{token}'")
            name = _FUNCTIONS[function]
            figures[name] = max(int(token), figures.get(name) or 0)
            if name == "max_reserved":
                reserved_line = index + 1
    return _result(figures, {}, "named", reserved_line) if figures else None


def _from_bare(lines: list[str]) -> dict[str, Any]:
    numbers: list[int] = []
    last_line = 1
    for index, line in enumerate(lines):
        token = line.strip()
        if not token:
            continue
        if not token.isdigit():
            raise ParseError(
                index + 1, f"expected max_memory_allocated/max_memory_reserved bytes or memory_stats(), found '{token}'"
            )
        if len(numbers) == 2:
            raise ParseError(index + 1, "expected at most two bare numbers (allocated, reserved), found a third")
        numbers.append(int(token))
        last_line = index + 1
    if not numbers:
        raise ParseError(len(lines), "expected PyTorch memory figures, found empty input")
    figures = {"max_allocated": numbers[0], "max_reserved": numbers[1] if len(numbers) > 1 else None}
    return _result(figures, {}, "bare", last_line)

"""Figures as the record's PDF lists them: numbers and values written out, and listings laid out as text.

A record has hundreds of figures. WeasyPrint's cost is per line, per box and per glyph (spaces included), so
a listing is one block of preformatted monospace text composed here: short key/value rows in a grid of
three columns (a row takes the one, two or three it fits), longer ones with every value at the same column,
and a list of rows (the strategies a check compared, the racks) as a text table with aligned columns. Only a
value too deep or too wide for that is left to a sub-table.

Listings are bounded like free text (service/record/free_text.py): a value is cut after
``VALUE_MAX_CHARS``, a table after ``TABLE_MAX_ROWS`` rows, each with a note saying how much the attached
JSON holds, so that no quote the schema admits (256 racks, 2,000 line items) makes a PDF long.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from service.record.canonical import canonical_bytes

# Widths (characters) a key column snaps to, so that most listings share one.
KEY_COLUMNS = (18, 22, 26, 30, 34, 38)
POINTER_COLUMNS = (30, 38, 46, 54, 62)
# Characters per line of the monospace listings: the 177 mm text width of the page (A4 less margins and
# padding) over the advance of DejaVu Sans Mono (0.602 em) at the listing's font size, less a margin of 2.
EVIDENCE_LINE_CHARS = 104  # 7.8 pt (templates/record.css .kv)
APPENDIX_LINE_CHARS = 116  # 7 pt (.kv.appendix-inputs)
VALUE_MAX_CHARS = 1_000  # of one value in a listing (a list of names joined, a long explanation)
TABLE_MAX_ROWS = 24  # of a text table (the racks, the strategies compared)
SUBTABLE_MAX_CHARS = 2_000  # of a nested value laid out as a sub-table (its compact JSON), else cut as text
COLUMN_GAP = 3  # spaces between the columns of the grid that short rows share
GRID_COLUMNS = 3  # columns of that grid
GRID_KEY_COLUMNS = (12, 16, 20, 24)  # widths the key column of the grid snaps to
TABLE_GAP = 2  # spaces between the columns of a text table
TABLE_INDENT = "  "  # a text table under its key


# --- values ---------------------------------------------------------------------------------------------

def display_number(value: Any) -> str:
    """Returns a figure for a table: integers exact with separators, floats to four significant digits."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value) or value == 0:
            return str(value) if value else "0"
        magnitude = math.floor(math.log10(abs(value)))
        if magnitude >= 15 or magnitude < -4:
            return f"{value:.4g}"
        decimals = max(0, 3 - magnitude)
        text = f"{value:,.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return str(value)


def exact(value: Any) -> str:
    """Returns an input value as given: integers with separators, floats in full, containers as compact JSON."""
    if isinstance(value, bool) or value is None:
        return display_number(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict | list):
        return canonical_bytes(value).decode("utf-8")
    return str(value)


def is_nested(value: Any) -> bool:
    """Returns True for a value that is not one line: a non-empty object, or a list holding objects or lists."""
    if isinstance(value, Mapping):
        return bool(value)
    return isinstance(value, list | tuple) and any(isinstance(item, Mapping | list | tuple) for item in value)


def flat(value: Any) -> str:
    """Returns a value that is not nested as one line: a figure, a list of figures joined, or '(none)'."""
    if isinstance(value, list | tuple):
        return ", ".join(display_number(item) for item in value) if value else "(none)"
    if isinstance(value, Mapping):
        return "(empty)"
    if isinstance(value, str) and not value:
        return "(empty)"
    return display_number(value)


# --- listings -------------------------------------------------------------------------------------------

def key_value_blocks(items: list[tuple[str, Any]], *, columns: tuple[int, ...] = KEY_COLUMNS,
                     line_chars: int = EVIDENCE_LINE_CHARS, text: Callable[[Any], str] | None = None,
                     nested: Callable[[Any], bool] | None = None, grid: bool = True) -> list[dict[str, Any]]:
    """Returns a listing of (key, value) rows as blocks: ``{"text"}`` of preformatted lines, or ``{"key", "value"}``.

    A row is the key padded to the column width, then the value, wrapped here with continuation lines
    indented to the value column. With ``grid``, short rows share lines instead, in a grid of three
    columns: each row in order takes the next one, two or three columns it fits (its key padded to a
    narrower column of the grid's own, ``_grid_key_width``), so a listing of short figures takes a third of
    the lines. A nested value follows its key as a text table (``text_table``); one that a text table cannot
    hold is a block of its own, ``{"key", "value"}``, for the template to lay out as a sub-table.
    """
    text, nested = text or flat, nested or is_nested
    longest = max((len(key) for key, _ in items), default=0) + 2
    width = next((w for w in columns if w >= longest), columns[-1])
    cell = (line_chars - (GRID_COLUMNS - 1) * COLUMN_GAP) // GRID_COLUMNS
    narrow = _grid_key_width(items, text, nested, cell) if grid else 0
    blocks: list[dict[str, Any]] = []
    lines: list[str] = []
    shared: list[tuple[str, int]] = []  # the grid line being filled: its rows and the columns each takes
    for key, value in items:
        if nested(value):
            table = text_table(value, line_chars - len(TABLE_INDENT))
            lines += _grid_line(shared, cell)
            shared = []
            if table is not None:
                lines += [key, *(TABLE_INDENT + line for line in table)]
                continue
            whole = exact(value)
            if len(whole) > SUBTABLE_MAX_CHARS:
                lines += _wrapped_row(key, capped(whole), width, line_chars)
                continue
            if lines:
                blocks.append({"text": "\n".join(lines)})
                lines = []
            blocks.append({"key": key, "value": value})
            continue
        shown = capped(text(value))
        row = (key.ljust(narrow) if len(key) < narrow else key + "  ") + shown
        # The columns the row takes, 0 for a row that keeps a line of its own.
        spans = next((n for n in range(1, GRID_COLUMNS + 1) if len(row) <= n * cell + (n - 1) * COLUMN_GAP), 0) \
            if grid and "\n" not in shown else 0
        if not spans:
            lines += _grid_line(shared, cell) + _wrapped_row(key, shown, width, line_chars)
            shared = []
            continue
        if sum(n for _, n in shared) + spans > GRID_COLUMNS:
            lines += _grid_line(shared, cell)
            shared = []
        shared.append((row, spans))
    lines += _grid_line(shared, cell)
    if lines:
        blocks.append({"text": "\n".join(lines)})
    return blocks


def _grid_key_width(items: list[tuple[str, Any]], text: Callable[[Any], str], nested: Callable[[Any], bool],
                    cell: int) -> int:
    """Returns the key column of the grid: of GRID_KEY_COLUMNS the one that lets the most rows fit one column
    of it (the narrower on a tie)."""
    rows = [(len(key), len(text(value))) for key, value in items if not nested(value)]
    return max(GRID_KEY_COLUMNS, key=lambda w: (sum(1 for key_chars, value_chars in rows
                                                    if key_chars < w and w + value_chars <= cell), -w))


def _grid_line(rows: list[tuple[str, int]], cell: int) -> list[str]:
    """Returns a grid line of ``rows`` (each with the columns it takes), or nothing for no rows."""
    if not rows:
        return []
    return ["".join(row.ljust(spans * (cell + COLUMN_GAP)) for row, spans in rows[:-1]) + rows[-1][0]]


def capped(text: str, limit: int = VALUE_MAX_CHARS) -> str:
    """Returns ``text`` whole, or its first ``limit`` characters and a note of its length."""
    if len(text) <= limit:
        return text
    return f"{text[:limit].rstrip()} … ({len(text):,} characters in all; the attached JSON holds the whole value)"


def _cell(text: str, limit: int) -> str:
    # A cell of a text table is cut short with an ellipsis: the table's note says the JSON holds it all.
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _more_rows(shown: int, total: int) -> str:
    return f"… {total - shown:,} more rows ({total:,} in all); the attached JSON holds them"


def _wrapped_row(key: str, value: str, width: int, line_chars: int) -> list[str]:
    head = key.ljust(width) if len(key) < width else key + "  "
    room = max(line_chars - len(head), 24)
    chunks: list[str] = []
    for paragraph in value.split("\n"):
        chunks += textwrap.wrap(paragraph, room, break_on_hyphens=False) or [""]
    return [(head + chunks[0]).rstrip()] + [" " * len(head) + chunk for chunk in chunks[1:]]


def text_table(value: Any, line_chars: int) -> list[str] | None:
    """Returns a nested value as lines of a text table, or None when it holds values that are not one line.

    An object is listed as key/value rows; a list of objects as a table with a column per member (numbers
    right-aligned), its columns split into groups that each fit ``line_chars``, the first column repeated
    in every group.
    """
    if isinstance(value, Mapping):
        if any(is_nested(item) for item in value.values()):
            return None
        items = list(value.items())
        lines = [line for block in key_value_blocks(items[:TABLE_MAX_ROWS], line_chars=line_chars, grid=False)
                 for line in block["text"].split("\n")]
        return lines + ([_more_rows(TABLE_MAX_ROWS, len(items))] if len(items) > TABLE_MAX_ROWS else [])
    if not (isinstance(value, list | tuple) and value and all(isinstance(row, Mapping) for row in value)):
        return None
    names = list(dict.fromkeys(name for row in value for name in row))
    if any(is_nested(row.get(name)) for row in value for name in names):
        return None
    # An empty text is an empty cell here: the column says what it holds.
    cells = [[_cell(flat(row[name]), line_chars // 2) if row.get(name, "") != "" else "" for name in names]
             for row in value[:TABLE_MAX_ROWS]]
    if any("\n" in cell for row in cells for cell in row):
        return None
    widths = [max(len(name), *(len(row[i]) for row in cells)) for i, name in enumerate(names)]
    numeric = [all(_is_figure(row.get(name)) or name not in row for row in value[:TABLE_MAX_ROWS])
               and any(name in row for row in value[:TABLE_MAX_ROWS]) for name in names]
    groups = _column_groups(widths, line_chars)
    if groups is None:
        return None
    lines: list[str] = []
    for group in groups:
        if lines:
            lines.append("")

        def line(values: list[str], group: list[int] = group) -> str:
            parts = [values[i].rjust(widths[i]) if numeric[i] else values[i].ljust(widths[i]) for i in group]
            return (" " * TABLE_GAP).join(parts).rstrip()

        lines.append(line(names))
        lines += [line(row) for row in cells]
    if len(value) > TABLE_MAX_ROWS:
        lines.append(_more_rows(TABLE_MAX_ROWS, len(value)))
    return lines


def _is_figure(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _column_groups(widths: list[int], line_chars: int) -> list[list[int]] | None:
    """Returns the columns in groups that fit ``line_chars`` (each after the first repeats column 0); None when
    a column cannot fit beside the first."""
    groups: list[list[int]] = [[0]]
    used = widths[0]
    for index in range(1, len(widths)):
        if widths[0] + TABLE_GAP + widths[index] > line_chars:
            return None
        if used + TABLE_GAP + widths[index] > line_chars:
            groups.append([0])
            used = widths[0]
        groups[-1].append(index)
        used += TABLE_GAP + widths[index]
    return groups

"""The inputs of a record as its PDF names them: JSON Pointers compressed, and the rows the appendix lists.

A check's section names the inputs it read compactly: the members of one parent once (``/a/b/{c, d}``),
and array elements that read the same members once, their indices as ranges
(``/quote/line_items/{0–1999}/{quantity, unit_price}``), at most ``POINTER_GROUPS_MAX`` such groups per
line. The appendix lists each input with its value and source (inputs of array elements that agree, once:
``same_across_elements``): of every array the first
``APPENDIX_ARRAY_ITEMS`` elements, then one row that counts the rest, and at most ``APPENDIX_MAX_ROWS`` rows
in all, so that a quote of 2,000 line items or 256 racks (10,000 inputs) lists pages, not hundreds. The
attached JSON holds every input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from service.record.canonical import canonical_bytes

POINTER_GROUPS_MAX = 40
APPENDIX_ARRAY_ITEMS = 8
APPENDIX_MAX_ROWS = 400
REFERENCES_MAX = 60
_INDEX = re.compile(r"^(.*?/)(\d+)(/.*)$")


def natural_key(pointer: str) -> tuple[tuple[int, int | str], ...]:
    """Returns a sort key that orders array indices as numbers (``/racks/2`` before ``/racks/10``)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in pointer.split("/"))


def index_ranges(indices: Iterable[int]) -> str:
    """Returns indices as ranges: ``0–3, 5, 7–9``."""
    ranges: list[list[int]] = []
    for index in sorted(set(indices)):
        if ranges and index == ranges[-1][1] + 1:
            ranges[-1][1] = index
        else:
            ranges.append([index, index])
    return ", ".join(f"{low}" if low == high else f"{low}–{high}" for low, high in ranges)


def compact_pointers(pointers: Iterable[str]) -> str:
    """Returns JSON Pointers as one line: the members of a parent once, array elements with the same members
    once with their indices as ranges; at most POINTER_GROUPS_MAX groups, then a count of the rest."""
    members: dict[str, list[str]] = {}
    for pointer in sorted(set(pointers), key=natural_key):
        parent, _, leaf = pointer.rpartition("/")
        members.setdefault(parent + "/", []).append(leaf)
    # Parents that differ only in their first array index, with the same members, are one group.
    groups: dict[tuple[str, str, tuple[str, ...]], list[int]] = {}
    for parent, leaves in members.items():
        match = _INDEX.match(parent)
        if match is None:
            groups.setdefault((parent, "", tuple(leaves)), [])
        else:
            groups.setdefault((match[1], match[3], tuple(leaves)), []).append(int(match[2]))
    parts = []
    for (head, tail, leaves), indices in groups.items():
        where = head if not indices else (f"{head}{indices[0]}{tail}" if len(indices) == 1
                                          else f"{head}{{{index_ranges(indices)}}}{tail}")
        parts.append(where + (leaves[0] if len(leaves) == 1 else "{" + ", ".join(leaves) + "}"))
    shown = parts[:POINTER_GROUPS_MAX]
    rest = sum(len(leaves) * max(len(indices), 1) for (_, _, leaves), indices in list(groups.items())[len(shown):])
    return " · ".join(shown) + (f" · … and {rest:,} more inputs (the attached JSON lists them)" if rest else "")


def appendix_rows(inputs: list[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any] | str]]:
    """Returns the appendix's rows in pointer order: (pointer, input), or (elements, what the row stands for).

    Of every array the first APPENDIX_ARRAY_ITEMS elements are listed, then one row that counts the
    inputs of the others; after APPENDIX_MAX_ROWS rows, one row counts the inputs left.
    """
    rows: list[tuple[str, Mapping[str, Any] | str]] = []
    cut: dict[str, list[int]] = {}  # array pointer -> [the row standing for it, inputs, lowest, highest index]
    left = 0
    for quantity in sorted(inputs, key=lambda q: natural_key(q["pointer"])):
        parts = quantity["pointer"].split("/")
        beyond = next((i for i, part in enumerate(parts) if part.isdigit() and int(part) >= APPENDIX_ARRAY_ITEMS),
                      None)
        if beyond is not None:
            array, index = "/".join(parts[:beyond]), int(parts[beyond])
            if array in cut:
                entry = cut[array]
                entry[1] += 1
                entry[2], entry[3] = min(entry[2], index), max(entry[3], index)
                continue
            if len(rows) < APPENDIX_MAX_ROWS:
                cut[array] = [len(rows), 1, index, index]
                rows.append((array, ""))
                continue
        if len(rows) < APPENDIX_MAX_ROWS:
            rows.append((quantity["pointer"], quantity))
        else:
            left += 1
    for array, (row, count, low, high) in cut.items():
        elements = f"{array}/{low}" if low == high else f"{array}/{low}–{high}"
        rows[row] = (elements, f"{count:,} more inputs of these elements; the attached JSON holds them")
    if left:
        rows.append(("…", f"{left:,} more inputs; the attached JSON holds them"))
    return rows


def same_across_elements(rows: list[tuple[str, Mapping[str, Any] | str]]) -> list[tuple[str, Mapping[str, Any] | str]]:
    """Returns the appendix's rows with inputs that differ only in their first array index, and agree in value,
    source and reference, as one row at the first one's place: ``/quote/node_groups/{0–1}/gpu/tdp_w``.

    Node groups and racks of one model repeat the same vendor limits; the row names every index it stands
    for, as the checks' input lists do (``compact_pointers``).
    """
    keyed = [(pointer, quantity, _element_of(pointer, quantity)) for pointer, quantity in rows]
    indices: dict[tuple[str, ...], list[int]] = {}
    for _, _, element in keyed:
        if element is not None:
            indices.setdefault(element[0], []).append(element[1])
    merged: list[tuple[str, Mapping[str, Any] | str]] = []
    for pointer, quantity, element in keyed:
        same = indices[element[0]] if element is not None else []
        if len(same) < 2:
            merged.append((pointer, quantity))
        elif element[1] == same[0]:  # the first of them stands for all
            head, tail = element[0][:2]
            merged.append((f"{head}{{{index_ranges(same)}}}{tail}", quantity))
    return merged


def _element_of(pointer: str, quantity: Mapping[str, Any] | str) -> tuple[tuple[str, ...], int] | None:
    """Returns what an input of an array element agrees on with the same input of the others (the pointer before
    and after its first index, value, source, reference) and that index; None for no index or no input."""
    match = _INDEX.match(pointer)
    if match is None or not isinstance(quantity, Mapping):
        return None
    return (match[1], match[3], canonical_bytes(quantity["value"]).decode(), str(quantity["source"]),
            str(quantity.get("ref") or "")), int(match[2])


def number_references(rows: list[tuple[str, Mapping[str, Any] | str]]) -> tuple[dict[str, int], list[str]]:
    """Returns each reference of the listed inputs numbered once, in order (at most REFERENCES_MAX), and the list."""
    numbers: dict[str, int] = {}
    for _, quantity in rows:
        ref = quantity.get("ref") if isinstance(quantity, Mapping) else None
        if ref and ref not in numbers and len(numbers) < REFERENCES_MAX:
            numbers[ref] = len(numbers) + 1
    return numbers, list(numbers)

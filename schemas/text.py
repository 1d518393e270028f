"""Free text that displays as what it says: the characters refused in it, and how stored ones are shown.

A record is read by people, in a PDF, a terminal or a browser, and signed. Characters that reorder the
text around them or do not display at all let a quote say one thing and show another: ``EUR
\\u202e000,052\\u202c`` displays as "EUR 250,000". Every string of a submission (values and member names)
and the free text of the API's request bodies (waiver justifications, decision comments, variant names)
is therefore refused when it holds one of these (``HIDDEN`` below):

- control characters (Unicode category Cc) other than TAB, LF and CR: terminal escapes, backspace,
  DEL, the C1 controls;
- format characters (Cf), all of them: the bidirectional embeddings, overrides and isolates
  (U+202A–U+202E, U+2066–U+2069), the marks U+200E, U+200F and U+061C, the zero-width space, non-joiner
  and joiner (U+200B–U+200D), the word joiner and invisible operators (U+2060–U+2064), U+FEFF, the soft
  hyphen U+00AD, the interlinear annotation and tag characters, and the rest of the category;
- the line and paragraph separators U+2028 and U+2029 (Zl, Zp), which break lines where no reader of
  the JSON sees a break;
- letters and marks that are blank by design: U+034F (combining grapheme joiner), U+115F, U+1160, U+3164
  and U+FFA0 (Hangul fillers), U+17B4 and U+17B5 (Khmer inherent vowels);
- lone surrogates (Cs): half of a UTF-16 pair, which no UTF-8 text can hold.

Not refused: variation selectors (they choose a glyph of the visible character before them, e.g. an
emoji's form), other combining marks, and the ordinary spaces. Persian and Indic text that uses the
zero-width non-joiner or joiner must be written without them (it stays legible, with joined forms).

A record stored before these rules shows any such character visibly, as ``<U+202E>`` (``visible``).
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

from schemas.problem import Problem

_ALLOWED_CONTROLS = frozenset("\t\n\r")
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_BLANK_LETTERS = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0")
# At most this many distinct characters are named in one message.
_NAMED = 3


def is_hidden(character: str) -> bool:
    """Returns True for a character that free text may not hold (see the module docstring)."""
    if character in _ALLOWED_CONTROLS:
        return False
    return unicodedata.category(character) in _HIDDEN_CATEGORIES or character in _BLANK_LETTERS


# The hidden code points (``is_hidden``) of the Unicode version this table was made for, as inclusive ranges.
# Asking unicodedata about all 1,114,112 code points costs a process 0.2-0.6 s at its first use of free text
# (the first record rendered, the first submission read); a Python with other Unicode data is scanned instead,
# and tests/test_text.py checks this table against the scan of the Python that runs the suite.
_HIDDEN_RANGES_UNICODE = "14.0.0"
_HIDDEN_RANGES = (
    (0x0, 0x8), (0xB, 0xC), (0xE, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x34F, 0x34F), (0x600, 0x605),
    (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180E, 0x180E), (0x200B, 0x200F), (0x2028, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F),
    (0x3164, 0x3164), (0xD800, 0xDFFF), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)


def scanned_hidden_ranges() -> tuple[tuple[int, int], ...]:
    """Returns the inclusive ranges of hidden code points, found by asking unicodedata about every code point."""
    ranges: list[tuple[int, int]] = []
    for code in range(sys.maxunicode + 1):
        if is_hidden(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return tuple(ranges)


def hidden_ranges() -> tuple[tuple[int, int], ...]:
    """Returns the inclusive ranges of hidden code points for this Python's Unicode data (the table, or a scan)."""
    return _HIDDEN_RANGES if unicodedata.unidata_version == _HIDDEN_RANGES_UNICODE else scanned_hidden_ranges()


@cache
def _ranges() -> tuple[tuple[int, int], ...]:
    """Returns ``hidden_ranges()``, found once per process (both character classes below are built from it)."""
    return hidden_ranges()


def _character_class(ranges: Iterable[tuple[int, int]]) -> re.Pattern[str]:
    members = "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)
    return re.compile(f"[{members}]")


@cache
def _hidden_pattern() -> re.Pattern[str]:
    """Returns a character class matching every hidden code point (built once per process)."""
    return _character_class(_ranges())


@cache
def _ascii_hidden_pattern() -> re.Pattern[str]:
    """Returns a character class matching the hidden ASCII characters, the same ranges cut at U+007F: what
    ``_hidden_pattern`` matches in ASCII text, searched several times faster (that pattern's class spans the
    whole of Unicode)."""
    return _character_class((first, min(last, 0x7F)) for first, last in _ranges() if first <= 0x7F)


def hidden_characters(text: str) -> list[str]:
    """Returns the distinct hidden characters of ``text``, in order of first appearance ([] for clean text)."""
    return list(dict.fromkeys(_hidden_pattern().findall(text)))


def code_point(character: str) -> str:
    """Returns ``U+XXXX`` and the character's Unicode name, e.g. ``U+202E RIGHT-TO-LEFT OVERRIDE``."""
    label = f"U+{ord(character):04X}"
    if unicodedata.category(character) == "Cs":
        return f"{label} (a lone surrogate, half of a UTF-16 pair)"
    name = unicodedata.name(character, "")
    return f"{label} {name}" if name else label


def visible(text: str) -> str:
    """Returns ``text`` with every hidden character written out as ``<U+XXXX>``, so nothing reorders or hides."""
    return _hidden_pattern().sub(lambda match: f"<U+{ord(match.group()):04X}>", text)


def describe(text: str) -> str:
    """Returns the message for text holding hidden characters: which ones and why they are refused."""
    found = hidden_characters(text)
    named = ", ".join(code_point(c) for c in found[:_NAMED]) + (f" and {len(found) - _NAMED} more"
                                                                 if len(found) > _NAMED else "")
    if all(unicodedata.category(c) == "Cs" for c in found):
        return f"contains {named}: text must hold whole characters; remove it or write the character it belongs to"
    return (f"contains {named}: invisible or reordering characters are not allowed in text, because they "
            "make it display as something other than what it says; remove them")


def _escape(part: str | int) -> str:
    return str(part).replace("~", "~0").replace("/", "~1")


def _strings(value: Any, pointer: str) -> Iterator[tuple[str, str]]:
    """Yields (pointer, text) for every member name and string in ``value``, iteratively (deep bodies)."""
    stack: list[tuple[Any, str]] = [(value, pointer)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            yield where, node
        elif isinstance(node, dict):
            for key, item in node.items():
                child = f"{where}/{_escape(key)}"
                if isinstance(key, str):
                    yield child, key
                stack.append((item, child))
        elif isinstance(node, list):
            stack.extend((item, f"{where}/{index}") for index, item in enumerate(node))


def _texts(value: Any) -> Iterator[str]:
    """Yields every member name and string in ``value`` (those of :func:`_strings`, without their pointers)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            for key, item in node.items():
                if isinstance(key, str):
                    yield key
                stack.append(item)
        elif isinstance(node, list):
            stack.extend(node)


def holds_hidden_text(texts: list[str]) -> bool:
    """Returns whether one of ``texts`` holds a hidden character: one search of their join for the hidden ASCII
    characters, and one of the join of those not ASCII for all (the patterns match single characters, and the
    newline between the texts is not hidden)."""
    joined = "\n".join(texts)
    if _ascii_hidden_pattern().search(joined) is not None:
        return True
    return not joined.isascii() and _hidden_pattern().search(
        "\n".join(text for text in texts if not text.isascii())) is not None


def hidden_text_problems(value: Any, pointer: str = "") -> list[Problem]:
    """Returns one Problem per string or member name of ``value`` that holds hidden characters, by JSON Pointer.

    The pointer itself is written with ``visible`` so that a problem about a member name can be shown
    (and encoded as UTF-8) even when the name holds a lone surrogate.
    """
    pattern = _hidden_pattern()
    if not holds_hidden_text(list(_texts(value))):
        return []  # the usual case, found without building a pointer for every string
    problems = {}
    for where, text in _strings(value, pointer):
        if pattern.search(text):
            problems.setdefault(visible(where), Problem(visible(where), describe(text)))
    return sorted(problems.values(), key=lambda p: p.pointer)

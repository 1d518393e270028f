"""Free text in the record's PDF, bounded: the beginning of what a person wrote, then a visible note.

The quote's notes, its vendor and quote id, a waiver's justification, a decision's comment and the names
of the people who acted are shown as written up to the bounds below, so that no text makes a record's
PDF long: 20,000 newlines of notes alone laid out as 351 pages. Past a bound, the PDF shows the first
lines and characters and a note that says how long the whole text is; the record JSON attached to the
PDF (and ``GET /api/v1/records/{id}.json``) holds every text whole, and the record digest covers it.

Lines count as well as characters: a notes cell keeps its line breaks (``white-space: pre-wrap``), so a
short text of many newlines is as long on the page as a long one.

The first page, a summary, cuts each text further to a line or two (``glimpse``) and says nothing of the
cut: the same text follows in the record's details, bounded as above.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.text import visible


@dataclass(frozen=True)
class TextBound:
    """The most of one text the PDF shows: ``lines`` (of the text as written) and ``characters`` (as shown)."""

    lines: int
    characters: int


# The quote's notes, on the cover in a cell of their own (about two thirds of a page at most).
NOTES_BOUND = TextBound(lines=40, characters=4_000)
# A waiver's justification and a decision's comment: in a table cell on the cover and again in the
# check's section, once per waived check (the API takes up to 4,000 characters of each).
PARAGRAPH_BOUND = TextBound(lines=8, characters=600)
# A check's message, remediation or deciding figure: written by the engine, but it can quote the submission
# (the names of node groups a rack cannot place, 64 of them) and is shown once or twice per check.
MESSAGE_BOUND = TextBound(lines=12, characters=1_500)
# A name or identifier: the vendor, the quote id, who waived, decided or linked a purchase order.
NAME_BOUND = TextBound(lines=2, characters=200)

# The start of a ``<U+XXXX>`` that ``visible`` writes: a cut is moved before it rather than through it.
_CODE_POINT_START = "<U+"
_CODE_POINT_LENGTH = len("<U+10FFFF>")


@dataclass(frozen=True)
class ShownText:
    """A text as the PDF shows it: the whole ``text``, or its beginning and a ``note`` that says it was cut."""

    text: str
    note: str = ""

    @property
    def truncated(self) -> bool:
        return bool(self.note)

    def __str__(self) -> str:
        return self.text + (" " + self.note if self.note else "")


def _lines(text: str) -> list[str]:
    # As HTML reads it: CR LF and a lone CR are line feeds.
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def truncation_note(lines: int, characters: int) -> str:
    """Returns the note shown after a cut text, naming the whole text's size."""
    return (f"… truncated: {lines:,} line{'s' if lines != 1 else ''} / {characters:,} "
            f"character{'s' if characters != 1 else ''}; the attached JSON holds the whole text")


def bounded(text: str, bound: TextBound) -> ShownText:
    """Returns ``text`` as the PDF shows it: hidden characters written out, cut at ``bound`` with a note.

    The note names the whole text's lines and characters as written (``truncation_note``).
    """
    lines = _lines(text)
    # A final line feed ends the last line rather than starting another.
    count = len(lines) - 1 if len(lines) > 1 and not lines[-1] else len(lines)
    kept = visible("\n".join(lines[:bound.lines]))
    if count <= bound.lines and len(kept) <= bound.characters:
        return ShownText(visible(text))
    if len(kept) > bound.characters:
        kept = kept[:bound.characters]
        start = kept.rfind(_CODE_POINT_START, max(0, len(kept) - _CODE_POINT_LENGTH))
        if start != -1 and ">" not in kept[start:]:
            kept = kept[:start]
    return ShownText(kept.rstrip(), truncation_note(count, len(text)))


def bounded_or_none(text: str | None, bound: TextBound) -> ShownText | None:
    """Returns ``bounded(text, bound)``, or None for no text (None or empty)."""
    return bounded(text, bound) if text else None


def glimpse(text: str, characters: int) -> str:
    """Returns the start of ``text`` on one line for the record's first page: its lines joined, cut at a word
    before ``characters`` with an ellipsis. The pages after the first show the text as ``bounded`` does."""
    shown = " ".join(visible(text).split())
    if len(shown) <= characters:
        return shown
    kept = shown[:characters - 1]
    start = kept.rfind(_CODE_POINT_START, max(0, len(kept) - _CODE_POINT_LENGTH))
    if start != -1 and ">" not in kept[start:]:
        kept = kept[:start]
    space = kept.rfind(" ")
    return (kept[:space] if space > characters // 2 else kept).rstrip(" ,;:") + "…"


# Advance widths of DejaVu Sans (the record's font, units per em 2048, from its hmtx table) in em, for the
# characters of figures and prose; any other character counts as the widest capital, so a width is an upper
# bound. Used to cut a text to one line of a column (service/record/cover.py).
_EM = {**dict.fromkeys("0123456789", 0.636), **dict.fromkeys(" ", 0.318), **dict.fromkeys(".,:;", 0.318),
       **dict.fromkeys("ijl'|!", 0.278), **dict.fromkeys("ft/()[]", 0.392), "-": 0.361, "r": 0.411, "s": 0.521,
       "z": 0.525, "c": 0.55, "k": 0.579, **dict.fromkeys("vxy", 0.592), **dict.fromkeys("abdeghnopqu", 0.635),
       "w": 0.818, "m": 0.974, "%": 0.95, "—": 1.0, "…": 1.0, "×": 0.838}
_WIDEST_EM = 0.85


def text_width_em(text: str) -> float:
    """Returns an upper bound of the width of ``text`` set in DejaVu Sans, in em of its font size."""
    return sum(_EM.get(character, _WIDEST_EM) for character in text)

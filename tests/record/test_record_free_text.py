"""Free text is bounded in the PDF (service/record/free_text.py) and kept whole in the attached JSON."""

from __future__ import annotations

import copy
import json
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from pyhanko.pdf_utils.reader import PdfFileReader
from record_support import pdftotext

from service.record import record_pdf
from service.record.free_text import NAME_BOUND, NOTES_BOUND, PARAGRAPH_BOUND, TextBound, bounded
from service.record.render import DRAFT_ATTACHMENT
from service.record.verify import pdf_attachments

HOSTILE_NOTES = "\n" * 20_000  # the longest notes the submission schema admits are 20,000 characters
MAX_PAGES = 40  # issue 13: no GET of a record costs more than a 40-page render


def _pages(pdf: bytes) -> int:
    return int(PdfFileReader(BytesIO(pdf)).root["/Pages"]["/Count"])


def _with(record: dict[str, Any], **quote: Any) -> dict[str, Any]:
    record = copy.deepcopy(record)
    record["submission"].update(quote)
    return record


def test_a_text_within_its_bounds_is_shown_whole() -> None:
    shown = bounded("two\nlines", TextBound(lines=2, characters=9))

    assert shown.text == "two\nlines" and not shown.truncated


def test_lines_count_as_well_as_characters() -> None:
    shown = bounded("a\n" * 100, TextBound(lines=3, characters=1_000))

    assert shown.text == "a\na\na"
    assert shown.note == "… truncated: 100 lines / 200 characters; the attached JSON holds the whole text"


def test_a_long_line_is_cut_at_the_character_bound() -> None:
    shown = bounded("x" * 180_000, TextBound(lines=40, characters=4_000))

    assert shown.text == "x" * 4_000
    assert shown.note == "… truncated: 1 line / 180,000 characters; the attached JSON holds the whole text"


def test_a_cut_never_splits_a_written_out_hidden_character() -> None:
    # U+202E is shown as "<U+202E>" (8 characters): a cut through it leaves nothing of it rather than "<U+2"
    shown = bounded("abc\u202e" + "d" * 20, TextBound(lines=1, characters=7))

    assert shown.text == "abc" and shown.truncated


@pytest.mark.parametrize("bound", [NOTES_BOUND, PARAGRAPH_BOUND, NAME_BOUND], ids=["notes", "paragraph", "name"])
def test_every_bound_keeps_text_the_schema_admits_short(bound: TextBound) -> None:
    assert 1 <= bound.lines <= 40 and 1 <= bound.characters <= 4_000


def test_hostile_notes_are_truncated_with_a_note_and_kept_whole_in_the_attached_json(
        evaluation: dict[str, Any], tmp_path: Path) -> None:
    # Given the H200 record whose notes hold 20,000 newlines (351 pages when laid out whole)
    record = _with(evaluation, notes="Delivery in two lots." + HOSTILE_NOTES)

    # When its DRAFT PDF is rendered
    pdf = record_pdf(record)

    # Then it is as long as the record without notes, says the notes were cut, and attaches them whole
    assert _pages(pdf) <= MAX_PAGES
    text = " ".join(pdftotext(pdf, tmp_path).split())
    assert "Delivery in two lots. … truncated: 20,000 lines / 20,021 characters; the attached JSON holds the whole " \
           "text" in text
    attached = json.loads(pdf_attachments(pdf)[DRAFT_ATTACHMENT])
    assert attached["submission"]["notes"] == record["submission"]["notes"]


def test_long_justifications_and_comments_are_truncated_too(approved: dict[str, Any], tmp_path: Path) -> None:
    # Given an approved record whose waiver justification and decision comment are 4,000 characters of lines
    record = copy.deepcopy(approved)
    long_text = "justified\n" * 400
    record["waivers"][0]["justification"] = long_text
    for check in record["checks"]:
        if check.get("waiver"):
            check["waiver"]["justification"] = long_text
    record["decisions"][0]["comment"] = long_text

    # When its PDF is rendered as a draft
    first, *rest = pdftotext(record_pdf(record), tmp_path).split("\f")
    summary, details = " ".join(first.split()), " ".join(" ".join(rest).split())

    # Then each shows its first lines and the note, once per place it is shown after the summary
    note = "… truncated: 400 lines / 4,000 characters; the attached JSON holds the whole text"
    assert details.count(note) == 3  # the details' waiver and decision tables, the waived check's section
    assert details.count("justified") < 3 * PARAGRAPH_BOUND.lines + 3
    # and the summary on page 1 the start of each on one line (about 6 words of 9 letters), cut with an ellipsis
    assert note not in summary and summary.count("justified…") == 2
    assert summary.count("justified") <= 2 * 8


def test_a_long_vendor_name_is_cut_as_a_name(evaluation: dict[str, Any], tmp_path: Path) -> None:
    record = _with(evaluation, vendor="V" * 190 + " Ltd" + "\nline" * 3)

    text = " ".join(pdftotext(record_pdf(record), tmp_path).split())

    assert "… truncated: 4 lines / 209 characters" in text

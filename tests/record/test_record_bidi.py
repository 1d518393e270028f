"""Right-to-left text in the record's PDF cannot move the figures and identifiers beside it: each text a person wrote
stands in a ``<bdi>`` (service/record/isolation.py), which WeasyPrint lays out apart from its neighbours.

Read back as poppler places the words on the page (``pdftotext -bbox-layout``: glyphs in visual order, left to
right), so a figure drawn on the wrong side of a name is seen where a reader would see it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from record_support import Page, approve, pdf_pages, with_purchase_order

from service.record import record_pdf
from service.record.listing import display_number
from service.record.render import html_to_pdf, record_html
from tests.html_support import texts_of

VENDOR = "שרתים בע״מ"
QUOTE_ID = "Q-17"
APPROVER = "שרה כהן"
# "approved: the rack carries 8 × H200 at 40 kW", in Arabic with its figures
JUSTIFICATION = "مقبول: الرف يحمل 8 × H200 بقدرة 40 كيلوواط حسب رسالة المورد"
PROCUREMENT = "מערכת רכש"


def _lines(page: Page) -> list[list[str]]:
    """Returns the page's lines (words sharing a baseline), each as its words from left to right."""
    rows: dict[int, list[Any]] = {}
    for word in page.words:
        rows.setdefault(round(word.y_max), []).append(word)
    return [[w.text for w in sorted(words, key=lambda w: w.x_min)] for _, words in sorted(rows.items())]


def _line_with(page: Page, *words: str) -> list[str]:
    found = [line for line in _lines(page) if all(word in line for word in words)]
    assert found, (words, _lines(page))
    return found[0]


def _record(evaluation: dict[str, Any]) -> dict[str, Any]:
    """The approved record of a Hebrew-named vendor, a waiver justified in Arabic, two purchase orders: one of them
    linked in a procurement system named in Hebrew, numbered in digits alone."""
    record = with_purchase_order(approve(evaluation, waive="host-ram"))
    record["submission"].update(vendor=VENDOR, quote_id=QUOTE_ID)
    for waiver in [record["waivers"][0], next(c["waiver"] for c in record["checks"] if c.get("waiver"))]:
        waiver["justification"] = JUSTIFICATION
    record["decisions"][0]["actor"] = APPROVER
    record["purchase_orders"] = [{**record["purchase_orders"][0], "po_number": "4711", "system": PROCUREMENT},
                                 {**record["purchase_orders"][0], "po_number": "4712", "system": "SAP"}]
    return record


def test_the_renderer_keeps_a_bdi_apart_from_the_figures_beside_it(tmp_path: Path) -> None:
    # "by שרה, 12 + 34 kW": without an isolate the name takes the figures after it into its right-to-left run
    def line(body: str) -> list[str]:
        pdf = html_to_pdf(f'<html><body><p>by {body}, 12 + 34 kW</p></body></html>', [])
        return _lines(pdf_pages(pdf, tmp_path)[0])[0]

    bare, isolated = line("שרה"), line("<bdi>שרה</bdi>")

    assert bare.index("34") < bare.index("12")  # shown as "by 34 + 12 ,הרש kW": the reorder this file is about
    assert isolated.index("12") < isolated.index("+") < isolated.index("34") < isolated.index("kW")
    assert isolated.index("הרש,") < isolated.index("12")


def test_every_text_a_person_wrote_stands_in_a_bdi_in_the_records_html(evaluation: dict[str, Any]) -> None:
    texts = texts_of(record_html(_record(evaluation), draft=False))

    for text in (VENDOR, QUOTE_ID, JUSTIFICATION, APPROVER, PROCUREMENT):
        found = [(data, elements) for data, elements in texts if text in data]
        assert found, text
        for data, elements in found:
            assert elements[-1] == "bdi", (text, data, elements)
    # the cover's purchase orders: each in a <bdi> of its own, so that the second's number stays with it
    assert ("4712 (SAP)", ) in {(data,) for data, elements in texts if elements[-1:] == ("bdi",)}


def test_an_rtl_vendor_leaves_the_quote_id_total_and_purchase_orders_in_logical_order(
        evaluation: dict[str, Any], tmp_path: Path) -> None:
    # The cover puts a word or a bracket of its own between these texts and the figures after them, which keeps them
    # apart today even without the isolates (the test above shows what a figure right after a name would do): this
    # holds the order a reader sees, whatever the template or the renderer changes.
    # Given the record of a Hebrew-named vendor, approved by a Hebrew-named approver with a waiver justified in Arabic
    record = _record(evaluation)
    evidence = next(c["evidence"] for c in record["checks"] if c["id"] == "time-to-result")

    # When its PDF is read back as laid out on the first page
    cover = pdf_pages(record_pdf(copy.deepcopy(record)), tmp_path)[0]

    # Then the identity line reads vendor, "quote Q-17", evaluated, left to right
    identity = _line_with(cover, "quote", "evaluated")
    assert identity[identity.index("quote") + 1] == QUOTE_ID
    assert identity.index("·") < identity.index("quote")  # the separator after the vendor stays after it
    # and the quote total's digits stand in order beside their label
    total = _line_with(cover, "Quote", "total")
    assert total[total.index("total") + 1:] == [evidence["currency"], display_number(evidence["quote_total"])]
    # and each purchase order's number stays with its own system: "4711 (<Hebrew>); 4712 (SAP)"
    orders = _line_with(cover, "4711", "4712")
    assert orders.index("4711") < orders.index("4712") < orders.index("(SAP)")
    # and the approver's name does not take the date after it: "approved by <name> (approver) on 2026-…"
    decision = _line_with(cover, "(approver)")
    assert decision.index("by") < decision.index("(approver)") < decision.index("on")

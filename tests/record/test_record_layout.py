"""The record PDF as its reader receives it, read back with poppler: a first page that summarises the record,
no word outside the page's text area, no page left nearly blank.

Every example's DRAFT PDF is read, and the signed PDF of the busiest record: the failing example with each of
its blocking checks waived, approved after a request for changes, with a purchase order linked.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from record_support import (
    PURCHASE_ORDER,
    ROOT,
    Page,
    approve,
    blocking,
    justification_for,
    page_margins,
    pdf_pages,
    pdftotext,
    with_purchase_order,
)

from rules.evaluate import evaluate
from service.record import SigningKeys, record_digest, record_pdf
from service.record.listing import display_number
from service.record.view import STATUS_LABELS

EXAMPLES = sorted((ROOT / "examples").glob("*.json"))
TOLERANCE_PT = 1.0  # a glyph's box may reach a fraction of a point past the edge its line box touches
NEARLY_BLANK = 0.40  # of the page height: a page whose lowest word is above it is nearly blank


def _evidence(record: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c.get("evidence") or {} for c in record["checks"] if c["id"] == check_id)


@pytest.fixture(scope="module")
def busiest(keys: SigningKeys) -> tuple[dict[str, Any], bytes]:
    """The failing example, every blocking check waived, approved after a request for changes, a PO linked."""
    record = evaluate(json.loads((ROOT / "examples" / "fail-70b-ddp-one-rack.json").read_text()))
    record = with_purchase_order(approve(record, waive=blocking(record)))
    record["decisions"].insert(0, {"action": "request-changes", "actor": "ada.approver", "role": "approver",
                                   "at": "2026-11-28T11:00:00Z", "comment": "Waive or fix the blocking checks"})
    return record, record_pdf(record, keys)


@pytest.fixture(scope="module")
def drafts() -> dict[str, tuple[dict[str, Any], bytes]]:
    """Each example's evaluation record and its DRAFT PDF, by example name."""
    rendered = {}
    for path in EXAMPLES:
        record = evaluate(json.loads(path.read_text()))
        rendered[path.stem] = (record, record_pdf(record))
    return rendered


@pytest.fixture(scope="module")
def approved_with_a_po(approved: dict[str, Any], keys: SigningKeys) -> tuple[dict[str, Any], bytes]:
    """The H200 example approved with host-ram waived, then re-issued with a purchase order linked."""
    record = with_purchase_order(approved)
    return record, record_pdf(record, keys)


@pytest.fixture(scope="module", params=[*(p.stem for p in EXAMPLES), "h200-approved-with-a-po",
                                        "fail-approved-with-waivers-and-a-po"])
def rendered(request: pytest.FixtureRequest) -> tuple[dict[str, Any], bytes]:
    """Each example's DRAFT PDF, and the signed PDFs of two approved records with a purchase order linked."""
    if request.param == "h200-approved-with-a-po":
        return request.getfixturevalue("approved_with_a_po")
    if request.param == "fail-approved-with-waivers-and-a-po":
        return request.getfixturevalue("busiest")
    return request.getfixturevalue("drafts")[request.param]


def _first_page(pdf: bytes, tmp_path: Path) -> str:
    return " ".join(pdftotext(pdf, tmp_path, "-f", "1", "-l", "1").split())


def _status_word(check: dict[str, Any]) -> str:
    return STATUS_LABELS[check["status"]]


def test_the_first_page_summarises_an_approved_record(busiest: tuple[dict[str, Any], bytes], tmp_path: Path) -> None:
    record, pdf = busiest

    page = _first_page(pdf, tmp_path)

    # Both verdicts
    assert "Verdict as evaluated FAIL" in page
    assert f"Verdict after waivers {record['verdict'].upper()}" in page
    # Every check with its status as a word, a waived one with the status it was given
    for check in record["checks"]:
        word = _status_word(check)
        if check.get("original_status"):
            word += f" (was {STATUS_LABELS[check['original_status']]})"
        assert re.search(rf"{re.escape(check['id'])} {re.escape(word)}", page), (check["id"], word)
    # The three headline figures
    time, memory, power = (_evidence(record, c) for c in ("time-to-result", "peak-memory", "rack-power"))
    assert f"{display_number(time['days'])} days expected" in page
    assert f"of the {display_number(time['window_days'])}-day window" in page
    assert f"{display_number(memory['total_gib'])} GiB needed of {display_number(memory['usable_gib'])} GiB usable" \
           in page and f"{display_number(memory['capacity_gib'])} GiB capacity" in page
    assert f"{display_number(power['worst_draw_kw'])} kW of {display_number(power['worst_limit_kw'])} kW" in page
    # Each waived check with the start of its justification
    assert len(record["waivers"]) > 1  # the failing example has several blocking checks
    for waiver in record["waivers"]:
        assert waiver["check_id"] in page
        assert " ".join(justification_for(waiver["check_id"]).split()[:5]) in page, waiver["check_id"]
    # Who approved, when; and the purchase order
    assert "approved by ada.approver (approver) on 2026-11-29" in page
    assert PURCHASE_ORDER["po_number"] in page


@pytest.mark.parametrize("example", [p.stem for p in EXAMPLES])
def test_the_first_page_of_every_example_names_each_check_and_the_headline_figures(
        drafts: dict[str, tuple[dict[str, Any], bytes]], example: str, tmp_path: Path) -> None:
    record, pdf = drafts[example]

    page = _first_page(pdf, tmp_path)

    assert f"Verdict as evaluated {record['verdict'].upper()}" in page
    assert f"Verdict after waivers {record['verdict'].upper()}" in page
    for check in record["checks"]:
        assert f"{check['id']} {_status_word(check)}" in page, check["id"]
    serving_only = next(c for c in record["checks"] if c["id"] == "time-to-result")["status"] == "not-applicable"
    labels = ("Serving latency", "Serving memory") if serving_only else ("Days to result", "Peak memory per GPU")
    for label in (*labels, "Worst rack power"):
        assert label in page
    if serving_only:  # the serving equivalents of days to result and peak memory
        capacity, memory = _evidence(record, "inference-capacity"), _evidence(record, "inference-memory")
        assert f"TTFT {display_number(capacity['ttft_ms'])} ms of {display_number(capacity['ttft_slo_ms'])} ms" \
               in page
        assert f"{display_number(memory['kv_cache_gib'])} GiB KV cache per GPU" in page
    else:
        assert f"{display_number(_evidence(record, 'time-to-result')['days'])} days expected" in page
    assert "No decision yet" in page


def test_the_first_page_is_the_whole_summary_and_the_details_follow(rendered: tuple[dict[str, Any], bytes],
                                                                    tmp_path: Path) -> None:
    _, pdf = rendered

    pages = pdftotext(pdf, tmp_path).split("\f")

    assert "Details follow" in " ".join(pages[0].split()), "the summary ends on page 1"
    assert "Record details" not in pages[0] and "Record details" in pages[1]


def _words_outside_the_text_area(record: dict[str, Any], pdf: bytes, tmp_path: Path) -> list[tuple[Any, ...]]:
    """Returns the words of ``pdf`` that lie past a side margin, or in the top or bottom margin without being a
    word of the running header or footer (the record's verdict, id, page and digest)."""
    margins = page_margins()
    running = set("quotecheck commissioning record · Verdict: page of DRAFT — not approved, not signed".split())
    running |= {record["verdict"].upper(), record_digest(record), *str(record.get("record_id")).split(),
                "(unsaved", "evaluation)"}
    outside = []
    for number, page in enumerate(pdf_pages(pdf, tmp_path), 1):
        body_top, body_bottom = margins.top - TOLERANCE_PT, page.height - margins.bottom + TOLERANCE_PT
        for word in page.words:
            if word.x_min < margins.left - TOLERANCE_PT or word.x_max > page.width - margins.right + TOLERANCE_PT:
                outside.append((number, word.text, "past a side margin", round(word.x_min), round(word.x_max)))
            elif not body_top <= word.y_min <= word.y_max <= body_bottom:
                in_margin = word.y_max <= margins.top or word.y_min >= page.height - margins.bottom
                if not in_margin or not (word.text in running or word.text.isdigit()):
                    outside.append((number, word.text, "in the top or bottom margin", round(word.y_min)))
    return outside


def test_no_word_lies_outside_the_text_area(rendered: tuple[dict[str, Any], bytes], tmp_path: Path) -> None:
    # Given the page's text area (A4 less the @page margins of templates/record.css), the running header and
    # footer in the top and bottom margins
    record, pdf = rendered

    # When each page's words are placed as poppler reads them
    outside = _words_outside_the_text_area(record, pdf, tmp_path)

    # Then each lies between the side margins and either inside the body or wholly in a running line
    assert not outside, outside[:12]


def test_a_nested_table_of_long_names_wraps_inside_the_text_area(evaluation: dict[str, Any], tmp_path: Path) -> None:
    # Given racks whose evidence only a sub-table can hold (a nested value in each row) with names of 64 letters
    record = copy.deepcopy(evaluation)
    racks = next(c for c in record["checks"] if c["id"] == "rack-power")["evidence"]["racks"]
    for rack in racks:
        rack.update(name="rack-" + "x" * 59, node_groups={"h200-training-group-" + "y" * 44: 4})

    # When its PDF is rendered
    pdf = record_pdf(record)

    # Then the racks' table wraps its names and keeps inside the margins
    assert "node_groups" in pdftotext(pdf, tmp_path)
    assert not _words_outside_the_text_area(record, pdf, tmp_path)


def _lowest_body_word(page: Page) -> float:
    margins = page_margins()
    bottom = page.height - margins.bottom
    return max((w.y_max for w in page.words if w.y_min >= margins.top - TOLERANCE_PT and w.y_max <= bottom + 1),
               default=0.0)


def test_no_page_but_the_last_is_nearly_blank(rendered: tuple[dict[str, Any], bytes], tmp_path: Path) -> None:
    """The record forces one page break, after the one-page summary; everything after it flows. So a page that
    ends above 40 % of its height is never the natural end of a section: it is a block too tall for what was
    left of the page, or text pushed past a forced break (a linked purchase order pushed the cover's last lines
    onto page 2, which the checks summary's forced break then left empty). Only the last page may be short."""
    _, pdf = rendered

    pages = pdf_pages(pdf, tmp_path)

    short = [(number, f"{_lowest_body_word(page) / page.height:.0%}") for number, page in enumerate(pages[:-1], 1)
             if _lowest_body_word(page) < NEARLY_BLANK * page.height]
    assert not short, f"pages ending above {NEARLY_BLANK:.0%} of their height: {short}"


def _lead_lines(page: str) -> dict[str, str]:
    """Returns, for each label of the lead block (the table above "Headline figures"), the rest of its line as
    ``pdftotext -layout`` reads it, whitespace collapsed."""
    lead = page[:page.index("Headline figures")]
    lines = {}
    for label in ("Quote total", "Cost per run", "Cost per million tokens", "Days to result", "Days range", "GPUs",
                  "Top finding"):
        line = next((ln for ln in lead.splitlines() if ln.strip().startswith(label)), None)
        assert line is not None, f"{label!r} is not among the lines above the headline figures: {lead!r}"
        lines[label] = " ".join(line.split())[len(label):].strip()
    return lines


@pytest.mark.parametrize("example", ["h200-128node-pretraining", "dgx-h100-70b-finetune"])
def test_the_first_page_leads_with_the_buyers_figures(drafts: dict[str, tuple[dict[str, Any], bytes]], example: str,
                                                      tmp_path: Path) -> None:
    # Given a priced training quote (the DGX one in EUR) and its DRAFT PDF
    record, pdf = drafts[example]
    e = _evidence(record, "time-to-result")
    money = e["cost_currency"]
    ends = e["days_range"] or (e["days_p50"], e["days_p99"])  # the modelled band, else the simulated p50 to p99

    # When its first page is read back with poppler in layout order
    lead = _lead_lines(pdftotext(pdf, tmp_path, "-f", "1", "-l", "1", "-layout"))

    # Then the lead, above the headline figures, holds the record's figures as the evidence gives them
    assert lead["Quote total"] == f"{e['currency']} {display_number(e['quote_total'])}"
    assert lead["Cost per run"] == f"{money} {display_number(e['cost_per_run'])}"
    assert lead["Cost per million tokens"] == f"{money} {display_number(e['cost_per_million_tokens'])}"
    assert lead["Days to result"] == (f"{display_number(e['days'])} days expected against the "
                                      f"{display_number(e['window_days'])}-day window")
    assert lead["Days range"].startswith(f"{display_number(ends[0])} to {display_number(ends[1])} days")
    assert lead["GPUs"] == f"{display_number(e['gpus_needed'])} GPUs needed of {display_number(e['gpus'])} quoted"
    first = next((c for s in ("fail", "warn") for c in record["checks"] if c["status"] == s), None)
    if first is None:
        assert lead["Top finding"] == "every check passes"
    else:
        assert lead["Top finding"].startswith(f"{first['status'].upper()} {first['id']}:")


def test_the_lead_says_what_a_quote_leaves_unpriced_or_does_not_ask(
        drafts: dict[str, tuple[dict[str, Any], bytes]], tmp_path: Path) -> None:
    # Given a training quote without prices, a serving-only quote and a failing quote
    unpriced, serving, failing = (drafts[n] for n in ("hgx-h200-8b-first-quote", "l40s-8b-serving",
                                                        "fail-70b-ddp-one-rack"))

    # When their first pages are read back
    lead_of = {name: _lead_lines(pdftotext(pdf, tmp_path, "-f", "1", "-l", "1", "-layout"))
               for name, (_, pdf) in (("unpriced", unpriced), ("serving", serving), ("failing", failing))}

    # Then a figure the evidence lacks is said, never left blank
    assert _evidence(unpriced[0], "time-to-result")["quote_total"] is None
    for label in ("Quote total", "Cost per run", "Cost per million tokens"):
        assert lead_of["unpriced"][label].startswith("not priced"), lead_of["unpriced"][label]
    for label in ("Quote total", "Cost per run", "Days to result", "Days range"):
        assert lead_of["serving"][label].startswith("not applicable"), lead_of["serving"][label]
    # A serving-only quote's GPUs and cost per million tokens are its serving figures
    capacity = _evidence(serving[0], "inference-capacity")
    assert lead_of["serving"]["GPUs"].startswith(
        f"{display_number(capacity['gpus_needed'])} GPUs needed of {display_number(capacity['gpus_quoted'])} quoted")
    assert lead_of["serving"]["Cost per million tokens"].startswith(
        f"{capacity['cost_currency']} {display_number(capacity['cost_per_million_tokens_served'])}")
    # The finding that matters most is the first failing check, ahead of any warning before it
    first_fail = next(c for c in failing[0]["checks"] if c["status"] == "fail")
    assert lead_of["failing"]["Top finding"].startswith(f"FAIL {first_fail['id']}:")

"""What a check's section lists in the PDF: evidence the section already shows named once, short rows in a
grid of three columns, and the inputs given as text or left out counted there and listed in the appendix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from record_support import pdftotext

from service.record.listing import COLUMN_GAP, EVIDENCE_LINE_CHARS, GRID_COLUMNS, key_value_blocks
from service.record.view import IN_MESSAGE, REPEATED_MIN_CHARS, evidence_rows, record_view

CELL = (EVIDENCE_LINE_CHARS - (GRID_COLUMNS - 1) * COLUMN_GAP) // GRID_COLUMNS
NOTE = "; the rough rule of the guide undercounts because it omits the fp32 master weights"


def test_evidence_text_the_message_holds_is_named_not_repeated() -> None:
    evidence = {"total_gib": 38.8, "seed_note": NOTE, "inputs": ["/quote/x"], "sharding": "zero1"}

    rows = evidence_rows(evidence, "estimated peak 38.8 GiB fits" + NOTE)

    assert rows == [("total_gib", 38.8), ("seed_note", IN_MESSAGE), ("sharding", "zero1")]  # inputs: own paragraphs


def test_a_short_text_is_listed_even_when_the_message_holds_it() -> None:
    short = "x" * (REPEATED_MIN_CHARS - 1)

    assert evidence_rows({"note": short}, f"because {short}") == [("note", short)]


def test_a_duplicated_evidence_text_is_shown_once() -> None:
    # Given a detail that holds a source sentence whole, a list equal to another, and no message holding them
    source = "NVLink per direction × interconnect.nvlink_busbw_fraction; 8 NICs per node"
    strategies = ["ddp", "zero1", "zero2", "fsdp-hybrid", "zero3", "fsdp-full"]
    evidence = {"bandwidth_source": source, "detail": f"modelled step; bandwidths from {source}",
                "fitting_list": strategies, "comfortable_list": list(strategies)}

    rows = dict(evidence_rows(evidence, "scaling efficiency 100%"))

    # Then the longer text and the first list are shown whole, the others name them
    assert rows == {"bandwidth_source": "(part of detail)", "detail": evidence["detail"],
                    "fitting_list": strategies, "comfortable_list": "(same as fitting_list)"}


def test_short_rows_share_lines_in_a_grid_of_three_columns_in_their_order() -> None:
    items = [("weights_gib", 4.229), ("gradients_gib", 4.229), ("optimizer_gib", 0.793), ("activations_gib", 24.08),
             ("buffer_framework", "deepspeed-zero and a longer name"), ("total_gib", 38.77)]

    [block] = key_value_blocks(items)

    step = CELL + COLUMN_GAP
    first, second, third = block["text"].split("\n")
    assert [first.index(key) for key in ("weights_gib", "gradients_gib", "optimizer_gib")] == [0, step, 2 * step]
    assert first.index("4.229") == first.index("0.793") - 2 * step  # values at the grid's own key column
    # a row longer than a column takes two; the next row, finding no column left, starts the next line
    assert second.index("activations_gib") == 0 and second.index("buffer_framework") == step
    assert third.startswith("total_gib") and third.endswith("38.77")


def test_a_row_longer_than_the_grid_keeps_a_line_of_its_own_wrapped_at_the_value_column() -> None:
    long = "a catalogue figure " * 12
    items = [("a", 1), ("cuda_context_source", long), ("b", 2)]

    [block] = key_value_blocks(items)

    first, second, *continued, last = block["text"].split("\n")
    assert first.split() == ["a", "1"] and last.split() == ["b", "2"]
    assert second.startswith("cuda_context_source")
    assert continued and all(line.startswith(" " * len("cuda_context_source  ")) for line in continued)
    assert all(len(line) <= EVIDENCE_LINE_CHARS for line in block["text"].split("\n"))


def test_text_or_absent_inputs_are_counted_in_the_check_and_listed_once_in_the_appendix(
        signed_pdf: bytes, approved: dict[str, Any], tmp_path: Path) -> None:
    view = record_view(approved, draft=False)
    text_inputs = {q["pointer"] for q in view["text_inputs"]}
    per_check = {q["pointer"] for c in view["checks"] for source, group in c["input_groups"]
                 if source == "text or absent" for q in group}

    text = pdftotext(signed_pdf, tmp_path)

    assert text_inputs == per_check and "/workload/training/model/name" in text_inputs
    checks, appendix = text.split("Appendix: every input and its source")
    assert "given as text or absent (no figure): appendix)" in " ".join(checks.split())
    assert "/workload/training/model/name" not in checks
    assert " ".join(appendix.split()).count("/workload/training/model/name") == 1


def test_the_pdf_prints_a_check_s_explanation_once(signed_pdf: bytes, tmp_path: Path) -> None:
    """interconnect-scaling's message explains its bandwidths; its evidence (detail, bandwidth_source) holds the
    same sentences and names them instead."""
    text = pdftotext(signed_pdf, tmp_path)

    assert text.count("nvlink_busbw_fraction") == 1
    assert IN_MESSAGE in text


def test_the_appendix_lists_inputs_of_array_elements_that_agree_once() -> None:
    from service.record.pointers import same_across_elements

    def q(value: Any, source: str = "vendor_limit", ref: str | None = "datasheet") -> dict[str, Any]:
        return {"value": value, "source": source, "ref": ref}

    rows = [("/quote/node_groups/0/count", q(128, "assumption", None)), ("/quote/node_groups/0/gpu/tdp_w", q(700)),
            ("/quote/node_groups/1/count", q(4, "assumption", None)), ("/quote/node_groups/1/gpu/tdp_w", q(700)),
            ("/quote/node_groups/2/gpu/tdp_w", q(700, ref="another datasheet")), ("/quote/racks", "2 more inputs")]

    assert same_across_elements(rows) == [
        ("/quote/node_groups/0/count", q(128, "assumption", None)), ("/quote/node_groups/{0–1}/gpu/tdp_w", q(700)),
        ("/quote/node_groups/1/count", q(4, "assumption", None)),
        ("/quote/node_groups/2/gpu/tdp_w", q(700, ref="another datasheet")), ("/quote/racks", "2 more inputs")]

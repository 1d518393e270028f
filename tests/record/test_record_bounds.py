"""Listings are bounded in the PDF: pointers compressed, the appendix and tables cut with a count, so that the
largest quote the schema admits lays out as a record of ordinary length."""

from __future__ import annotations

import copy
import json
from io import BytesIO
from pathlib import Path
from typing import Any

from pyhanko.pdf_utils.reader import PdfFileReader
from record_support import EXAMPLE, pdftotext

from rules.evaluate import evaluate
from schemas.json_reader import MAX_JSON_BYTES
from service.record import record_pdf
from service.record.listing import TABLE_MAX_ROWS, VALUE_MAX_CHARS, key_value_blocks, text_table
from service.record.pointers import APPENDIX_ARRAY_ITEMS, APPENDIX_MAX_ROWS, appendix_rows, compact_pointers

MAX_PAGES = 40  # issue 13: no GET of a record costs more than a render of a 40-page record


def _largest_submission() -> dict[str, Any]:
    """Returns the H200 example grown to the schema's limits: 64 node groups of 32 NICs, 256 racks, 2,000 line
    items with the longest texts (about 1.7 MB, under the 2 MiB a request may carry)."""
    submission = json.loads(EXAMPLE.read_text())
    quote = submission["quote"]
    nics = quote["node_groups"][0]["nics"] + [{"model": f"NIC-{i}" + "x" * 80, "count": 1, "gbps": 100,
                                               "purpose": "management"} for i in range(29)]
    extra = []
    for index in range(62):
        group = copy.deepcopy(quote["node_groups"][1])
        group.update(name=f"extra-group-{index:02d}" + "g" * 40, count=1, nics=copy.deepcopy(nics))
        extra.append(group)
    quote["node_groups"] += extra
    quote["racks"] += [dict(copy.deepcopy(quote["racks"][1]), name=f"rack-{i:03d}" + "r" * 50, node_groups={})
                       for i in range(254)]
    quote["line_items"] = [{"sku": f"SKU-{i:04d}" + "X" * 90, "description": "d" * 500, "quantity": 1,
                            "unit_price": 100} for i in range(2000)]
    return submission


def test_array_elements_that_read_the_same_members_are_named_once_with_index_ranges() -> None:
    pointers = [f"/quote/line_items/{i}/{m}" for i in range(2000) for m in ("quantity", "unit_price")]
    pointers += ["/quote/node_groups/0/count", "/quote/node_groups/2/count", "/quote/node_groups/3/count",
                 "/workload/training/gpus"]

    assert compact_pointers(pointers) == ("/quote/line_items/{0–1999}/{quantity, unit_price} · "
                                          "/quote/node_groups/{0, 2–3}/count · /workload/training/gpus")


def test_the_appendix_lists_the_first_elements_of_an_array_and_counts_the_rest() -> None:
    inputs = [{"pointer": f"/quote/racks/{i}/count", "value": 1, "source": "assumption"} for i in range(256)]
    inputs.append({"pointer": "/workload/training/gpus", "value": 8, "source": "assumption"})

    rows = appendix_rows(inputs)

    assert [pointer for pointer, _ in rows] == [*(f"/quote/racks/{i}/count" for i in range(APPENDIX_ARRAY_ITEMS)),
                                                f"/quote/racks/{APPENDIX_ARRAY_ITEMS}–255", "/workload/training/gpus"]
    assert rows[APPENDIX_ARRAY_ITEMS][1] == "248 more inputs of these elements; the attached JSON holds them"


def test_the_appendix_stops_after_its_most_rows_and_counts_what_is_left() -> None:
    inputs = [{"pointer": f"/workload/x{i:05d}", "value": i, "source": "assumption"} for i in range(1000)]

    rows = appendix_rows(inputs)

    assert len(rows) == APPENDIX_MAX_ROWS + 1
    assert rows[-1] == ("…", f"{1000 - APPENDIX_MAX_ROWS:,} more inputs; the attached JSON holds them")


def test_a_long_table_and_a_long_value_are_cut_with_a_count() -> None:
    racks = [{"name": f"rack-{i}", "draw_kw": 40.5} for i in range(256)]

    table = text_table(racks, 100)
    [block] = key_value_blocks([("names", ", ".join(r["name"] for r in racks))])

    assert table is not None and len(table) == TABLE_MAX_ROWS + 2  # header, rows, the count
    assert table[-1] == f"… {256 - TABLE_MAX_ROWS} more rows (256 in all); the attached JSON holds them"
    assert "(2,448 characters in all; the attached JSON holds the whole value)" in " ".join(block["text"].split())
    assert len(block["text"].split("\n")) <= VALUE_MAX_CHARS // 80 + 2  # lines of about 86 characters


def test_the_largest_quote_the_schema_admits_lays_out_as_an_ordinary_record(tmp_path: Path) -> None:
    # Given the largest submission a request may carry, evaluated (10,000 inputs)
    submission = _largest_submission()
    assert len(json.dumps(submission)) < MAX_JSON_BYTES
    record = evaluate(submission)
    assert len(record["inputs"]) > 10_000

    # When its DRAFT PDF is rendered
    pdf = record_pdf(record)

    # Then it is about as long as the example's, every check is there, and the cuts say so
    assert int(PdfFileReader(BytesIO(pdf)).root["/Pages"]["/Count"]) <= MAX_PAGES
    text = " ".join(pdftotext(pdf, tmp_path).split())
    assert all(check["id"] in text for check in record["checks"])
    assert "/quote/line_items/{0–1999}/" in text
    assert "more inputs of these elements; the attached JSON holds them" in text

"""The CSV (RFC 4180) of a comparison of stored quotes: one row per quote, the ranked ones first, by rank.

A number cell holds a plain decimal number (no unit, no currency sign, no exponent, no thousands separator); the
unit is in the column's name, and the money columns are in the row's ``currency``. An unknown figure is an empty
cell, and so is the rank of a quote that is not ranked: its ``stopped_by`` names the checks that stop it, each
``check-id: message``, separated by `` | ``. Text cells that a spreadsheet would run as a formula are written with
a leading apostrophe (service/exports/tables.py ``cell``).
"""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from typing import Any

from service.exports.tables import cell

COMPARISON_COLUMNS = (
    "rank", "submission_id", "vendor", "quote_id", "passes", "soonest_that_passes", "cheapest_that_passes",
    "stopped_by", "waived_checks", "verdict", "verdict_after_waivers", "layout", "tensor_parallel",
    "pipeline_parallel", "context_parallel", "data_parallel", "sharding", "micro_batch", "gpus", "throughput_from",
    "days_p50", "days_p90", "days_expected", "days_range_fast", "days_range_slow", "window_days", "currency",
    "quote_total_in_currency", "cost_per_run_in_currency", "cost_per_million_tokens_in_currency",
)
NUMERIC_COLUMNS = frozenset({
    "rank", "tensor_parallel", "pipeline_parallel", "context_parallel", "data_parallel", "micro_batch", "gpus",
    "days_p50", "days_p90", "days_expected", "days_range_fast", "days_range_slow", "window_days",
    "quote_total_in_currency", "cost_per_run_in_currency", "cost_per_million_tokens_in_currency",
})
STOPPED_BY_SEPARATOR = " | "


def number_cell(value: Any) -> str:
    """Returns ``value`` as a plain decimal number ('' for None or a value that is not a finite number)."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    if isinstance(value, int):
        return str(value)
    exact = Decimal(repr(value))
    if not exact.is_finite():
        return ""
    text = format(exact, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _row(row: dict[str, Any], soonest: str | None, cheapest: str | None) -> dict[str, Any]:
    layout = row.get("assumed_layout") or {}
    band = row.get("days_range") or [None, None]
    stopped = STOPPED_BY_SEPARATOR.join(f"{stop['id'] or 'evaluation'}: {stop['message']}"
                                        for stop in row.get("stopped_by") or [])
    return {
        "rank": row.get("rank"), "submission_id": row["name"], "vendor": row.get("vendor"),
        "quote_id": row.get("quote_id"), "passes": bool(row.get("passes")),
        "soonest_that_passes": row["name"] == soonest, "cheapest_that_passes": row["name"] == cheapest,
        "stopped_by": stopped, "waived_checks": " ".join(row.get("waived_checks") or []),
        "verdict": row.get("verdict"), "verdict_after_waivers": row.get("verdict_after_waivers"),
        "layout": row.get("layout"), "tensor_parallel": layout.get("tensor"),
        "pipeline_parallel": layout.get("pipeline"), "context_parallel": layout.get("context"),
        "data_parallel": layout.get("data"),
        "sharding": layout.get("sharding"), "micro_batch": layout.get("micro_batch"), "gpus": row.get("gpus_quoted"),
        "throughput_from": row.get("throughput_from"), "days_p50": row.get("days_p50"),
        "days_p90": row.get("days_p90"), "days_expected": row.get("days"), "days_range_fast": band[0],
        "days_range_slow": band[1], "window_days": row.get("window_days"), "currency": row.get("currency"),
        "quote_total_in_currency": row.get("quote_total"), "cost_per_run_in_currency": row.get("cost_per_run"),
        "cost_per_million_tokens_in_currency": row.get("cost_per_million_tokens"),
    }


def comparison_csv(result: dict[str, Any]) -> str:
    """Returns a quote comparison's result (``passing``, ``not_ranked``, ``soonest``, ``cheapest``) as CSV."""
    soonest, cheapest = (((result.get(name) or {}).get("name")) for name in ("soonest", "cheapest"))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COMPARISON_COLUMNS)
    for row in [*result["passing"], *result["not_ranked"]]:
        values = _row(row, soonest, cheapest)
        writer.writerow([number_cell(values[c]) if c in NUMERIC_COLUMNS else cell(values[c])
                         for c in COMPARISON_COLUMNS])
    return out.getvalue()

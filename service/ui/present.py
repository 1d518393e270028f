"""How the pages write things: status and verdict labels (words and a symbol, never colour alone), the order of
checks, evidence as rows and an estimate beside its measurement. Which forms a signed-in user is shown is decided by
service/app/review.py (forms_for)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from service.app.review import State
from service.record.view import SOURCE_LABELS, display_number, exact

# Each status as a word and a symbol; the stylesheet adds a colour, which only repeats what these say.
STATUS = {"fail": ("FAIL", "✕"), "insufficient-data": ("NEEDS DATA", "?"), "warn": ("WARN", "!"),
          "pass": ("PASS", "✓"), "waived": ("WAIVED", "✓"), "not-applicable": ("N/A", "–")}
VERDICT = {"fail": ("FAIL", "✕"), "incomplete": ("INCOMPLETE", "?"), "warn": ("WARN", "!"), "pass": ("PASS", "✓")}
# Failed and warned checks first, as a reviewer works through them.
CHECK_ORDER = {"fail": 0, "insufficient-data": 1, "warn": 2, "pass": 3, "not-applicable": 4}
STATE_WORDS = {
    State.SUBMITTED: "submitted, not yet evaluated",
    State.EVALUATED: "evaluated: awaiting review and approval",
    State.CHANGES_REQUESTED: "changes requested: awaiting a revised quote",
    State.REVISED: "revised, not yet evaluated",
    State.APPROVED: "approved (final)",
    State.REJECTED: "rejected (final)",
}
SOURCE_WORDS = {**SOURCE_LABELS, "measurement": "measurement", "facility_design": "facility value",
                "catalogue": "catalogue"}
# Evidence names of an estimate, by the prefix the measured figure's name replaces.
ESTIMATE_PREFIXES = ("estimated_", "modelled_")


def moment(value: datetime | str | None) -> str:
    """Returns a time to the minute in UTC (``2026-12-02 14:05 UTC``) from a datetime (naive: UTC) or ISO text."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def sorted_checks(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns the checks failed first, then incomplete, warned, passed and not applicable (stable otherwise)."""
    return sorted(checks, key=lambda check: CHECK_ORDER.get(check["status"], len(CHECK_ORDER)))


def figure(value: Any) -> str:
    """Returns an evidence value as a page writes it: a figure as the record does, anything else as JSON."""
    return display_number(value) if isinstance(value, int | float | bool) or value is None else exact(value)


def evidence_rows(evidence: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Returns the evidence as (name, value) rows, figures as the record writes them; the inputs list apart."""
    return [(name, figure(value)) for name, value in evidence.items() if name != "inputs"]


def estimate_pairs(evidence: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Returns each figure the evidence gives both estimated (or modelled) and measured, side by side."""
    pairs = []
    for name, measured in evidence.items():
        if not name.startswith("measured_"):
            continue
        figure = name.removeprefix("measured_")
        for prefix in ESTIMATE_PREFIXES:
            if prefix + figure in evidence:
                pairs.append({"figure": figure, "estimate_name": prefix + figure,
                              "estimate": display_number(evidence[prefix + figure]),
                              "measured_name": name, "measured": display_number(measured)})
                break
    return pairs


def inputs_of(record: Mapping[str, Any], evidence: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Returns the inputs a check read, each with its value and source (measurement, vendor limit, …)."""
    known = {q["pointer"]: q for q in [*(record.get("catalogue_fills") or []), *(record.get("default_fills") or [])]}
    known.update({q["pointer"]: q for q in record.get("inputs") or []})
    missing = set(evidence.get("missing") or [])
    rows = []
    for pointer in evidence.get("inputs") or []:
        quantity = known.get(pointer)
        if quantity is None:
            source = "missing" if pointer in missing else "text or absent"
            rows.append({"pointer": pointer, "value": "—", "source": SOURCE_WORDS[source], "ref": None})
        else:
            source = SOURCE_WORDS.get(quantity["source"], quantity["source"])
            rows.append({"pointer": pointer, "value": exact(quantity["value"]), "source": source,
                         "ref": quantity.get("ref")})
    return rows

"""What the record's PDF shows of a record: the cover facts, each check with its chart, evidence and inputs,
the appendix, and how numbers and text are written there. The template (templates/record.html) lays it out;
service/record/render.py turns it into HTML and PDF.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from rules.evaluate import verdict_of
from schemas.text import visible
from service.record.canonical import canonical_bytes, record_digest
from service.record.charts import chart_for, chart_title
from service.record.free_text import NAME_BOUND, NOTES_BOUND, PARAGRAPH_BOUND, bounded, bounded_or_none

STATUS_LABELS = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "insufficient-data": "NEEDS DATA",
                 "not-applicable": "N/A", "waived": "WAIVED"}
SOURCE_LABELS = {"measurement": "measured", "vendor_limit": "vendor limit", "facility_design": "facility design",
                 "assumption": "assumption", "missing": "MISSING", "text or absent": "text or absent (no figure)"}
# Cover page workload figures: (label, input pointer or training-objective evidence name).
WORKLOAD_FIGURES = (
    ("Objective", "objective"),
    ("Model", "model_name"),
    ("Parameters", "/workload/training/model/parameters"),
    ("Trainable parameters", "trainable_parameters"),
    ("Precision", "precision"),
    ("Optimizer", "optimizer"),
    ("Training GPUs", "/workload/training/gpus"),
    ("Sequence length", "/workload/training/sequence_length"),
    ("Global batch", "/workload/training/global_batch"),
    ("Dataset tokens", "/workload/training/dataset_tokens"),
    ("Completion window (days)", "/workload/training/completion_window_days"),
    ("Serving requests/s", "/workload/inference/rps"),
    ("Serving context tokens", "/workload/inference/context_tokens"),
    ("Serving TTFT p95 (ms)", "/workload/inference/slo/ttft_ms_p95"),
    ("Serving TPOT p95 (ms)", "/workload/inference/slo/tpot_ms_p95"),
)


# --- formatting ------------------------------------------------------------------------------------------

def display_number(value: Any) -> str:
    """Returns a figure for a table: integers exact with separators, floats to four significant digits."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value) or value == 0:
            return str(value) if value else "0"
        magnitude = math.floor(math.log10(abs(value)))
        if magnitude >= 15 or magnitude < -4:
            return f"{value:.4g}"
        decimals = max(0, 3 - magnitude)
        text = f"{value:,.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return str(value)


def exact(value: Any) -> str:
    """Returns an input value as given: integers with separators, floats in full, containers as compact JSON."""
    if isinstance(value, bool) or value is None:
        return display_number(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict | list):
        return canonical_bytes(value).decode("utf-8")
    return str(value)


def _is_nested(value: Any) -> bool:
    """Returns True for a value shown as a sub-table: a non-empty object, or a list holding objects or lists."""
    if isinstance(value, Mapping):
        return bool(value)
    return isinstance(value, list | tuple) and any(isinstance(item, Mapping | list | tuple) for item in value)


def flat(value: Any) -> str:
    """Returns a value that is not nested as one line: a figure, a list of figures joined, or '(none)'."""
    if isinstance(value, list | tuple):
        return ", ".join(display_number(item) for item in value) if value else "(none)"
    if isinstance(value, Mapping):
        return "(empty)"
    if isinstance(value, str) and not value:
        return "(empty)"
    return display_number(value)


# Widths (characters) a key column snaps to, so that most tables share one.
KEY_COLUMNS = (18, 22, 26, 30, 34, 38)
POINTER_COLUMNS = (30, 38, 46, 54, 62)
# Characters per line of the monospace key/value blocks: the 177 mm text width of the page (A4 less margins
# and padding) over the advance of DejaVu Sans Mono (0.602 em) at the block's font size, less a margin of 2.
EVIDENCE_LINE_CHARS = 104  # 7.8 pt (templates/record.css .kv)
APPENDIX_LINE_CHARS = 116  # 7 pt (.appendix-inputs .kv)


def key_value_blocks(items: list[tuple[str, Any]], *, columns: tuple[int, ...] = KEY_COLUMNS,
                     line_chars: int = EVIDENCE_LINE_CHARS, text: Any = None,
                     nested: Any = None) -> list[dict[str, Any]]:
    """Returns a two-column listing as blocks: runs of plain rows as one preformatted text, nested values apart.

    A row is the key padded to the column width, then the value, wrapped here with continuation lines
    indented to the value column: in a monospace font every value starts at the same place. A run of rows
    is one block of text because WeasyPrint lays out one block of N lines several times faster than N table
    rows, and a record has hundreds. Nested values (objects, lists of objects) get a sub-table.
    """
    text, nested = text or flat, nested or _is_nested
    longest = max((len(key) for key, _ in items), default=0) + 2
    width = next((w for w in columns if w >= longest), columns[-1])
    blocks: list[dict[str, Any]] = []
    lines: list[str] = []
    for key, value in items:
        if nested(value):
            if lines:
                blocks.append({"text": "\n".join(lines)})
                lines = []
            blocks.append({"key": key, "value": value})
        else:
            lines += _wrapped_row(key, text(value), width, line_chars)
    if lines:
        blocks.append({"text": "\n".join(lines)})
    return blocks


def _wrapped_row(key: str, value: str, width: int, line_chars: int) -> list[str]:
    head = key.ljust(width) if len(key) < width else key + "  "
    room = max(line_chars - len(head), 24)
    chunks: list[str] = []
    for paragraph in value.split("\n"):
        chunks += textwrap.wrap(paragraph, room, break_on_hyphens=False) or [""]
    return [head + chunks[0]] + [" " * len(head) + chunk for chunk in chunks[1:]]


def column_names(rows: list[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(key for row in rows for key in row))


def shown(value: Any) -> Any:
    """Returns text as it is to be shown: invisible and reordering characters written out as ``<U+XXXX>``.

    Every value the template outputs passes through here (Jinja's ``finalize``) before it is escaped, so
    text stored before intake refused such characters (a vendor ``EUR \u202e000,052\u202c``) cannot
    display as something else ("EUR 250,000"). Markup (the charts) escapes and shows its own text.
    """
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value)
    return value


# --- the view of a record --------------------------------------------------------------------------------

def _inputs_by_pointer(record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    by_pointer = {q["pointer"]: dict(q) for q in record.get("catalogue_fills") or []}
    by_pointer.update({q["pointer"]: dict(q) for q in record.get("inputs") or []})
    return by_pointer


def _number_references(inputs: list[dict[str, Any]]) -> list[str]:
    """Numbers each distinct reference once (catalogue refs repeat across inputs); sets ``ref_number``."""
    numbers: dict[str, int] = {}
    for quantity in inputs:
        ref = quantity.get("ref")
        if ref:
            quantity["ref_number"] = numbers.setdefault(ref, len(numbers) + 1)
    return list(numbers)


def _workload(record: Mapping[str, Any], inputs: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, Any]]:
    objective = next((c.get("evidence") or {} for c in record["checks"] if c["id"] == "training-objective"), {})
    figures = []
    for label, name in WORKLOAD_FIGURES:
        if name.startswith("/"):
            if name in inputs:
                figures.append((label, inputs[name]["value"]))
        elif objective.get(name) not in (None, ""):
            figures.append((label, objective[name]))
    groups = []
    for index in range(64):
        nodes = inputs.get(f"/quote/node_groups/{index}/count")
        if nodes is None:
            break
        gpus = inputs.get(f"/quote/node_groups/{index}/gpu/count")
        groups.append(f"{display_number(nodes['value'])} nodes" + (f" × {display_number(gpus['value'])} GPUs"
                                                                   if gpus else ""))
    if groups:
        figures.append(("Quoted nodes", "; ".join(groups)))
    return figures


def record_view(record: Mapping[str, Any], *, draft: bool) -> dict[str, Any]:
    """Returns what the template shows of a record: cover facts, each check with chart and inputs, the appendix."""
    inputs = _inputs_by_pointer(record)
    submission = record["submission"]
    waiver_of = {w.get("check_id"): _bounded_waiver(w) for w in record.get("waivers") or []}
    checks = []
    for check in record["checks"]:
        evidence = check.get("evidence") or {}
        pointers = evidence.get("inputs") or []
        checks.append({
            **check,
            "original_status": check.get("original_status"),
            "waiver": _bounded_waiver(check["waiver"]) if check.get("waiver") else waiver_of.get(check["id"]),
            "chart": (chart := chart_for(check)),
            "chart_title": chart_title(chart) if chart else "",
            "evidence": key_value_blocks([(k, v) for k, v in evidence.items() if k != "inputs"]),
            "thresholds": key_value_blocks(list((check.get("thresholds") or {}).items())),
            "input_groups": _group_by_source([inputs.get(p) or _unrecorded(p, evidence) for p in pointers]),
        })
    summary = [(status, count) for status, count in (record.get("summary") or {}).items() if count]
    # A final record counts waived checks as passed in ``verdict``; each keeps the status it was given.
    evaluated_verdict = verdict_of([c.get("original_status") or c["status"] for c in record["checks"]])
    status_of = {c["id"]: c.get("original_status") or c["status"] for c in record["checks"]}
    waivers = [{**_bounded_waiver(waiver), "status": status_of.get(waiver.get("check_id"))}
               for waiver in record.get("waivers") or []]
    appendix = sorted(inputs.values(), key=lambda q: q["pointer"])
    references = _number_references(appendix)
    return {
        "draft": draft,
        "record_id": record.get("record_id") or "(unsaved evaluation)",
        "record_digest": record_digest(dict(record)),
        "verdict": record["verdict"],
        "evaluated_verdict": evaluated_verdict,
        "waivers": waivers,
        "summary": summary,
        "vendor": bounded(submission.get("vendor") or "(not named)", NAME_BOUND),
        "quote_id": bounded(submission.get("quote_id") or "(none)", NAME_BOUND),
        "notes": bounded_or_none(submission.get("notes"), NOTES_BOUND),
        "submission_id": submission.get("id"),
        "revision": submission.get("revision"),
        "submission_digest": submission["digest"],
        "evaluated_at": record["evaluated_at"],
        "policy": record["policy"],
        "engine": record["engine"],
        "workload": _workload(record, inputs),
        "decisions": [_bounded_decision(d) for d in record.get("decisions") or []],
        "purchase_orders": [_bounded_names(po, "actor") for po in record.get("purchase_orders") or []],
        "issue": record.get("issue"),
        "supersedes": record.get("supersedes"),
        "checks": checks,
        "layout_search": record.get("layout_search"),
        "appendix": _appendix_text(appendix),
        "references": references,
    }


SOURCE_ORDER = ("measurement", "vendor_limit", "facility_design", "assumption", "missing", "text or absent")


def _group_by_source(quantities: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Returns the inputs grouped by source (measurements first, assumptions after the sourced ones).

    Grouping keeps a check's inputs to a few paragraphs: WeasyPrint lays out hundreds of small inline boxes
    slowly, and a reader scans by source anyway.
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for quantity in quantities:
        groups.setdefault(quantity["source"], []).append(quantity)
    rank = {source: i for i, source in enumerate(SOURCE_ORDER)}
    return sorted(groups.items(), key=lambda item: rank.get(item[0], len(rank)))


def _appendix_text(inputs: list[dict[str, Any]]) -> str:
    """Returns the appendix listing: every input, then its value, source and reference number."""
    def describe(quantity: Mapping[str, Any]) -> str:
        ref = f" · [{quantity['ref_number']}]" if quantity.get("ref_number") else ""
        return f"{exact(quantity['value'])} · {SOURCE_LABELS.get(quantity['source'], quantity['source'])}{ref}"

    items = [("input", "value · source · reference"), *((q["pointer"], q) for q in inputs)]
    blocks = key_value_blocks(items, columns=POINTER_COLUMNS, line_chars=APPENDIX_LINE_CHARS,
                              text=lambda v: v if isinstance(v, str) else describe(v), nested=lambda v: False)
    return "\n".join(block["text"] for block in blocks)


def _unrecorded(pointer: str, evidence: Mapping[str, Any]) -> dict[str, Any]:
    # record["inputs"] keeps the provenance of numbers; a text input (a model name) or a missing one is not there.
    missing = pointer in (evidence.get("missing") or [])
    return {"pointer": pointer, "value": None, "source": "missing" if missing else "text or absent",
            "unrecorded": True}


def _bounded_names(entry: Mapping[str, Any], *names: str) -> dict[str, Any]:
    """Returns ``entry`` with each of its ``names`` members that holds text bounded as a name."""
    return {**entry, **{name: bounded(entry[name], NAME_BOUND) for name in names if isinstance(entry.get(name), str)}}


def _bounded_waiver(waiver: Mapping[str, Any]) -> dict[str, Any]:
    justification = waiver.get("justification")
    return {**_bounded_names(waiver, "actor"),
            "justification": bounded(justification, PARAGRAPH_BOUND) if isinstance(justification, str) else ""}


def _bounded_decision(decision: Mapping[str, Any]) -> dict[str, Any]:
    comment = decision.get("comment")
    return {**_bounded_names(decision, "actor"),
            "comment": bounded(comment, PARAGRAPH_BOUND) if isinstance(comment, str) and comment else ""}

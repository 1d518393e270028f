"""What the record's PDF shows of a record: the one-page summary (service/record/cover.py), the record's
details, each check with its chart, evidence and inputs, the appendix, and how numbers and text are written
there. The template (templates/record.html) lays it out; service/record/render.py turns it into HTML and PDF.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from rules.checks import CHECKS
from rules.evaluate import verdict_of
from rules.job.pointers import field_pointer
from schemas.text import visible
from service.record.canonical import record_digest
from service.record.charts import chart_for, chart_title
from service.record.cover import NAME_CHARS, cover_checks, cover_decisions, cover_waivers, headline_figures, lead
from service.record.free_text import (
    MESSAGE_BOUND,
    NAME_BOUND,
    NOTES_BOUND,
    PARAGRAPH_BOUND,
    bounded,
    bounded_or_none,
    glimpse,
)
from service.record.listing import (
    APPENDIX_LINE_CHARS,
    POINTER_COLUMNS,
    capped,
    display_number,
    exact,
    flat,
    is_nested,
    key_value_blocks,
)
from service.record.pointers import appendix_rows, number_references, same_across_elements

STATUS_LABELS = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "insufficient-data": "NEEDS DATA",
                 "not-applicable": "N/A", "waived": "WAIVED"}
SOURCE_LABELS = {"measurement": "measured", "vendor_limit": "vendor limit", "facility_design": "facility design",
                 "default": "policy default", "assumption": "assumption", "missing": "MISSING",
                 "text or absent": "text or absent (no figure)"}
TEXT_OR_ABSENT = "text or absent"  # the source of an input the record holds no figure of (_unrecorded)
DEFAULT_SOURCE = "default"  # the source of the policy's cited default for an input the submission left out
# Cover page workload figures: (label, input pointer of a job field or training-objective evidence name).
WORKLOAD_FIGURES = (
    ("Objective", "objective"),
    ("Model", "model_name"),
    ("Parameters", field_pointer("training.model.parameters")),
    ("Trainable parameters", "trainable_parameters"),
    ("Precision", "precision"),
    ("Optimizer", "optimizer"),
    ("Training GPUs", field_pointer("training.gpus")),
    ("Sequence length", field_pointer("training.sequence_length")),
    ("Global batch", field_pointer("training.global_batch")),
    ("Dataset tokens", field_pointer("training.dataset_tokens")),
    ("Completion window (days)", field_pointer("training.completion_window_days")),
    ("Serving requests/s", field_pointer("serving.rps")),
    ("Serving context tokens", field_pointer("serving.context_tokens")),
    ("Serving TTFT p95 (ms)", field_pointer("serving.slo.ttft_ms_p95")),
    ("Serving TPOT p95 (ms)", field_pointer("serving.slo.tpot_ms_p95")),
)


QUOTED_NODES_MAX_CHARS = 400  # the cover's "Quoted nodes" line, of up to 64 node groups

# --- formatting ------------------------------------------------------------------------------------------

def deciding_figure(check: Mapping[str, Any]) -> str:
    """Returns the deciding figure of a check result (its check's headline over the evidence), else its message.

    The summary table of the PDF and the CLI's table show it in one row; the message stays in the check's
    own section.
    """
    by_id = {c.id: c for c in CHECKS}
    template = by_id[check["id"]].headline if check["id"] in by_id else ""
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    evidence = check.get("evidence") or {}
    # A figure the check could not give (no GPU count fits memory: gpus_needed is null) is explained by the message.
    if check["status"] in ("pass", "warn", "fail") and template and all(
            evidence.get(name) is not None for name in fields):
        try:
            return template.format(**evidence)
        except (KeyError, ValueError, IndexError):
            pass
    return check["message"]


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
    by_pointer = {q["pointer"]: dict(q) for q in [*(record.get("catalogue_fills") or []),
                                                  *(record.get("default_fills") or [])]}
    by_pointer.update({q["pointer"]: dict(q) for q in record.get("inputs") or []})
    return by_pointer


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
        nodes = inputs.get(field_pointer(f"cluster.node_groups.{index}.count"))
        if nodes is None:
            break
        gpus = inputs.get(field_pointer(f"cluster.node_groups.{index}.gpu.count"))
        groups.append(f"{display_number(nodes['value'])} nodes" + (f" × {display_number(gpus['value'])} GPUs"
                                                                   if gpus else ""))
    if groups:
        figures.append(("Quoted nodes", capped("; ".join(groups), QUOTED_NODES_MAX_CHARS)))
    return figures


def record_view(record: Mapping[str, Any], *, draft: bool) -> dict[str, Any]:
    """Returns what the template shows of a record: the one-page summary, the record's details, each check with
    chart and inputs, the appendix."""
    inputs = _inputs_by_pointer(record)
    submission = record["submission"]
    waiver_of = {w.get("check_id"): _bounded_waiver(w) for w in record.get("waivers") or []}
    checks, figures = [], {}
    for check in record["checks"]:
        evidence = check.get("evidence") or {}
        pointers = evidence.get("inputs") or []
        figures[check["id"]] = deciding_figure({**check, "status": check.get("original_status") or check["status"]})
        message = bounded(check["message"], MESSAGE_BOUND)
        checks.append({
            **check,
            "original_status": check.get("original_status"),
            "figure": bounded(figures[check["id"]], MESSAGE_BOUND),
            "message": message,
            "remediation": bounded(check["remediation"], MESSAGE_BOUND) if check.get("remediation") else "",
            "waiver": _bounded_waiver(check["waiver"]) if check.get("waiver") else waiver_of.get(check["id"]),
            "chart": (chart := chart_for(check)),
            "chart_title": chart_title(chart) if chart else "",
            "evidence": key_value_blocks(evidence_rows(evidence, message.text)),
            "thresholds": key_value_blocks(list((check.get("thresholds") or {}).items())),
            "input_groups": (groups := _group_by_source([inputs.get(p) or _unrecorded(p, evidence) for p in pointers])),
            "text_inputs": len(dict(groups).get(TEXT_OR_ABSENT, [])),
            # Given without a source: the policy's cited defaults among the assumptions have a paragraph of their own.
            "assumed": [q for q in check.get("assumptions") or [] if q.get("source") != DEFAULT_SOURCE],
        })
    summary = [(status, count) for status, count in (record.get("summary") or {}).items() if count]
    # A final record counts waived checks as passed in ``verdict``; each keeps the status it was given.
    evaluated_verdict = verdict_of([c.get("original_status") or c["status"] for c in record["checks"]])
    status_of = {c["id"]: c.get("original_status") or c["status"] for c in record["checks"]}
    waivers = [{**_bounded_waiver(waiver), "status": status_of.get(waiver.get("check_id"))}
               for waiver in record.get("waivers") or []]
    latest_decisions, earlier_decisions = cover_decisions(record.get("decisions") or [])
    appendix = same_across_elements(appendix_rows(list(inputs.values())))
    text_inputs = {quantity["pointer"]: quantity for check in checks
                   for quantity in dict(check["input_groups"]).get(TEXT_OR_ABSENT, [])}
    ref_numbers, references = number_references(appendix)
    return {
        "draft": draft,
        "record_id": record.get("record_id") or "(unsaved evaluation)",
        "record_digest": record_digest(dict(record)),
        "verdict": record["verdict"],
        "evaluated_verdict": evaluated_verdict,
        "waivers": waivers,
        "cover": {
            "lead": lead(record["verdict"], record["checks"], figures),
            "headlines": headline_figures(record["checks"]),
            "checks": cover_checks(record["checks"], figures),
            "waivers": cover_waivers([{**w, "status": status_of.get(w.get("check_id"))}
                                      for w in record.get("waivers") or []]),
            "decisions": latest_decisions,
            "earlier_decisions": earlier_decisions,
            "vendor": glimpse(submission.get("vendor") or "(not named)", NAME_CHARS),
            "quote_id": glimpse(submission.get("quote_id") or "(none)", NAME_CHARS),
            "purchase_orders": [glimpse(f"{po.get('po_number')} ({po.get('system')})", NAME_CHARS)
                                for po in record.get("purchase_orders") or []],
        },
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
        "remedies": record.get("remedies"),
        "layout_rows": _layout_rows(record.get("layout_search"), record["checks"], figures),
        "appendix": _appendix_text(appendix, ref_numbers),
        "default_fills": [{"pointer": q["pointer"], "value": exact(q["value"]),
                           "reference": ref_numbers.get(q.get("ref"))} for q in record.get("default_fills") or []],
        "text_inputs": list(text_inputs.values()),
        "references": [bounded(ref, PARAGRAPH_BOUND) for ref in references],
    }


REPEATED_MIN_CHARS = 40  # an evidence text this long that the section shows already is named, not repeated
IN_MESSAGE = "(the message above says it)"


def evidence_rows(evidence: Mapping[str, Any], message: str) -> list[tuple[str, Any]]:
    """Returns a check's evidence as the PDF lists it: every member but ``inputs`` (the inputs list has its own
    paragraphs), a text the section shows already named instead of repeated.

    A text (a string, or a list of figures as the listing joins it) of REPEATED_MIN_CHARS or more that the
    shown ``message`` contains reads ``IN_MESSAGE``; one that a longer text of the evidence contains reads
    ``(part of <key>)``, one equal to an earlier one ``(same as <key>)``. Checks explain themselves in their
    message and keep its pieces as evidence (a note, a detail), so the same sentences would be printed twice;
    the attached JSON holds every member as it is.
    """
    rows = [(key, value) for key, value in evidence.items() if key != "inputs"]
    texts = {key: visible(flat(value)).strip(" ;,.") for key, value in rows
             if isinstance(value, str | list | tuple) and not is_nested(value)}
    position = {key: index for index, key in enumerate(texts)}
    shown = []
    for key, value in rows:
        text = texts.get(key, "")
        if len(text) < REPEATED_MIN_CHARS:
            shown.append((key, value))
        elif text in message:
            shown.append((key, IN_MESSAGE))
        else:
            # The longest other text holding this one (shown whole: none longer holds it, nor the message), or
            # an earlier equal one.
            holders = [other for other, held in texts.items() if other != key and text in held
                       and (len(held) > len(text) or position[other] < position[key])]
            holder = max(holders, key=lambda other: (len(texts[other]), -position[other]), default=None)
            shown.append((key, value) if holder is None else
                         (key, f"({'same as' if texts[holder] == text else 'part of'} {holder})"))
    return shown


def _layout_rows(search: Mapping[str, Any] | None, checks: list[Mapping[str, Any]],
                 figures: Mapping[str, str]) -> list[dict[str, Any]]:
    """Returns the layout search's rows (check id, status and text at the submitted and at the best layout).

    At the submitted layout a check says what its own section says: the row gives its deciding figure
    instead of repeating the message.
    """
    by_id = {check["id"]: check for check in checks}
    rows = []
    for row in (search or {}).get("checks") or []:
        submitted, best, check = row.get("submitted"), row.get("best"), by_id.get(row.get("id"))
        if submitted and check is not None and submitted.get("message") == check["message"]:
            submitted = {**submitted, "message": figures[check["id"]]}
        rows.append({"id": row.get("id"),
                     **{name: {**at, "message": bounded(str(at.get("message", "")), MESSAGE_BOUND)} if at else None
                        for name, at in (("submitted", submitted), ("best", best))}})
    return rows


SOURCE_ORDER = ("measurement", "vendor_limit", "facility_design", DEFAULT_SOURCE, "assumption", "missing",
                TEXT_OR_ABSENT)


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


def _appendix_text(rows: list[tuple[str, Any]], ref_numbers: Mapping[str, int]) -> str:
    """Returns the appendix listing: each listed input, then its value, source and reference number."""
    def describe(quantity: Mapping[str, Any]) -> str:
        ref = quantity.get("ref")
        number = f" · [{ref_numbers[ref]}]" if ref in ref_numbers else (" · [reference: the attached JSON]"
                                                                          if ref else "")
        return f"{exact(quantity['value'])} · {SOURCE_LABELS.get(quantity['source'], quantity['source'])}{number}"

    items = [("input", "value · source · reference"), *rows]
    blocks = key_value_blocks(items, columns=POINTER_COLUMNS, line_chars=APPENDIX_LINE_CHARS,
                              text=lambda v: v if isinstance(v, str) else describe(v), nested=lambda v: False,
                              grid=False)
    return "\n".join(block["text"] for block in blocks)


def _unrecorded(pointer: str, evidence: Mapping[str, Any]) -> dict[str, Any]:
    # record["inputs"] keeps the provenance of numbers; a text input (a model name) or a missing one is not there.
    missing = pointer in (evidence.get("missing") or [])
    return {"pointer": pointer, "value": None, "source": "missing" if missing else TEXT_OR_ABSENT,
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

"""The record as HTML (Jinja, autoescaped) and as PDF (WeasyPrint), fetching nothing but its own stylesheet.

``record_pdf`` is the entry point: an approved record with signing keys gives the final PDF (the signed
record envelope and the DSSE verdict attestation attached, then PAdES-signed); anything else gives a DRAFT
(watermarked, the canonical unsigned record attached, no signature).
"""

from __future__ import annotations

import datetime as dt
import math
import textwrap
import threading
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

import templates
from rules.errors import QuotecheckError
from rules.evaluate import verdict_of
from schemas.text import visible
from service.record.canonical import canonical_bytes, is_approved, record_digest
from service.record.charts import chart_for, chart_title
from service.record.errors import SigningError, UnsignableRecord
from service.record.keys import SigningKeys

TEMPLATE_DIR = Path(templates.__file__).resolve().parent
ASSET_SCHEME = "quotecheck-asset:"
# The only files the PDF renderer will read: the template's own assets, by exact name.
ASSETS = {"record.css": "text/css"}

RECORD_ATTACHMENT = "commissioning-record.json"  # the signed record envelope (final PDF)
DRAFT_ATTACHMENT = "commissioning-record.draft.json"  # the canonical, unsigned record (draft PDF)
ATTESTATION_ATTACHMENT = "verdict.intoto.dsse.json"  # the DSSE envelope of the in-toto verdict statement

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


class FetchRefused(QuotecheckError):
    """The renderer was asked for a URL that is not one of the template's own assets (a defect: fails closed)."""

    title = "Render refused a URL"
    type_slug = "render-fetch-refused"


def url_fetcher() -> Any:
    """Returns a WeasyPrint URL fetcher that serves the template's assets and raises FetchRefused otherwise."""
    from weasyprint.urls import URLFetcher, URLFetcherResponse

    class TemplateAssetFetcher(URLFetcher):
        """Serves ``quotecheck-asset:<name>`` for the names in ASSETS; raises for every other URL.

        ``fail_on_errors`` makes a refusal stop the rendering instead of leaving a silent gap: only the
        template can ask for a URL (record text is escaped), so a refused URL is a defect to surface.
        """

        def __init__(self) -> None:
            super().__init__(timeout=1, allowed_protocols=(), allow_redirects=False, fail_on_errors=True)
            self.refused: list[str] = []

        def fetch(self, url: str, headers: Any = None) -> Any:
            name = url.removeprefix(ASSET_SCHEME) if url.startswith(ASSET_SCHEME) else None
            if name not in ASSETS:
                self.refused.append(url)
                raise FetchRefused(f"refused to fetch {url!r}: the record renderer reads only its own template "
                                   f"assets ({', '.join(ASSET_SCHEME + n for n in ASSETS)})")
            return URLFetcherResponse(url, (TEMPLATE_DIR / name).read_bytes(), {"Content-Type": ASSETS[name]})

    return TemplateAssetFetcher()


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


def _columns(rows: list[Mapping[str, Any]]) -> list[str]:
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


@cache
def environment() -> Environment:
    """Returns the Jinja environment of the record templates: autoescape on for everything, undefined is an error."""
    env = Environment(loader=FileSystemLoader(TEMPLATE_DIR), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, finalize=shown)
    env.filters.update(num=display_number, exact=exact, columns=_columns, flat=flat,
                       status_label=lambda s: STATUS_LABELS.get(s, str(s).upper()),
                       source_label=lambda s: SOURCE_LABELS.get(s, str(s)))
    env.tests.update(list_like=lambda v: isinstance(v, list | tuple),
                     list_of_mappings=lambda v: isinstance(v, list | tuple) and bool(v)
                     and all(isinstance(i, Mapping) for i in v))
    return env


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
    checks = []
    for check in record["checks"]:
        evidence = check.get("evidence") or {}
        pointers = evidence.get("inputs") or []
        checks.append({
            **check,
            "original_status": check.get("original_status"),
            "waiver": check.get("waiver") or _waiver_of(record, check["id"]),
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
    waivers = [{**waiver, "status": status_of.get(waiver.get("check_id"))} for waiver in record.get("waivers") or []]
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
        "vendor": submission.get("vendor") or "(not named)",
        "quote_id": submission.get("quote_id") or "(none)",
        "notes": submission.get("notes"),
        "submission_id": submission.get("id"),
        "revision": submission.get("revision"),
        "submission_digest": submission["digest"],
        "evaluated_at": record["evaluated_at"],
        "policy": record["policy"],
        "engine": record["engine"],
        "workload": _workload(record, inputs),
        "decisions": record.get("decisions") or [],
        "purchase_orders": record.get("purchase_orders") or [],
        "issue": record.get("issue"),
        "supersedes": record.get("supersedes"),
        "checks": checks,
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


def _waiver_of(record: Mapping[str, Any], check_id: str) -> dict[str, Any] | None:
    return next((w for w in record.get("waivers") or [] if w.get("check_id") == check_id), None)


def record_html(record: Mapping[str, Any], *, draft: bool) -> str:
    """Returns the record as HTML for the PDF (all record text escaped by Jinja autoescape)."""
    return environment().get_template("record.html").render(record_view(record, draft=draft))


# --- PDF -------------------------------------------------------------------------------------------------

_render_lock = threading.Lock()


@cache
def _font_configuration() -> Any:
    """Returns one FontConfiguration per process: building it per render costs a third of the render time.

    It is not documented as thread-safe, so renders in one process take turns (``_render_lock``); with the
    GIL, concurrent renders in threads would not run faster anyway.
    """
    from weasyprint.text.fonts import FontConfiguration

    return FontConfiguration()


def html_to_pdf(html: str, attachments: list[tuple[str, bytes, str]], *,
                created: dt.datetime | None = None) -> bytes:
    """Returns the PDF of ``html`` with ``attachments`` (name, bytes, description) as embedded files."""
    from weasyprint import HTML, Attachment
    from weasyprint.urls import FatalURLFetchingError

    fetcher = url_fetcher()
    moment = created or dt.datetime.now(dt.UTC)
    try:
        document = HTML(string=html, base_url=ASSET_SCHEME, url_fetcher=fetcher)
        files = [Attachment(string=data, name=name, description=description, created=moment, modified=moment,
                            relationship="Data", url_fetcher=fetcher)
                 for name, data, description in attachments]
        with _render_lock:
            pdf = document.write_pdf(attachments=files, font_config=_font_configuration())
    except FatalURLFetchingError as error:
        raise FetchRefused(f"{error}: {error.__cause__}") from None
    if fetcher.refused:  # refusals are fatal above; this guards a WeasyPrint that swallowed one
        raise FetchRefused(f"the renderer asked for URLs it may not read: {', '.join(fetcher.refused)}")
    return pdf


def warm_up() -> None:
    """Loads what the first render would otherwise pay for: WeasyPrint, fonts, the template, pyHanko.

    Call once when a worker or API process starts; a render after it costs what every later render costs.
    """
    import pyhanko.sign.signers  # noqa: F401  (imported for its side effect: the module load)

    environment().get_template("record.html")
    html_to_pdf('<html><head><link rel="stylesheet" href="quotecheck-asset:record.css"></head><body class="final">'
                '<p>warm <b>up</b> <span class="mono">0</span><span class="kv">x</span></p></body></html>', [])


def draft_pdf(record: dict[str, Any]) -> bytes:
    """Returns the DRAFT PDF of a record: watermarked, unsigned, with the canonical record attached."""
    attachment = (DRAFT_ATTACHMENT, canonical_bytes(record),
                  "the canonical commissioning record (RFC 8785), an UNSIGNED draft")
    return html_to_pdf(record_html(record, draft=True), [attachment])


def signed_pdf(record: dict[str, Any], keys: SigningKeys, *, now: dt.datetime | None = None,
               envelope: dict[str, Any] | None = None) -> bytes:
    """Returns the final PDF of an approved record: envelope and DSSE attestation attached, PAdES-signed.

    ``envelope``: the record's signed envelope as already issued (the service signs a record once and keeps
    the envelope), attached as it is so the PDF carries the same signed bytes as the JSON record; it must be
    the envelope of ``record`` and verify with ``keys``. Without it the record is signed now.
    Raises UnsignableRecord when the record's latest decision is not an approval.
    """
    from service.record.attestation import sign_dsse, verdict_statement
    from service.record.envelope import sign_record, verify_record
    from service.record.pades import sign_pdf

    if not is_approved(record):
        raise UnsignableRecord("only an approved record is issued as a signed PDF; this record's latest decision is "
                               f"{(record.get('decisions') or [{}])[-1].get('action', 'none yet')}; "
                               "render it as a draft instead")
    now = now or dt.datetime.now(dt.UTC)
    if envelope is None:
        envelope = sign_record(record, keys, now=now)
    else:
        check = verify_record(envelope, keys.trusted())
        if not check.ok or check.record_digest != record_digest(record):
            reasons = "; ".join(check.all_reasons()) or (f"it signs record {check.record_digest}, not "
                                                         f"{record_digest(record)}")
            raise SigningError(f"the given envelope is not this record's, signed by these keys: {reasons}")
    attestation = sign_dsse(verdict_statement(record), keys)
    attachments = [
        (RECORD_ATTACHMENT, canonical_bytes(envelope), "the signed commissioning record (RFC 8785 JSON envelope)"),
        (ATTESTATION_ATTACHMENT, canonical_bytes(attestation), "the verdict as an in-toto Statement v1, DSSE-signed"),
    ]
    pdf = html_to_pdf(record_html(record, draft=False), attachments, created=now)
    return sign_pdf(pdf, keys, record_id=record.get("record_id"))


def record_pdf(record: dict[str, Any], keys: SigningKeys | None = None, *, now: dt.datetime | None = None,
               envelope: dict[str, Any] | None = None) -> bytes:
    """Returns the PDF of a record: signed when ``keys`` are given (the record must be approved), else a DRAFT.

    ``envelope``: the record's signed envelope as issued, attached instead of a new signature (see signed_pdf).
    """
    if keys is None:
        return draft_pdf(record)
    if not isinstance(keys, SigningKeys):
        raise SigningError(f"keys must be SigningKeys, not {type(keys).__name__}")
    return signed_pdf(record, keys, now=now, envelope=envelope)

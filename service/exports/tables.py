"""CSV exports (RFC 4180): the checks of an evaluation, and the API's lists (submissions, audit events).

Spreadsheets run a cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return as a
formula, and vendor names, quote ids and messages come from outside: such a cell is written with a leading
apostrophe (OWASP's advice on CSV injection), which spreadsheets show as text and drop from the value.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from typing import Any

from service.exports.model import Export, effective_status, headline

CSV_MEDIA_TYPE = "text/csv; charset=utf-8; header=present"
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

CHECK_COLUMNS = ("id", "title", "status", "effective_status", "basis", "rule", "deciding_figure", "message",
                 "remediation", "inputs")
SUBMISSION_COLUMNS = ("id", "state", "verdict", "effective_verdict", "vendor", "quote_id", "submitter", "revision",
                      "version", "created_at", "updated_at")
AUDIT_COLUMNS = ("id", "occurred_at", "submission_id", "action", "actor", "actor_role", "token_prefix",
                 "before_state", "after_state", "input_digest", "engine_version", "policy_version", "detail",
                 "prev_hash", "hash")


def cell(value: Any) -> str:
    """Returns ``value`` as one CSV cell: text that a spreadsheet would run as a formula gets a leading apostrophe."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict | list):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


def csv_text(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> str:
    """Returns a header line and one line per row (CRLF line ends, as RFC 4180 has them)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([cell(row.get(column)) for column in columns])
    return out.getvalue()


def check_row(check: dict[str, Any]) -> dict[str, Any]:
    """Returns one check result as a CSV row (CHECK_COLUMNS)."""
    return {"id": check["id"], "title": check.get("title"), "status": check["status"],
            "effective_status": effective_status(check), "basis": check.get("basis"), "rule": check.get("rule"),
            "deciding_figure": headline(check), "message": check.get("message"),
            "remediation": check.get("remediation"),
            "inputs": " ".join((check.get("evidence") or {}).get("inputs", []))}


def checks_csv(export: Export) -> str:
    """Returns the checks of ``export``, one row per check."""
    return csv_text(CHECK_COLUMNS, (check_row(check) for check in export.checks))


def submissions_csv(items: Iterable[dict[str, Any]]) -> str:
    """Returns submission list items (their API representation) as CSV."""
    return csv_text(SUBMISSION_COLUMNS, items)


def audit_csv(events: Iterable[dict[str, Any]]) -> str:
    """Returns audit events (their API representation) as CSV; ``detail`` is its JSON text."""
    return csv_text(AUDIT_COLUMNS, events)

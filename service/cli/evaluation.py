"""`quotecheck validate` and `quotecheck evaluate`: a submission file checked and evaluated, no service needed."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

import click

from rules.advice.best_layout import describe_layout, describe_skipped, evaluate_with_layout_search
from rules.advice.remedies import needs_remedies, search_remedies, with_remedies
from rules.errors import InvalidPolicy, InvalidSubmission
from rules.evaluate import MAX_SUBMISSION_BYTES, OVERSIZE_INSPECT_BYTES, parse_submission
from rules.evaluate import evaluate as run_evaluation
from rules.policy import load_policy
from service import exports
from service.cli.common import EXIT_CODES, EXIT_FAILED, EXIT_OK, fail_input
from service.exports.model import Artifact, Export, headline

# The remedies the table shows (the record holds them all; `quotecheck remedies` lists them).
_REMEDIES_SHOWN = 3
STATUS_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "insufficient-data": "DATA?",
               "not-applicable": "n/a", "waived": "WAIVED"}


def read_submission(path: str) -> dict[str, Any]:
    """Returns the submission in the file ``path``, read and validated; InvalidSubmission saying what is wrong."""
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > OVERSIZE_INSPECT_BYTES:
            raise InvalidSubmission(f"{path} is {size:,} bytes; the limit is {MAX_SUBMISSION_BYTES:,} bytes")
        raw = file.read_bytes()
    except OSError as error:
        raise InvalidSubmission(f"cannot read {path}: {error.strerror}") from None
    return parse_submission(raw, origin=path)


@click.command(epilog=EXIT_CODES)
@click.argument("file", type=click.Path(dir_okay=False))
def validate(file: str) -> None:
    """Validate FILE against the submission schema without evaluating it."""
    try:
        read_submission(file)
    except InvalidSubmission as error:
        fail_input(error)
    click.echo(f"{file}: valid submission (schema v1)")


@click.command(epilog=EXIT_CODES)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--policy", "policy_path", type=click.Path(dir_okay=False), help="policy JSON (default: bundled)")
@click.option("--format", "fmt", type=click.Choice(["table", "json", *exports.FORMATS]), default="table",
              show_default=True, help="table; json: the record; sarif: SARIF 2.1.0; junit: JUnit XML; csv: one row "
                                      "per check (docs/exports.md)")
@click.option("--out", type=click.Path(dir_okay=False), help="also write the record JSON to this file")
@click.option("--search/--no-search", "search", default=True, show_default=True,
              help="search the layouts of the quoted GPUs and evaluate the submission at the best one "
                   "(the record's layout_search; training workloads only)")
@click.option("--remedies/--no-remedies", "remedies", default=True, show_default=True,
              help="when a check fails or warns, search the smallest changes that make every check pass "
                   "(the record's remedies; see `quotecheck remedies`)")
@click.option("--allow-incomplete", is_flag=True,
              help="exit 0 for an INCOMPLETE verdict (a check left undecided, none failed); without it such a "
                   "quote exits 1, so that a gate on the exit code never passes a schedule nobody judged")
def evaluate(file: str, policy_path: str | None, fmt: str, out: str | None, search: bool, remedies: bool,
             allow_incomplete: bool) -> None:
    """Evaluate FILE and print one row per acceptance check (or the record as JSON, SARIF, JUnit XML or CSV).

    With a training workload the record also holds the layout search of the quoted GPUs: the fastest layout
    that fits memory, how the submitted layout compares, and the layout-dependent checks at the best layout.
    When a check fails or warns, the record holds the remedies too: the changes to the quote or the workload
    that make every check pass, each evaluated in full, cheapest first.
    """
    try:
        submission = read_submission(file)
        policy = load_policy(policy_path)
    except (InvalidSubmission, InvalidPolicy) as error:
        fail_input(error)
    # read_submission validated the document (parse_submission): it is not validated again.
    record = (evaluate_with_layout_search if search else run_evaluation)(submission, policy, validated=True)
    if remedies and needs_remedies(record):
        record = with_remedies(record, search_remedies(submission, policy, record=record,
                                                       layout_search=record.get("layout_search")))
    text = json.dumps(record, indent=2, ensure_ascii=False)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n", encoding="utf-8")
    if fmt in exports.FORMATS:
        click.echo(exports.render(fmt, file_export(file, submission, record)), nl=False)
    else:
        click.echo(text if fmt == "json" else render_table(record))
    sys.exit(exit_code(record["verdict"], allow_incomplete))


def exit_code(verdict: str, allow_incomplete: bool = False) -> int:
    """Returns the exit code of an evaluation: 1 for FAIL, and for INCOMPLETE unless allowed; else 0."""
    failed = verdict == "fail" or (verdict == "incomplete" and not allow_incomplete)
    return EXIT_FAILED if failed else EXIT_OK


def file_uri(path: str) -> str:
    """Returns the URI (reference) of a file as given: relative paths stay relative, absolute ones are file: URIs."""
    pure = PurePath(path)
    return Path(path).resolve().as_uri() if pure.is_absolute() else quote(pure.as_posix())


def file_export(path: str, submission: dict[str, Any], record: dict[str, Any]) -> Export:
    """Returns the export of the evaluation of the submission file ``path`` (read once more, for its positions)."""
    raw = Path(path).read_bytes()
    artifact = Artifact(uri=file_uri(path), document=submission, text=raw.decode("utf-8", errors="replace"),
                        sha256=hashlib.sha256(raw).hexdigest(), description="the submission document evaluated")
    return Export(record=record, checks=record["checks"], artifact=artifact)


def render_table(record: dict[str, Any]) -> str:
    """Returns the checklist as fixed-width text: check, status, basis, deciding figure, then the verdict."""
    rows = [("CHECK", "STATUS", "BASIS", "DECIDING FIGURE")]
    for check in record["checks"]:
        rows.append((check["id"], STATUS_MARK[check["status"]], check["basis"], _clip(headline(check), 90)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(widths[i]) if i < 3 else cell for i, cell in enumerate(row)) for row in rows]
    quote = record["submission"]
    lines.append("")
    lines.append(f"verdict: {record['verdict'].upper()}   vendor: {quote.get('vendor')}   quote: "
                 f"{quote.get('quote_id')}   policy: {record['policy']['id']} ({record['policy']['digest'][:19]}…)")
    for check in record["checks"]:
        if check["status"] in ("fail", "warn") and check["remediation"]:
            lines.append(f"  {check['id']}: {check['remediation']}")
    if "layout_search" in record:
        lines.extend(["", *layout_search_lines(record["layout_search"])])
    if "remedies" in record:
        section = record["remedies"]
        lines.extend(["", f"remedies: {section['note']}"])
        for rank, remedy in enumerate(section["remedies"][:_REMEDIES_SHOWN], start=1):
            lines.extend(f"  {line}" for line in remedy_lines(remedy, section["currency"], f"{rank}."))
    return "\n".join(lines)


def layout_search_lines(section: dict[str, Any]) -> list[str]:
    """Returns the layout search as text lines: counts, submitted and best layouts, the checks at the best."""
    lines = [f"layout search: {section['layouts_searched']:,} layouts of the quoted GPUs, {section['fitting']:,} "
             f"fit memory; {section['submitted_vs_best']}",
             f"  submitted: {describe_layout(section['submitted'])}"]
    if section.get("layouts_skipped"):
        lines.insert(1, f"  {describe_skipped(section)}")
    if section["best"] is None:
        return lines
    lines.append(f"  best:      {describe_layout(section['best'])}")
    timing = section["time_to_result"]
    if timing["submitted"] and timing["best"]:
        lines.append(f"  days to result: {timing['submitted']['days']:.1f} as submitted, {timing['best']['days']:.1f} "
                     f"at the best layout")
    lines.append(f"  at the best layout the verdict is {section['verdict_at_best'].upper()}: " + ", ".join(
        f"{row['id']} {row['best']['status']}" for row in section["checks"] if row["best"]))
    return lines


def _cost(remedy: dict[str, Any], currency: str | None) -> str:
    unit = f"{currency} " if currency else ""
    if remedy["added_cost"] is not None:
        return f"{unit}{remedy['added_cost']:+,.0f}"
    known = f" + {unit}{remedy['priced_cost']:+,.0f}" if remedy["priced_cost"] else ""
    return "unpriced" + known


def remedy_lines(remedy: dict[str, Any], currency: str | None, heading: str) -> list[str]:
    """Returns one remedy as text: heading, verdict, added cost, days, then each change on its own line."""
    days = "days unknown" if remedy["days"] is None else f"{remedy['days']:,.2f} days"
    lines = [f"{heading} {remedy['id']}: {remedy['verdict'].upper()}, {_cost(remedy, currency)}, {days} "
             f"({remedy['scope']})"]
    lines += [f"    - {change}" for change in remedy["changes"]]
    if remedy["unpriced"]:
        lines.append(f"    unpriced: {'; '.join(remedy['unpriced'])}")
    lines += [f"    decision: {decision}" for decision in remedy.get("decisions", ())]
    if remedy["remaining"]:
        lines.append("    still: " + ", ".join(f"{c['id']} {c['status']}" for c in remedy["remaining"]))
    return lines


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


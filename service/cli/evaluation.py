"""`quotecheck validate` and `quotecheck evaluate`: a submission file checked and evaluated, no service needed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from rules.best_layout import describe_layout, evaluate_with_layout_search
from rules.errors import InvalidPolicy, InvalidSubmission
from rules.evaluate import MAX_SUBMISSION_BYTES, OVERSIZE_INSPECT_BYTES, parse_submission
from rules.evaluate import evaluate as run_evaluation
from rules.policy import load_policy
from service.cli.common import EXIT_CODES, EXIT_FAILED, EXIT_OK, fail_input
from service.record.view import deciding_figure as headline

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
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), help="also write the record JSON to this file")
@click.option("--search/--no-search", "search", default=True, show_default=True,
              help="search the layouts of the quoted GPUs and evaluate the submission at the best one "
                   "(the record's layout_search; training workloads only)")
def evaluate(file: str, policy_path: str | None, fmt: str, out: str | None, search: bool) -> None:
    """Evaluate FILE and print one row per acceptance check (or the record as JSON).

    With a training workload the record also holds the layout search of the quoted GPUs: the fastest layout
    that fits memory, how the submitted layout compares, and the layout-dependent checks at the best layout.
    """
    try:
        submission = read_submission(file)
        policy = load_policy(policy_path)
    except (InvalidSubmission, InvalidPolicy) as error:
        fail_input(error)
    record = (evaluate_with_layout_search if search else run_evaluation)(submission, policy)
    text = json.dumps(record, indent=2, ensure_ascii=False)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n", encoding="utf-8")
    click.echo(text if fmt == "json" else render_table(record))
    sys.exit(EXIT_FAILED if record["verdict"] == "fail" else EXIT_OK)


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
    return "\n".join(lines)


def layout_search_lines(section: dict[str, Any]) -> list[str]:
    """Returns the layout search as text lines: counts, submitted and best layouts, the checks at the best."""
    lines = [f"layout search: {section['layouts_searched']:,} layouts of the quoted GPUs, {section['fitting']:,} "
             f"fit memory; {section['submitted_vs_best']}",
             f"  submitted: {describe_layout(section['submitted'])}"]
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


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


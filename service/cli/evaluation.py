"""`quotecheck validate` and `quotecheck evaluate`: a submission file checked and evaluated, no service needed."""

from __future__ import annotations

import json
import string
import sys
from pathlib import Path
from typing import Any

import click

from rules.checks import CHECKS
from rules.errors import InvalidPolicy, InvalidSubmission
from rules.evaluate import MAX_SUBMISSION_BYTES, OVERSIZE_INSPECT_BYTES, parse_submission
from rules.evaluate import evaluate as run_evaluation
from rules.policy import load_policy
from service.cli.common import EXIT_CODES, EXIT_FAILED, EXIT_OK, fail_input

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
def evaluate(file: str, policy_path: str | None, fmt: str, out: str | None) -> None:
    """Evaluate FILE and print one row per acceptance check (or the record as JSON)."""
    try:
        submission = read_submission(file)
        policy = load_policy(policy_path)
    except (InvalidSubmission, InvalidPolicy) as error:
        fail_input(error)
    record = run_evaluation(submission, policy)
    text = json.dumps(record, indent=2, ensure_ascii=False)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n", encoding="utf-8")
    click.echo(text if fmt == "json" else render_table(record))
    sys.exit(EXIT_FAILED if record["verdict"] == "fail" else EXIT_OK)


def headline(check: dict[str, Any]) -> str:
    """Returns the deciding figure of a check result for one table row."""
    by_id = {c.id: c for c in CHECKS}
    template = by_id[check["id"]].headline if check["id"] in by_id else ""
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    # A figure the check could not give (no GPU count fits memory: gpus_needed is null) is explained by the message.
    if check["status"] in ("pass", "warn", "fail") and template and all(
            check["evidence"].get(name) is not None for name in fields):
        try:
            return template.format(**check["evidence"])
        except (KeyError, ValueError, IndexError):
            pass
    return check["message"]


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
    return "\n".join(lines)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


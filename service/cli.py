"""The quotecheck command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from rules.errors import InvalidPolicy, InvalidSubmission, QuotecheckError

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2

EXIT_CODES = """\b
Exit codes:
  0  every check passed, warned, or was not applicable (no check failed)
  1  a check failed (or nothing could be decided: quotecheck fails closed)
  2  the input is invalid (unreadable file, bad JSON, schema violation, bad policy)"""

STATUS_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "insufficient-data": "DATA?",
               "not-applicable": "n/a", "waived": "WAIVED"}


def _read_submission(path: str) -> dict[str, Any]:
    from rules.evaluate import MAX_SUBMISSION_BYTES, parse_submission

    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_SUBMISSION_BYTES:
            raise InvalidSubmission(f"{path} is {size:,} bytes; the limit is {MAX_SUBMISSION_BYTES:,} bytes")
        raw = file.read_bytes()
    except OSError as error:
        raise InvalidSubmission(f"cannot read {path}: {error.strerror}") from None
    return parse_submission(raw, origin=path)


def _fail_input(error: QuotecheckError) -> None:
    click.echo(f"error: {error}", err=True)
    sys.exit(EXIT_INVALID)


@click.group(help="Check an AI-server quote against its workload and issue a commissioning record.\n\n" + EXIT_CODES)
@click.version_option(package_name="quotecheck")
def main() -> None:
    pass


@main.command(epilog=EXIT_CODES)
@click.argument("file", type=click.Path(dir_okay=False))
def validate(file: str) -> None:
    """Validate FILE against the submission schema without evaluating it."""
    try:
        _read_submission(file)
    except InvalidSubmission as error:
        _fail_input(error)
    click.echo(f"{file}: valid submission (schema v1)")


@main.command(epilog=EXIT_CODES)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--policy", "policy_path", type=click.Path(dir_okay=False), help="policy JSON (default: bundled)")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), help="also write the record JSON to this file")
def evaluate(file: str, policy_path: str | None, fmt: str, out: str | None) -> None:
    """Evaluate FILE and print one row per acceptance check (or the record as JSON)."""
    from rules.evaluate import evaluate as run_evaluation
    from rules.policy import load_policy

    try:
        submission = _read_submission(file)
        policy = load_policy(policy_path)
    except (InvalidSubmission, InvalidPolicy) as error:
        _fail_input(error)
    record = run_evaluation(submission, policy)
    text = json.dumps(record, indent=2, ensure_ascii=False)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n", encoding="utf-8")
    click.echo(text if fmt == "json" else render_table(record))
    sys.exit(EXIT_FAILED if record["verdict"] == "fail" else EXIT_OK)


def headline(check: dict[str, Any]) -> str:
    """Returns the deciding figure of a check result for one table row."""
    from rules.checks import CATALOGUE

    by_id = {c.id: c for c in CATALOGUE}
    template = by_id[check["id"]].headline if check["id"] in by_id else ""
    if check["status"] in ("pass", "warn", "fail") and template:
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


if __name__ == "__main__":  # pragma: no cover
    main()

"""`quotecheck remedies`: the smallest changes that make a submission file pass (rules/advice/remedies.py), offline."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from rules.advice.remedies import search_remedies
from rules.errors import InvalidPolicy, InvalidSubmission
from rules.policy import load_policy
from service.cli.common import EXIT_FAILED, EXIT_OK, fail_input
from service.cli.evaluation import read_submission, remedy_lines

REMEDIES_EXIT_CODES = """\b
Exit codes:
  0  a remedy was found (or nothing fails or warns: nothing to remedy)
  1  no set of changes the search tried makes every failing and warning check pass
  2  the input is invalid (unreadable file, bad JSON, schema violation, bad policy)"""


@click.command(epilog=REMEDIES_EXIT_CODES)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--policy", "policy_path", type=click.Path(dir_okay=False), help="policy JSON (default: bundled)")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def remedies(file: str, policy_path: str | None, fmt: str) -> None:
    """Find the smallest changes that make every failing and warning check of FILE pass, cheapest first.

    Changes to the quote (node count, GPU or server model, racks and PDUs, storage bandwidth, compute NICs,
    host RAM) and to the workload (sharding, the layout search's best layout, micro-batch, recompute,
    checkpoint interval) are proposed from the checks' evidence, combined, and each combination evaluated
    in full. JSON is {"remedies": [{"patch", "verdict", "added_cost", "days", "changes", ...}], ...}, best
    first, each patch an RFC 7396 merge patch of FILE. A progress bar (evaluations of the policy's budget)
    goes to stderr.
    """
    try:
        submission = read_submission(file)
        policy = load_policy(policy_path)
    except (InvalidSubmission, InvalidPolicy) as error:
        fail_input(error)
    budget = int(policy.value("remedies.max_evaluations"))
    with click.progressbar(length=budget, label="evaluating remedies", file=sys.stderr) as bar:
        result = search_remedies(submission, policy, on_progress=lambda done, _: bar.update(done - bar.pos))
    click.echo(json.dumps(result, indent=2, ensure_ascii=False) if fmt == "json" else render_remedies(result))
    nothing_to_do = not result["problems"]
    sys.exit(EXIT_OK if result["remedies"] or nothing_to_do else EXIT_FAILED)


def render_remedies(result: dict[str, Any]) -> str:
    """Returns the search as text: what fails, the remedies best first, how far partial changes go, the note."""
    problems = ", ".join(f"{p['id']} {p['status']}" for p in result["problems"]) or "none"
    lines = [f"verdict {result['verdict'].upper()}; failing or warning: {problems}",
             f"ranked by {result['ranked_by']}"]
    for rank, remedy in enumerate(result["remedies"], start=1):
        lines += remedy_lines(remedy, result["currency"], f"{rank}.")
    for remedy in result["partial"]:
        lines += remedy_lines(remedy, result["currency"], f"partial ({remedy['scope']} only)")
    lines.append(result["note"])
    return "\n".join(lines)

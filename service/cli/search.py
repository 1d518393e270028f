"""`quotecheck search`: the layout search of a submission file (rules/advice/search.py), no service needed."""

from __future__ import annotations

import json
import sys
from typing import Any, Final

import click

from rules.advice.best_layout import describe_skipped
from rules.advice.search import NothingToSearch, default_chunks, prepare, search_submission
from rules.errors import InvalidPolicy, InvalidSubmission
from rules.policy import load_policy
from service.cli.common import EXIT_FAILED, EXIT_INVALID, EXIT_OK, fail_input
from service.cli.evaluation import read_submission

SEARCH_EXIT_CODES = """\b
Exit codes:
  0  searched: at least one layout of the quoted GPUs fits memory
  1  no layout of the quoted GPUs fits memory
  2  the input is invalid (unreadable file, bad JSON, schema violation, bad policy), or it has nothing to
     search (no training workload, no architecture, no catalogued GPU)"""

# The table's columns: heading, the layout's field, and how it is written.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("TP", "tensor", "{}"), ("PP", "pipeline", "{}"), ("V", "virtual_stages", "{}"), ("CP", "context", "{}"),
    ("DP", "data", "{}"), ("MB", "micro_batch", "{}"), ("RECOMPUTE", "recompute", "{}"),
    ("SHARDING", "sharding", "{}"), ("PRECISION", "precision", "{}"), ("STEP S", "step_s", "{:.3f}"),
    ("TOK/S/GPU", "tokens_per_s_per_gpu", "{:,.0f}"), ("MFU", "mfu", "{:.1%}"),
)
# A mixture of experts' search adds its expert-parallel degree after the data-parallel one.
EXPERT_COLUMN: Final = ("EP", "expert", "{}")


@click.command(epilog=SEARCH_EXIT_CODES)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--policy", "policy_path", type=click.Path(dir_okay=False), help="policy JSON (default: bundled)")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def search(file: str, policy_path: str | None, fmt: str) -> None:
    """Search the parallel layouts of FILE's quoted GPUs: the fastest that fit memory, beside the submitted one.

    Tensor × pipeline × virtual stages × context × data × micro-batch × recompute × sharding × precision on
    the training job's GPU count, kept when they fit the memory budget, ranked by modelled step time. Text
    shows a progress bar on stderr and a table; JSON is the result the API's search task returns.
    """
    try:
        submission = read_submission(file)
        policy = load_policy(policy_path)
    except (InvalidSubmission, InvalidPolicy) as error:
        fail_input(error)
    try:
        prepare(submission, policy)
    except NothingToSearch as error:
        click.echo(f"error: {file} has nothing to search: {error}", err=True)
        sys.exit(EXIT_INVALID)
    if fmt == "json":
        result = search_submission(submission, policy)
        click.echo(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        with click.progressbar(length=len(default_chunks()), label="searching layouts", file=sys.stderr) as bar:
            result = search_submission(submission, policy, on_progress=lambda done, _: bar.update(done - bar.pos))
        click.echo(render_search(result))
    sys.exit(EXIT_OK if result["best"] is not None else EXIT_FAILED)


def render_search(result: dict[str, Any]) -> str:
    """Returns the search as fixed-width text: the counts, the fastest layouts, the submitted one, the comparison."""
    columns = COLUMNS
    if "expert" in result["submitted"]:
        columns = COLUMNS[:5] + (EXPERT_COLUMN,) + COLUMNS[5:]
    rows = [("", *(heading for heading, _, _ in columns), "GiB/GPU")]
    for rank, entry in enumerate(result["top"], start=1):
        rows.append((str(rank), *_cells(entry, columns), f"{entry['memory_gib_per_gpu']:.1f}"))
    rows.append(("submitted", *_cells(result["submitted"], columns), ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"{result['layouts_searched']:,} layouts searched, {result['fitting']:,} fit memory"]
    if result.get("layouts_skipped"):
        lines.append(describe_skipped(result))
    lines += ["  ".join(cell.rjust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.append(result["submitted_vs_best"])
    return "\n".join(lines)


def _cells(layout: dict[str, Any], columns: tuple[tuple[str, str, str], ...]) -> tuple[str, ...]:
    return tuple(template.format(layout[field]) for _, field, template in columns)

"""Quotes side by side: two or more submissions for the same workload, each at the best layout of its quoted GPUs.

Each quote is searched (rules/advice/search.py) and evaluated at its best layout (rules/advice/best_layout.py), so
quotes are compared by what their hardware can do rather than by the layout each vendor happened to write down. Two
kinds of quote are compared as submitted, and their row says so: one the search cannot lay out (no layout fits, or
the step-time model lacks an input), and one that states its training throughput (``/workload/training/throughput``:
tokens/s, MFU or hardware TFLOP/s per GPU): that rate was measured or claimed for the quote's own layout, and the
comparison keeps it rather than replacing it by the model's rate at another layout.

The comparison then decides (rules/advice/quote_ranking.py): only the quotes whose checks at the layout compared
pass, or whose failed and incomplete checks an active waiver covers (``waived``: the check ids waived on each stored
submission), are ranked; the others are listed apart with the checks that stop them; the soonest and the cheapest
that pass are named. ``quotes`` keeps every quote in the order of modelled days, whatever its checks say, as the
first version of the comparison had it.

"The same workload" is the same job: the model, the tokens to train on, the sequence length, the global
batch and the completion window for training; the model, traffic and latency targets for serving. The
layout, sharding, precision and stated throughput may differ (they are the quote's), and so may the GPU count: each
quote's job runs on every GPU of its training node group.
Pure: no I/O, no Flask, no Celery.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

import rfc8785

from rules.advice.best_layout import TIME_TO_RESULT, layout_patch
from rules.advice.compare import gpus_quoted, merge_patch
from rules.advice.quote_ranking import RANKED_BY, decide, decision, rank_key
from rules.advice.remedy_changes import edit_patch
from rules.advice.search import NothingToSearch, search_submission
from rules.errors import InvalidSubmission, Problem
from rules.evaluate import engine_version, evaluate, submission_digest
from rules.job.inputs import Inputs, member_at
from rules.job.parse import parse_job
from rules.job.pointers import field_pointer
from rules.policy import Policy, default_policy

# The fields of the job's training and serving sections that define the job (not how a quote runs it).
TRAINING_JOB = ("objective", "model", "dataset_tokens", "epochs", "sequence_length", "global_batch",
                "completion_window_days")
INFERENCE_JOB = ("model", "context_tokens", "prompt_tokens", "output_tokens", "rps", "peak_factor", "headroom",
                 "slo")
_ABSENT = object()  # no member at a pointer


def _job_members(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Returns the pointer of each workload the submission holds → the pointer of each of its members that define
    the job (TRAINING_JOB, INFERENCE_JOB) the submission states → that member as submitted."""
    members: dict[str, dict[str, Any]] = {}
    for section, names in (("training", TRAINING_JOB), ("serving", INFERENCE_JOB)):
        part = field_pointer(section)
        if member_at(document, part, _ABSENT) is _ABSENT:
            continue
        pointers = (field_pointer(f"{section}.{name}") for name in names)
        members[part] = {pointer: value for pointer in pointers
                         if (value := member_at(document, pointer, _ABSENT)) is not _ABSENT}
    return members


def _member(pointer: str) -> str:
    """Returns the name of the member ``pointer`` names in its object (the last reference token)."""
    return pointer.rpartition("/")[2]


def workload_identity(document: dict[str, Any]) -> dict[str, Any]:
    """Returns what defines the job of a submission: its training and serving members in TRAINING_JOB/INFERENCE_JOB,
    by workload ("training", "inference") and member name, as submitted."""
    return {_member(part): {_member(pointer): value for pointer, value in members.items()}
            for part, members in _job_members(document).items()}


def check_same_workload(quotes: list[tuple[str, dict[str, Any]]]) -> None:
    """Raises InvalidSubmission naming each quote whose job differs from the first quote's, and where."""
    first_name, first = quotes[0]
    expected = _job_members(first)
    problems = []
    for index, (name, document) in enumerate(quotes[1:], start=1):
        found = _job_members(document)
        differing = []
        for part in sorted(set(expected) | set(found)):
            if part not in expected or part not in found:
                differing.append(part)
                continue
            members = sorted(set(expected[part]) | set(found[part]))
            differing += [m for m in members if expected[part].get(m) != found[part].get(m)]
        problems += [Problem(f"/submissions/{index}", f"submission {name!r} is for another job than {first_name!r}: "
                                                      f"{pointer} differs") for pointer in differing]
    if problems:
        raise InvalidSubmission("the submissions are not for the same workload", problems)


def quotes_key(quotes: list[tuple[str, dict[str, Any]]], engine: str, policy_digest: str,
               waived: dict[str, list[str]] | None = None) -> str:
    """Returns ``sha256:<hex>`` identifying a comparison of quotes: their ids and documents, the checks waived on
    each (``waived``: id → check ids), engine and policy."""
    waived = waived or {}
    identity = {"compare": "quotes", "quotes": [[name, submission_digest(document)] for name, document in quotes],
                "waived": {name: sorted(set(waived.get(name, []))) for name, _ in quotes},
                "engine_version": engine, "policy_digest": policy_digest}
    return "sha256:" + hashlib.sha256(rfc8785.dumps(identity)).hexdigest()


def _timing(record: dict[str, Any]) -> dict[str, Any]:
    check = next((c for c in record["checks"] if c["id"] == TIME_TO_RESULT), None)
    return check["evidence"] if check and check["status"] not in ("not-applicable", "insufficient-data") else {}


def stated_throughput(document: dict[str, Any]) -> list[str]:
    """Returns the members of the training throughput ``document`` states (tokens_per_s_per_gpu, mfu, …); [] for
    none."""
    stated = member_at(document, field_pointer("training.throughput"), _ABSENT)
    return sorted(stated) if isinstance(stated, dict) else []


def _layouts(document: dict[str, Any], policy: Policy) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str]:
    """Returns the layout to evaluate the quote at (None: as submitted), the layout the comparison assumes (the
    search's description of it; None when nothing can be searched) and what the row says of it."""
    try:
        search = search_submission(document, policy)
    except NothingToSearch as reason:
        return None, None, f"compared as submitted: {reason}"
    stated = stated_throughput(document)
    if stated:
        return None, search["submitted"], (f"compared as submitted: it states its training throughput "
                                           f"({', '.join(stated)}), which belongs to its own layout and is kept")
    if search["best"] is None:
        return None, search["submitted"], search["submitted_vs_best"]
    return search["best"], search["best"], search["submitted_vs_best"]


def _days_range(timing: dict[str, Any]) -> list[float] | None:
    band = timing.get("days_range")
    return list(band) if isinstance(band, list | tuple) and len(band) == 2 else None


def quote_row(name: str, document: dict[str, Any], policy: Policy, now: datetime | None = None,
              waived: Collection[str] = ()) -> dict[str, Any]:
    """Returns one quote's row: its evaluation at the best layout of its quoted GPUs (or as submitted), and whether it
    passes once the checks ``waived`` (ids) are.

    The job runs on every GPU of the quote's training node group (a ``gpus`` the submission names is dropped):
    a quote is compared by all it offers.
    """
    digest = submission_digest(document)
    if member_at(document, field_pointer("training"), _ABSENT) is not _ABSENT:
        document = merge_patch(document, edit_patch(field_pointer("training.gpus"), None))
    evaluated = evaluate(document, policy, now=now)
    best, assumed, note = _layouts(document, policy)
    at_best = evaluate(merge_patch(document, layout_patch(document, best)[0]), policy, now=now) if best else evaluated
    timing = _timing(at_best)
    if timing.get("no_gpu_count_fits"):
        # Days to result of a job that cannot take one step are what it would take were it to fit: no figure to
        # rank a quote by, so it ranks after every quote whose days are known.
        timing = {name: value for name, value in timing.items()
                  if name not in ("days", "days_p50", "days_p90", "days_range")}
    cluster = parse_job(Inputs(document)).cluster
    return {
        "name": name,
        "submission_digest": digest,
        "vendor": cluster.vendor.value,
        "quote_id": cluster.quote_id.value,
        "layout": "best" if best else "submitted",
        "best_layout": best,
        "assumed_layout": assumed,
        "submitted_vs_best": note,
        "verdict_as_submitted": evaluated["verdict"],
        "verdict": at_best["verdict"],
        "failing_checks": [c["id"] for c in at_best["checks"] if c["status"] == "fail"],
        **decision(at_best["checks"], set(waived)),
        "throughput_from": timing.get("throughput_from"),
        "days": timing.get("days"),
        "days_p50": timing.get("days_p50"),
        "days_p90": timing.get("days_p90"),
        "days_range": _days_range(timing),
        "window_days": timing.get("window_days"),
        "gpus_quoted": gpus_quoted(document),
        "currency": timing.get("currency") or cluster.currency.value,
        "quote_total": timing.get("quote_total"),
        "cost_per_run_day": timing.get("cost_per_day"),
        "cost_per_run": timing.get("cost_per_run"),
        "cost_per_million_tokens": timing.get("cost_per_million_tokens"),
        "cost_note": timing.get("cost_problem"),
    }


def compare_quotes(quotes: list[tuple[str, dict[str, Any]]], policy: Policy | None = None, *,
                   waived: dict[str, list[str]] | None = None, now: datetime | None = None,
                   on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Returns the quotes ``(name, submission)`` compared at their best layouts: every quote ordered by modelled days
    (``quotes``), and the decision (``passing`` ranked, ``not_ranked``, ``soonest``, ``cheapest``).

    ``waived``: name → the ids of the checks an active waiver covers on that quote. InvalidSubmission (before any
    evaluation) when the quotes are not for the same workload. ``on_progress(done, total)`` after each quote.
    """
    policy = policy or default_policy()
    waived = {name: sorted(set(ids)) for name, ids in (waived or {}).items()}
    check_same_workload(quotes)
    rows = []
    for done, (name, document) in enumerate(quotes, start=1):
        rows.append(quote_row(name, document, policy, now, waived.get(name, ())))
        if on_progress is not None:
            on_progress(done, len(quotes))
    ranked = sorted(rows, key=rank_key)
    identity = policy.identity()
    return {
        "key": quotes_key(quotes, engine_version(), identity["digest"], waived),
        "engine_version": engine_version(),
        "policy": {"id": identity["id"], "version": identity["version"], "digest": identity["digest"]},
        "ranked_by": RANKED_BY,
        "quotes": [{"rank": rank, **row} for rank, row in enumerate(ranked, start=1)],
        "waived": {name: waived.get(name, []) for name, _ in quotes},
        **decide(rows),
    }

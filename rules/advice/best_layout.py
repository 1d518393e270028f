"""The submission at the best layout of its quoted GPUs: the layout search's winner applied and evaluated in full.

The layout search (rules/advice/search.py) ranks the layouts of the quoted GPUs that fit memory by modelled step
time. Its winner is written back into the submission as a JSON merge patch (RFC 7396, :func:`layout_patch`):
the tensor, pipeline, virtual-stage and context degrees, sequence parallelism, sharding, micro-batch,
activation recompute, precision and FlashAttention of ``/workload/training``. The patched submission is
then evaluated like any other, so what the layout-dependent checks (peak-memory, sharding,
gradient-accumulation, time-to-result) say at the best layout comes from the same rules and the same
policy as the submitted layout's results, not from a second model of them.

Two things the search does not model leave the patched submission: a stated throughput (it was measured or
claimed for the submitted layout, so the best layout runs at its modelled rate) and offload (the search
sizes memory without it). Both removals are named in the section's ``changes``.

:func:`layout_search_section` returns the record's ``layout_search`` member: the search's counts (the layouts
skipped among them, by reason), best and
submitted layouts, how they compare, the patch, and the layout-dependent checks at the best layout next to
the submitted ones. It is advice beside the checks, not part of them: the submitted layout's results, and so
their digests and any waivers of them, are the same with or without a search.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rules.advice.compare import merge_patch
from rules.advice.search import NothingToSearch, search_submission
from rules.evaluate import evaluate
from rules.policy import Policy, default_policy

# The checks whose outcome depends on the layout, shown at the best layout next to the submitted one.
LAYOUT_CHECKS = ("peak-memory", "sharding", "gradient-accumulation", "time-to-result")
TIME_TO_RESULT = "time-to-result"
# time-to-result figures a buyer compares layouts by (the simulated percentiles where the evaluation has them).
_TIMING = ("days", "days_p50", "days_p90", "window_probability", "tokens_per_s_per_gpu", "throughput_from",
           "cost_per_day")
_TOP_SHOWN = 5
_RECOMPUTE = {"none": "no recompute", "selective": "selective recompute", "full": "full recompute"}


def layout_patch(submission: dict[str, Any], layout: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Returns the JSON merge patch that applies a searched ``layout`` to ``submission``, and what it removes.

    ``layout`` is a layout as the search reports it (``tensor``, ``pipeline``, ``virtual_stages``,
    ``context``, ``micro_batch``, ``recompute``, ``sequence_parallel``, ``flash_attention``, ``sharding``,
    ``precision``; of a mixture of experts ``expert``, written as ``parallelism.expert`` with expert_tensor 1, the
    only expert tensor degree the search lays out). A context degree of 1 is written only where the submission already
    names one.
    """
    training = submission["workload"]["training"]
    submitted = training.get("parallelism", {})
    parallelism: dict[str, Any] = {
        "tensor": layout["tensor"], "pipeline": layout["pipeline"], "virtual_stages": layout["virtual_stages"],
        "sequence_parallel": layout["sequence_parallel"], "sharding": layout["sharding"],
    }
    if layout["context"] != 1 or "context" in submitted:
        parallelism["context"] = layout["context"]
    if "expert" in layout:
        parallelism["expert"] = layout["expert"]
        if "expert_tensor" in submitted:
            parallelism["expert_tensor"] = 1
    removed = []
    if submitted.get("offload", "none") != "none":
        parallelism["offload"] = None
        removed.append(f"offload ({submitted['offload']}): the search sizes memory without it")
    patch: dict[str, Any] = {
        "parallelism": parallelism, "micro_batch": layout["micro_batch"],
        "activation_checkpointing": layout["recompute"], "precision": layout["precision"],
        "flash_attention": layout["flash_attention"],
    }
    if "throughput" in training:
        patch["throughput"] = None
        removed.append("the stated throughput: it belongs to the submitted layout, so the best layout runs at its "
                       "modelled rate")
    return {"workload": {"training": patch}}, removed


def layout_search_section(submission: dict[str, Any], record: dict[str, Any], search: dict[str, Any],
                          policy: Policy | None = None) -> dict[str, Any]:
    """Returns the record's ``layout_search`` member for ``submission``, whose evaluation is ``record``.

    ``search`` is the layout search's result (``rules.advice.search.search_submission``). With no layout that fits,
    the section says so and has no best-layout evaluation.
    """
    policy = policy or default_policy()
    section: dict[str, Any] = {
        "layouts_searched": search["layouts_searched"],
        "fitting": search["fitting"],
        # A search stored before skipped layouts were counted has none.
        "layouts_skipped": search.get("layouts_skipped", 0),
        "skipped": search.get("skipped", {}),
        "submitted": search["submitted"],
        "best": search["best"],
        "submitted_vs_best": search["submitted_vs_best"],
        "top": search["top"][:_TOP_SHOWN],
    }
    if search["best"] is None:
        return section
    patch, removed = layout_patch(submission, search["best"])
    at_best = evaluate(merge_patch(submission, patch), policy, now=_evaluated_at(record))
    section.update(patch=patch, changes=removed, verdict_at_best=at_best["verdict"],
                   checks=[_side_by_side(check_id, record, at_best) for check_id in LAYOUT_CHECKS],
                   time_to_result={"submitted": _timing(record), "best": _timing(at_best)})
    return section


def timing_at(submission: dict[str, Any], record: dict[str, Any], layout: dict[str, Any],
              policy: Policy | None = None) -> dict[str, Any] | None:
    """Returns time-to-result's figures (days, p50, p90, …) of ``submission``, whose evaluation is ``record``, run at a
    searched ``layout``: the layout's patch applied and evaluated in full, as the best layout's are; None when the
    check does not model the run."""
    patch, _ = layout_patch(submission, layout)
    return _timing(evaluate(merge_patch(submission, patch), policy or default_policy(), now=_evaluated_at(record)))


def with_layout_search(submission: dict[str, Any], record: dict[str, Any], search: dict[str, Any] | None,
                       policy: Policy | None = None) -> dict[str, Any]:
    """Returns ``record`` with its ``layout_search`` member (``record`` itself when there is no search)."""
    if search is None:
        return record
    return {**record, "layout_search": layout_search_section(submission, record, search, policy)}


def _evaluated_at(record: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(record["evaluated_at"].replace("Z", "+00:00"))


def _check(record: dict[str, Any], check_id: str) -> dict[str, Any] | None:
    return next((c for c in record["checks"] if c["id"] == check_id), None)


def _side_by_side(check_id: str, submitted: dict[str, Any], best: dict[str, Any]) -> dict[str, Any]:
    """Returns one layout-dependent check's status and message for the submitted and the best layout."""
    row: dict[str, Any] = {"id": check_id}
    for name, record in (("submitted", submitted), ("best", best)):
        check = _check(record, check_id)
        # A final record shows a waived result as waived; what the rules said of the layout is its original status.
        row[name] = None if check is None else {"status": check.get("original_status") or check["status"],
                                                "rule": check["rule"], "message": check["message"]}
    return row


def _timing(record: dict[str, Any]) -> dict[str, Any] | None:
    check = _check(record, TIME_TO_RESULT)
    if check is None or check["status"] in ("not-applicable", "insufficient-data"):
        return None
    return {"status": check["status"], **{name: check["evidence"].get(name) for name in _TIMING}}


def evaluate_with_layout_search(submission: dict[str, Any], policy: Policy | None = None, *,
                                now: datetime | None = None, validated: bool = False) -> dict[str, Any]:
    """Returns the evaluation record of ``submission`` with its ``layout_search`` member where one can be searched.

    A submission the search cannot lay out (no training workload, architecture or catalogued GPU) gets the
    plain evaluation record.
    """
    policy = policy or default_policy()
    record = evaluate(submission, policy, now=now, validated=validated)
    try:
        search = search_submission(submission, policy)
    except NothingToSearch:
        return record
    return with_layout_search(submission, record, search, policy)


def describe_layout(layout: dict[str, Any]) -> str:
    """Returns a searched layout in one phrase: degrees, micro-batch, recompute, sharding, precision, step."""
    virtual = f" (×{layout['virtual_stages']} virtual)" if layout["virtual_stages"] > 1 else ""
    expert = f" (expert {layout['expert']})" if "expert" in layout else ""
    return (f"t{layout['tensor']} × p{layout['pipeline']}{virtual} × c{layout['context']} × d{layout['data']}{expert}, "
            f"micro-batch {layout['micro_batch']}, {_RECOMPUTE[layout['recompute']]}, {layout['sharding']}, "
            f"{layout['precision']}: {layout['step_s']:.2f} s a step, {layout['tokens_per_s_per_gpu']:,.0f} "
            f"tokens/s per GPU, MFU {layout['mfu']:.1%}")


def describe_skipped(search: dict[str, Any]) -> str:
    """Returns the layouts the memory model could not size under the policy's conventions, counted by reason."""
    reasons = "; ".join(f"{reason} ({count:,})" for reason, count in search["skipped"].items())
    return f"{search['layouts_skipped']:,} layouts skipped (the memory model cannot size them): {reasons}"

"""Compare configurations: one submission evaluated under several variants, each a JSON merge patch (RFC 7396).

A variant is what-if input ("the same quote with FSDP instead of DDP", "8 nodes instead of 16"): its patch
is applied to the submission and the result is evaluated like any submission. The comparison is one row
per variant with the figures a buyer weighs: verdict, failing checks, expected days, GPUs quoted and
needed, the quote total and its cost per expected run day. Pure: no I/O, no Flask, no Celery.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import rfc8785

from rules.errors import InvalidSubmission, Problem
from rules.evaluate import engine_version, evaluate, submission_digest, validate_submission
from rules.job.inputs import Inputs, member_at
from rules.job.parse import parse_job
from rules.policy import Policy, default_policy
from rules.status import Status

TIME_TO_RESULT = "time-to-result"

_NOT_IN_PATCH = object()  # what member_at gives for a member the patch does not hold


def merge_patch(target: Any, patch: Any) -> Any:
    """Returns ``target`` with ``patch`` applied as a JSON merge patch (RFC 7396 §2); neither is changed.

    An object patch merges member by member, ``null`` removes a member, and anything else (arrays
    included) replaces the target's value whole.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = merge_patch(result.get(name), value)
    return result


@dataclass(frozen=True)
class Variant:
    """A named variant: its patch and the patched submission it describes."""

    name: str
    patch: dict[str, Any]
    document: dict[str, Any]


def _in_patch(patch: Any, pointer: str) -> bool:
    """Returns True when ``pointer`` (into the patched submission) names a value the patch supplied."""
    return member_at(patch, pointer, _NOT_IN_PATCH) is not _NOT_IN_PATCH


def locate(index: int, name: str, patch: dict[str, Any], problem: Problem) -> Problem:
    """Returns a problem of variant ``index``'s patched submission, located in the comparison request.

    A value the patch supplied (or removed with null) is located in the patch
    (``/variants/<i>/patch/...``); any other comes from the submission (``/submission/...``). The message
    names the variant and the pointer into the patched submission.
    """
    where = f"/variants/{index}/patch{problem.pointer}" if _in_patch(patch, problem.pointer) else \
        f"/submission{problem.pointer}"
    return Problem(where, f"variant {name!r}, at {problem.pointer or '/'} of the patched submission: "
                          f"{problem.message}")


def variant_documents(submission: dict[str, Any], variants: list[dict[str, Any]]) -> list[Variant]:
    """Returns each variant's patched submission; InvalidSubmission lists every problem of every variant.

    ``variants`` is ``[{"name": ..., "patch": {...}}, ...]`` with unique names. Each patched submission
    must satisfy the submission schema (the base submission need not, if every patch completes it), as
    ``validate_submission`` checks a submission: the schema, hidden text, numbers JSON carries exactly.
    """
    problems: list[Problem] = []
    prepared: list[Variant] = []
    seen: dict[str, int] = {}
    for index, variant in enumerate(variants):
        name, patch = variant["name"], variant["patch"]
        if name in seen:
            problems.append(Problem(f"/variants/{index}/name", f"variant name {name!r} is used by variant "
                                                               f"{seen[name]} too; names must be unique"))
        seen.setdefault(name, index)
        document = merge_patch(submission, patch)
        try:
            validate_submission(document, f"variant {name!r}")
        except InvalidSubmission as error:
            problems += [locate(index, name, patch, p) for p in error.problems]
        prepared.append(Variant(name, patch, document))
    if problems:
        noun = "problem" if len(problems) == 1 else "problems"
        raise InvalidSubmission(f"the variants do not all describe valid submissions ({len(problems)} {noun})",
                                problems)
    return prepared


def comparison_key(submission: dict[str, Any], variants: list[dict[str, Any]], engine: str, policy_digest: str) -> str:
    """Returns ``sha256:<hex>`` identifying a comparison: the same inputs, engine and policy give the same result."""
    identity = {"submission": submission_digest(submission), "variants": variants, "engine_version": engine,
                "policy_digest": policy_digest}
    return "sha256:" + hashlib.sha256(rfc8785.dumps(identity)).hexdigest()


def gpus_quoted(document: dict[str, Any]) -> int | None:
    """Returns Σ nodes × GPUs per node over the quote's node groups (catalogue fills included); None without GPUs."""
    total, found = 0, False
    for group in parse_job(Inputs(document)).cluster.node_groups:
        count, per_node = group.count.value, group.gpu.count.value
        if isinstance(count, int | float) and isinstance(per_node, int | float):
            total += int(count) * int(per_node)
            found = True
    return total if found else None


def comparison_row(variant: Variant, record: dict[str, Any]) -> dict[str, Any]:
    """Returns the comparison row of one evaluated variant (figures from its time-to-result evidence)."""
    checks = record["checks"]
    by_status = {status: [c["id"] for c in checks if c["status"] == status] for status in Status}
    timing = next((c for c in checks if c["id"] == TIME_TO_RESULT), None)
    evidence = timing["evidence"] if timing else {}
    return {
        "name": variant.name,
        "submission_digest": record["submission"]["digest"],
        "verdict": record["verdict"],
        "summary": record["summary"],
        "failing_checks": by_status[Status.FAIL],
        "warning_checks": by_status[Status.WARN],
        "incomplete_checks": by_status[Status.INSUFFICIENT_DATA],
        "time_to_result": timing["status"] if timing else None,
        "days": evidence.get("days"),
        "days_p50": evidence.get("days_p50"),
        "days_p90": evidence.get("days_p90"),
        "window_probability": evidence.get("window_probability"),
        "compute_days": evidence.get("compute_days"),
        "window_days": evidence.get("window_days"),
        "gpus_quoted": gpus_quoted(variant.document),
        "gpus": evidence.get("gpus"),
        "gpus_needed": evidence.get("gpus_needed"),
        "gpus_needed_reason": evidence.get("gpus_needed_reason"),
        "currency": evidence.get("currency") or variant.document.get("quote", {}).get("currency"),
        "quote_total": evidence.get("quote_total"),
        "cost_per_run_day": evidence.get("cost_per_day"),
    }


def compare(submission: dict[str, Any], variants: list[dict[str, Any]], policy: Policy | None = None, *,
            now: datetime | None = None, on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Returns the comparison of ``submission`` under each variant, in the order given.

    ``on_progress(done, total)`` is called after each variant is evaluated. InvalidSubmission (before any
    evaluation) when a patched submission breaks the schema.
    """
    policy = policy or default_policy()
    prepared = variant_documents(submission, variants)
    rows = []
    for done, variant in enumerate(prepared, start=1):
        # variant_documents validated each patched submission: it is evaluated without validating it again.
        record = evaluate(variant.document, policy, now=now, validated=True)
        rows.append(comparison_row(variant, record))
        if on_progress is not None:
            on_progress(done, len(prepared))
    identity = policy.identity()
    return {
        "key": comparison_key(submission, variants, engine_version(), identity["digest"]),
        "submission_digest": submission_digest(submission),
        "engine_version": engine_version(),
        "policy": {"id": identity["id"], "version": identity["version"], "digest": identity["digest"]},
        "variants": rows,
    }

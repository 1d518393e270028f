"""The approval workflow as data: states, transitions, waiver validity, approval blockers and diffs.

Nothing here touches the database or Flask; service.approval.store applies these rules inside transactions.
docs/workflow.md describes the same machine for people.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from typing import Any

from rules.errors import Problem
from rules.evaluate import verdict_of
from schemas.canonical_json import canonical_json, canonical_json_with, digest_of, digest_of_canonical, placeholder
from service.errors import ApprovalBlocked, WorkflowConflict


class State(StrEnum):
    SUBMITTED = "submitted"  # stored, not yet evaluated (transient: evaluation runs in the same request)
    EVALUATED = "evaluated"  # the current revision has an evaluation; reviewers act on it
    CHANGES_REQUESTED = "changes_requested"  # a reviewer or approver asked the vendor for a revised quote
    REVISED = "revised"  # a revised quote arrived, not yet evaluated (transient, like submitted)
    APPROVED = "approved"  # final: enough distinct approvers approved the current revision
    REJECTED = "rejected"  # final


FINAL_STATES = frozenset({State.APPROVED, State.REJECTED})


class Event(StrEnum):
    SUBMIT = "submit"
    EVALUATE = "evaluate"
    REVISE = "revise"
    WAIVE = "waive"
    REQUEST_CHANGES = "request-changes"
    APPROVE = "approve"
    REJECT = "reject"


@dataclass(frozen=True)
class Transition:
    sources: frozenset[State]
    # None: the event is recorded but leaves the state as it is.
    target: State | None
    meaning: str


TRANSITIONS: dict[Event, Transition] = {
    Event.SUBMIT: Transition(frozenset(), State.SUBMITTED, "a submitter posts a quote"),
    Event.EVALUATE: Transition(frozenset({State.SUBMITTED, State.REVISED}), State.EVALUATED,
                               "the engine evaluates the newest revision"),
    Event.REVISE: Transition(frozenset({State.EVALUATED, State.CHANGES_REQUESTED}), State.REVISED,
                             "the original submitter (or an admin) posts a revised quote"),
    Event.WAIVE: Transition(frozenset({State.EVALUATED, State.CHANGES_REQUESTED}), None,
                            "a reviewer waives a failed, warned or incomplete check result"),
    Event.REQUEST_CHANGES: Transition(frozenset({State.EVALUATED}), State.CHANGES_REQUESTED,
                                      "a reviewer or approver asks for a revised quote"),
    Event.APPROVE: Transition(frozenset({State.EVALUATED}), State.APPROVED,
                              "an approver approves; the state changes once enough distinct approvers did"),
    Event.REJECT: Transition(frozenset({State.EVALUATED, State.CHANGES_REQUESTED}), State.REJECTED,
                             "a reviewer or approver rejects the quote"),
}

# A check in one of these states may be waived.
WAIVABLE = frozenset({"fail", "warn", "insufficient-data"})
# A check in one of these states blocks approval until a valid waiver covers it.
NEEDS_WAIVER = frozenset({"fail", "insufficient-data"})
MIN_JUSTIFICATION = 20


def check_transition(state: str, event: Event) -> State | None:
    """Returns the state ``event`` leads to from ``state`` (None: unchanged); WorkflowConflict if not allowed."""
    transition = TRANSITIONS[event]
    if State(state) in FINAL_STATES:
        raise WorkflowConflict(f"the submission is {state}; approved and rejected submissions are final, "
                               f"so it cannot {event.value}. Submit a new quote instead.")
    if State(state) not in transition.sources:
        allowed = ", ".join(sorted(transition.sources))
        raise WorkflowConflict(f"the submission is {state}; {event.value} is possible only when it is {allowed}")
    return transition.target


def result_digest(check: dict[str, Any]) -> str:
    """Returns ``sha256:<hex>`` of the canonical JSON of a check result's status and evidence.

    A waiver binds to this digest, so any change in the numbers that decided the check re-opens it.
    """
    return digest_of(_result_fields(check, check["evidence"]))


def _result_fields(check: dict[str, Any], evidence: Any) -> dict[str, Any]:
    """Returns what a check result's digest covers: its status and ``evidence`` (its evidence, or a placeholder)."""
    return {"status": check["status"], "evidence": evidence}


def record_digests(document: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """Returns ``digest_of(document)`` of a record and the ``result_digest`` of each of its checks, by check id.

    Each check's evidence, about half of a record's bytes, is canonicalised once for both digests.
    """
    checks = document["checks"]
    evidence = [canonical_json(check["evidence"]) for check in checks]
    digests = {}
    for check, part in zip(checks, evidence, strict=True):
        result = canonical_json_with(_result_fields(check, placeholder(0)), [part])
        digests[check["id"]] = result_digest(check) if result is None else digest_of_canonical(result)
    spliced = canonical_json_with({**document, "checks": [{**check, "evidence": placeholder(index)}
                                                         for index, check in enumerate(checks)]}, evidence)
    return (digest_of(document) if spliced is None else digest_of_canonical(spliced)), digests


class WaiverState(StrEnum):
    ACTIVE = "active"  # matches the current result of its check and has not expired
    EXPIRED = "expired"  # matches, but its expiry date has passed
    STALE = "stale"  # the check's result changed since the waiver was given: the check is open again


def waiver_state(result_digest_: str, expires: date | None, current_digest: str | None, today: date) -> WaiverState:
    """Returns the state of a waiver against the current result digest of its check."""
    if current_digest != result_digest_:
        return WaiverState.STALE
    if expires is not None and expires < today:
        return WaiverState.EXPIRED
    return WaiverState.ACTIVE


def effective_status(status: str, waived: bool) -> str:
    """Returns ``waived`` for a waivable result that a valid waiver covers, else the status itself."""
    return "waived" if waived and status in WAIVABLE else status


def approval_blockers(checks: list[dict[str, Any]], waived_ids: set[str]) -> list[Problem]:
    """Returns what stands between the current evaluation and approval; [] when nothing does.

    Every failed or incomplete check needs a valid waiver, and an evaluation in which nothing was
    decided stays a failure even then (quotecheck fails closed).
    """
    problems = [Problem(f"/evaluation/checks/{index}", f"{check['id']} is {check['status']} and has no valid "
                        "waiver: waive it (reviewer) or request a revised quote")
                for index, check in enumerate(checks)
                if check["status"] in NEEDS_WAIVER and check["id"] not in waived_ids]
    statuses = [effective_status(c["status"], c["id"] in waived_ids) for c in checks]
    if not problems and verdict_of(statuses) == "fail":
        problems.append(Problem("/evaluation/checks", "no check was decided, so there is nothing to approve"))
    return problems


def ensure_approvable(checks: list[dict[str, Any]], waived_ids: set[str]) -> None:
    """Raises ApprovalBlocked listing each check that blocks approval."""
    problems = approval_blockers(checks, waived_ids)
    if problems:
        noun = "check blocks" if len(problems) == 1 else "checks block"
        raise ApprovalBlocked(f"{len(problems)} {noun} approval", problems)


def check_four_eyes(approver: int, name: str, authors: set[int], waiver_authors: set[int]) -> str | None:
    """Returns why user ``approver`` (called ``name``) may not approve (four-eyes), or None when they may.

    Users are compared, not tokens: a second token of the person who submitted or waived is that person.
    """
    if approver in authors:
        return f"{name!r} submitted this quote (or a revision of it) and may not approve it, with any of their tokens"
    if approver in waiver_authors:
        return f"{name!r} waived a check of this quote and may not approve it, with any of their tokens"
    return None


def diff_checks(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns one entry per check whose status or evidence differs between two evaluations.

    Each entry names the check, its status before and after, whether the evidence changed, and the
    top-level evidence fields that differ (``None`` where a side lacks the check or the field).
    """
    old = {c["id"]: c for c in before}
    new = {c["id"]: c for c in after}
    changes = []
    for check_id in [*new, *(k for k in old if k not in new)]:
        a, b = old.get(check_id), new.get(check_id)
        evidence_a = (a or {}).get("evidence") or {}
        evidence_b = (b or {}).get("evidence") or {}
        fields = sorted(k for k in {*evidence_a, *evidence_b} if evidence_a.get(k) != evidence_b.get(k))
        status_a, status_b = (a or {}).get("status"), (b or {}).get("status")
        if status_a == status_b and not fields:
            continue
        changes.append({
            "check_id": check_id,
            "status": {"from": status_a, "to": status_b},
            "status_changed": status_a != status_b,
            "evidence_changed": bool(fields),
            "evidence": {k: {"from": evidence_a.get(k), "to": evidence_b.get(k)} for k in fields},
        })
    return changes


def record_with_workflow(record: dict[str, Any], *, record_id: str, submission_id: str, revision: int,
                         waivers: dict[str, dict[str, Any]], decisions: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns the final record: the evaluation record with its valid waivers and the decisions applied.

    ``waivers`` maps check id to a waiver in the record schema's shape; those checks show as ``waived``
    with their original status kept, and the verdict counts them as passed.
    """
    checks = []
    for check in record["checks"]:
        waiver = waivers.get(check["id"])
        if waiver is not None and check["status"] in WAIVABLE:
            check = {**check, "status": "waived", "original_status": check["status"], "waiver": waiver}
        checks.append(check)
    statuses = [c["status"] for c in checks]
    summary = {status: statuses.count(status) for status in dict.fromkeys([*record["summary"], *statuses])}
    return {
        **record,
        "record_id": record_id,
        "submission": {**record["submission"], "id": submission_id, "revision": revision},
        "verdict": verdict_of(statuses),
        "summary": summary,
        "checks": checks,
        "waivers": list(waivers.values()),
        "decisions": decisions,
    }

"""Remedies: the smallest changes that make every failing or warning check of a submission pass, cheapest first.

The changes are proposed from the evidence of the checks that fail or warn (rules/advice/remedy_workload.py: sharding,
layout, micro-batch, recompute, checkpoint interval; rules/advice/remedy_quote.py: racks and PDUs, node count, GPU
or server model, storage bandwidth, compute NICs, host RAM). Every candidate is applied to the submission
and evaluated in full, so a remedy's verdict is the engine's, not a prediction. The search is bounded by the
policy (``remedies.max_evaluations`` evaluations, ``remedies.max_changes`` changes in one remedy):

1. each single change is evaluated;
2. a set of changes that fixed some checks and still leaves some failing or warning is extended by one more
   change: a single change that fixed one of the checks it leaves (the singles' pairs, then triples), or a
   change its own evaluation's evidence proposes (a rack plan for the node count it chose); the extension
   expected to leave the fewest problems is evaluated first;
3. a set that passes is a remedy and is not extended; one that contains another remedy is dropped.

Remedies are ranked by what they add to the cost — the time-to-result evidence's ``cost_per_run`` where the
evaluation gives it, else what the changes add to the quote total (more nodes at the group's unit price;
workload changes add nothing) — then by expected days to result. A remedy with a change the quote does not
price (racks, PDUs, another model) has no ``added_cost`` and ranks after every priced one. Each remedy is a
JSON merge patch (RFC 7396) of the submission. Pure: no I/O, no Flask, no Celery.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from itertools import count
from typing import Any

import rfc8785

from rules.advice.remedy_changes import (
    QUOTE,
    WORKLOAD,
    Change,
    Situation,
    apply_edits,
    diff_patch,
    problems_of,
    situation,
)
from rules.advice.remedy_quote import QUOTE_CHANGES
from rules.advice.remedy_workload import WORKLOAD_CHANGES
from rules.advice.search import NothingToSearch, search_submission
from rules.catalogue import Catalogue, load_catalogue
from rules.errors import InconsistentInput, InvalidSubmission
from rules.estimates.search.remedy_sizing import added_cost, cost_difference
from rules.evaluate import engine_version, evaluate, submission_digest, verdict_of
from rules.policy import Policy, default_policy

TIME_TO_RESULT = "time-to-result"
COST_PER_RUN, QUOTE_TOTAL = "cost_per_run", "quote_total"
_LAST = ("; remedies with a change the quote does not price after the priced ones, and those that ask a decision "
         "beyond cost (decisions: numerics) after those that do not")
_RANKED_BY = {
    COST_PER_RUN: "added cost per run (time-to-result's cost_per_run), then expected days to result" + _LAST,
    QUOTE_TOTAL: "added quote total (the time-to-result evidence has no cost_per_run), then expected days to result"
                 + _LAST,
}


@dataclass(frozen=True)
class Trial:
    """A set of changes applied to the submission and evaluated in full."""

    changes: tuple[Change, ...]
    document: dict[str, Any]
    record: dict[str, Any]

    @property
    def problems(self) -> dict[str, str]:
        return problems_of(self.record)

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(change.key for change in self.changes)

    @property
    def score(self) -> tuple[int, int]:
        """(failing checks, warning checks): a trial improves on another when this is lower."""
        statuses = list(self.problems.values())
        return statuses.count("fail"), statuses.count("warn")

    @property
    def scope(self) -> str:
        scopes = {change.scope for change in self.changes}
        return scopes.pop() if len(scopes) == 1 else f"{QUOTE} and {WORKLOAD}"


def proposed_changes(s: Situation) -> list[Change]:
    """Returns every change the failing and warning checks of ``s`` propose, workload changes first, each once."""
    changes: dict[str, Change] = {}
    for propose in (*WORKLOAD_CHANGES, *QUOTE_CHANGES):
        try:
            proposed = propose(s)
        except InconsistentInput:  # the evidence cannot size this change (an estimator refused it): none proposed
            continue
        for change in proposed:
            changes.setdefault(change.key, change)
    return list(changes.values())


def remedies_key(submission: dict[str, Any], engine: str, policy_digest: str) -> str:
    """Returns ``sha256:<hex>`` identifying the remedy search of ``submission`` under an engine and a policy."""
    identity = {"search": "remedies", "submission": submission_digest(submission), "engine_version": engine,
                "policy_digest": policy_digest}
    return "sha256:" + hashlib.sha256(rfc8785.dumps(identity)).hexdigest()


class _Search:
    """The bounded search of one submission's remedies (see the module docstring)."""

    def __init__(self, submission: dict[str, Any], base: dict[str, Any], policy: Policy, catalogue: Catalogue,
                 on_progress: Callable[[int, int], None] | None) -> None:
        settings = policy.value("remedies")
        self.submission, self.policy, self.catalogue = submission, policy, catalogue
        self.budget, self.max_changes = settings["max_evaluations"], settings["max_changes"]
        self.now = datetime.fromisoformat(base["evaluated_at"].replace("Z", "+00:00"))
        self.base = Trial((), submission, base)
        self.on_progress = on_progress
        self.evaluations = 0
        self.tried: set[frozenset[str]] = set()
        self.documents: set[str] = {submission_digest(submission)}
        self.trials: list[Trial] = []
        self.passing: list[Trial] = []
        self.singles: list[Trial] = []
        self.queue: list[tuple[tuple[int, int, int], int, Trial, Change]] = []
        self.order = count()

    def run(self, layout: dict[str, Any] | None) -> None:
        for change in proposed_changes(situation(self.submission, self.base.record, self.policy, self.catalogue,
                                                 layout)):
            trial = self.evaluate(self.base, change)
            if trial is not None:
                self.singles.append(trial)
        for trial in self.singles:
            self.extend(trial, self.base)
        while self.queue and self.evaluations < self.budget:
            _, _, parent, change = heapq.heappop(self.queue)
            trial = self.evaluate(parent, change)
            if trial is not None:
                self.extend(trial, parent)

    def evaluate(self, parent: Trial, change: Change) -> Trial | None:
        """Returns ``parent`` with ``change`` applied and evaluated; None when tried before, over budget or invalid."""
        keys = parent.keys | {change.key}
        if self.evaluations >= self.budget or keys in self.tried or any(p.keys <= keys for p in self.passing):
            return None
        self.tried.add(keys)
        document = apply_edits(parent.document, change.edits)
        digest = submission_digest(document)
        if digest in self.documents:
            return None
        self.documents.add(digest)
        self.evaluations += 1
        try:
            record = evaluate(document, self.policy, catalogue=self.catalogue, now=self.now)
        except InvalidSubmission:  # the change breaks the schema (it cannot be quoted this way)
            record = None
        if self.on_progress is not None:
            self.on_progress(self.evaluations, self.budget)
        if record is None:
            return None
        trial = Trial((*parent.changes, change), document, record)
        self.trials.append(trial)
        if not trial.problems:
            self.passing.append(trial)
        return trial

    def fixed(self, trial: Trial) -> set[str]:
        return set(self.base.problems) - set(trial.problems)

    def extend(self, trial: Trial, parent: Trial) -> None:
        """Queues ``trial`` with one more change, when it still has problems and fixed one of ``parent``'s (or
        lowered the failing and warning counts): a change that fixes one check may break another, which the
        next change may mend."""
        fixed_some = bool(set(parent.problems) - set(trial.problems))
        if not trial.problems or len(trial.changes) >= self.max_changes or not (
                fixed_some or trial.score < parent.score):
            return
        left = set(trial.problems)
        candidates = [(single.changes[0], self.fixed(single)) for single in self.singles
                      if self.fixed(single) & left]
        follow_ups = proposed_changes(situation(trial.document, trial.record, self.policy, self.catalogue))
        candidates += [(change, set(change.targets)) for change in follow_ups]
        for change, fixes in candidates:
            if change.key in trial.keys or any(change.conflicts(mine) for mine in trial.changes):
                continue
            priority = (len(left - fixes), len(trial.changes) + 1, change.price is None)
            heapq.heappush(self.queue, (priority, next(self.order), trial, change))

    def minimal(self) -> list[Trial]:
        """Returns the passing trials that contain no other passing trial."""
        return [t for t in self.passing if not any(o.keys < t.keys for o in self.passing)]


def _timing(record: dict[str, Any]) -> dict[str, Any]:
    check = next((c for c in record["checks"] if c["id"] == TIME_TO_RESULT), None)
    return check["evidence"] if check and check["status"] not in ("not-applicable", "insufficient-data") else {}


def _number(value: Any) -> float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def remedy_id(patch: dict[str, Any]) -> str:
    """Returns a remedy's id: ``r-`` and 12 hex digits of the SHA-256 of its patch's RFC 8785 form."""
    return "r-" + hashlib.sha256(rfc8785.dumps(patch)).hexdigest()[:12]


def _remedy(trial: Trial, base: Trial, basis: str) -> dict[str, Any]:
    """Returns one remedy as the result lists it: patch, verdict, added cost, days, changes and what it fixes."""
    patch = diff_patch(base.document, trial.document)
    unpriced = [change.unpriced for change in trial.changes if change.price is None]
    priced = added_cost([change.price for change in trial.changes if change.price is not None])
    timing, before = _timing(trial.record), _timing(base.record)
    if basis == COST_PER_RUN and _number(timing.get(COST_PER_RUN)) is None:
        unpriced.append("its evaluation gives no cost_per_run")
    if unpriced:
        cost = None
    elif basis == COST_PER_RUN:
        cost = cost_difference(timing[COST_PER_RUN], before[COST_PER_RUN])
    else:
        cost = priced
    return {
        "id": remedy_id(patch),
        "patch": patch,
        "verdict": trial.record["verdict"],
        "added_cost": cost,
        "priced_cost": priced,
        "unpriced": sorted(set(unpriced)),
        "days": _number(timing.get("days")),
        "scope": trial.scope,
        "changes": [change.text for change in trial.changes],
        "decisions": [change.decision for change in trial.changes if change.decision],
        "fixes": sorted(set(base.problems) - set(trial.problems)),
        "remaining": [{"id": c["id"], "status": status, "rule": c["rule"]} for c in trial.record["checks"]
                      if (status := trial.problems.get(c["id"]))],
        "summary": trial.record["summary"],
    }


def _rank(remedy: dict[str, Any]) -> tuple[bool, bool, float, float, int, str]:
    days = remedy["days"] if remedy["days"] is not None else math.inf
    cost = remedy["added_cost"] if remedy["added_cost"] is not None else remedy["priced_cost"]
    return remedy["added_cost"] is None, bool(remedy["decisions"]), cost, days, len(remedy["changes"]), remedy["id"]


def _partial(search: _Search, remedies: list[dict[str, Any]], basis: str) -> list[dict[str, Any]]:
    """Returns, for the workload and for the quote alone where no remedy changes only it, the change set that
    left the fewest problems: what that kind of change can do, and what it cannot."""
    shown = []
    for scope in (WORKLOAD, QUOTE):
        if any(remedy["scope"] == scope for remedy in remedies):
            continue
        tried = [t for t in search.trials if t.scope == scope and t.problems and t.score < search.base.score]
        if tried:
            best = min(tried, key=lambda t: (t.score, len(t.changes)))
            shown.append(_remedy(best, search.base, basis))
    return shown


def search_remedies(submission: dict[str, Any], policy: Policy | None = None, *,
                    record: dict[str, Any] | None = None, layout_search: dict[str, Any] | None = None,
                    catalogue: Catalogue | None = None, now: datetime | None = None,
                    on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Returns the remedies of a valid ``submission``: the change sets that make every failing and warning check
    pass, best first, each with its patch, verdict, added cost, days and changes in words.

    ``record``: its evaluation, when the caller has it (else it is evaluated at ``now``); the candidates are
    evaluated at the same moment. ``layout_search``: the layout search's result or the record's
    ``layout_search`` member, whose ``best`` is one candidate (searched here when not given).
    ``on_progress(done, total)`` after each evaluation, ``total`` being the policy's evaluation budget.
    """
    policy = policy or default_policy()
    catalogue = catalogue or load_catalogue()
    record = record or evaluate(submission, policy, catalogue=catalogue, now=now)
    search = _Search(submission, record, policy, catalogue, on_progress)
    if search.base.problems:
        if layout_search is None:
            try:
                layout_search = search_submission(submission, policy)
            except NothingToSearch:
                layout_search = {}
        search.run(layout_search.get("best"))
    basis = COST_PER_RUN if _number(_timing(record).get(COST_PER_RUN)) is not None else QUOTE_TOTAL
    remedies = sorted((_remedy(t, search.base, basis) for t in search.minimal()), key=_rank)
    shown = remedies[:policy.value("remedies.max_shown")]
    identity = policy.identity()
    if on_progress is not None:
        on_progress(search.budget, search.budget)
    return {
        "key": remedies_key(submission, engine_version(), identity["digest"]),
        "submission_digest": submission_digest(submission),
        "engine_version": engine_version(),
        "policy": {"id": identity["id"], "version": identity["version"], "digest": identity["digest"]},
        "verdict": verdict_of([c.get("original_status") or c["status"] for c in record["checks"]]),
        "problems": [{"id": c["id"], "status": status, "rule": c["rule"]} for c in record["checks"]
                     if (status := search.base.problems.get(c["id"]))],
        "ranked_by": _RANKED_BY[basis],
        "cost_basis": basis,
        "currency": _timing(record).get("currency") or submission.get("quote", {}).get("currency"),
        "evaluations": search.evaluations,
        "max_evaluations": search.budget,
        "found": len(remedies),
        "remedies": shown,
        "partial": _partial(search, remedies, basis),
        "note": _note(search, remedies),
    }


def _note(search: _Search, remedies: list[dict[str, Any]]) -> str:
    if not search.base.problems:
        return "every check passes (or lacks inputs no change can supply): nothing to remedy"
    if not remedies:
        return (f"no set of at most {search.max_changes} changes found in {search.evaluations} evaluations makes every "
                "failing and warning check pass; `partial` shows how far the changes go")
    return f"{len(remedies)} remedies found in {search.evaluations} evaluations (at most {search.budget})"


def needs_remedies(record: dict[str, Any]) -> bool:
    """Returns True when a check of ``record`` fails or warns (its original status, where waived)."""
    return bool(problems_of(record))


def with_remedies(record: dict[str, Any], remedies: dict[str, Any] | None) -> dict[str, Any]:
    """Returns ``record`` with its ``remedies`` member (``record`` itself when there are none to attach)."""
    return record if remedies is None else {**record, "remedies": remedies}

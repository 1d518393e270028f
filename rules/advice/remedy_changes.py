"""The changes a remedy is made of: edits of a submission by JSON Pointer, what they target, and what they cost.

A change is proposed from the evidence of a check that fails or warns (rules/advice/remedy_workload.py for the
workload, rules/advice/remedy_quote.py for the quote) and read from a :class:`Situation`: the submission as changed
so far, its inputs with the catalogue's fills, its typed job (rules/job: the members a change edits are named
by the job's pointers), and the results of its full evaluation. A change is a list of
edits, each setting (or, with ``None``, removing) the value at one JSON Pointer, so that changes to
different members of one array (the count of node group 0 and its host RAM) combine, while two changes that
edit the same member conflict. :func:`diff_patch` turns the submission and its changed copy into the JSON
merge patch (RFC 7396) that a remedy reports: arrays that changed are carried whole, as RFC 7396 requires.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from rules.catalogue import Catalogue
from rules.job.cluster import QuotedNodeGroup
from rules.job.inputs import Inputs, escape, member_at
from rules.job.parse import parse_job
from rules.job.spec import Job
from rules.policy import Policy

WORKLOAD, QUOTE = "workload", "quote"
PROBLEM_STATUSES = ("fail", "warn")
# Rules that only restate that other checks lack inputs, by check (see problems_of).
NOT_REMEDIABLE = {"training-objective": ("other-checks-lack-inputs",),
                  "time-to-result": ("beyond-published-envelope", "quote-arithmetic"),
                  "rack-power": ("no-racks-quoted", "not-in-catalogue")}
INCONSISTENT = "inconsistent"  # the rule of a check whose inputs contradict each other (rules/evaluate.py)


@dataclass(frozen=True)
class Change:
    """One change to a submission: its edits, in words, the checks it answers and what it adds to the quote."""

    key: str  # identity of the change, e.g. "sharding=zero3"
    scope: str  # WORKLOAD or QUOTE
    text: str  # the change in words, for the buyer
    edits: tuple[tuple[str, Any], ...]  # (JSON Pointer, value); None removes the member
    targets: tuple[str, ...]  # the checks whose evidence proposed it
    price: float | None = 0.0  # what it adds to the quote total; None when the quote does not price it
    unpriced: str = ""  # what is not priced, in words (when price is None)
    decision: str = ""  # a decision the change asks of the buyer beyond its cost (e.g. numerics), in words

    def conflicts(self, other: Change) -> bool:
        """Returns True when this change and ``other`` edit the same member, or one edits inside the other's."""
        return any(_overlap(mine, theirs) for mine, _ in self.edits for theirs, _ in other.edits)


@dataclass(frozen=True)
class Situation:
    """A submission as changed so far, read for proposing changes: its inputs, its typed job, its checks, policy and
    catalogue."""

    document: dict[str, Any]
    inputs: Inputs
    job: Job  # parsed once from ``inputs``
    checks: dict[str, dict[str, Any]]  # check id → result of the full evaluation of ``document``
    policy: Policy
    catalogue: Catalogue
    best_layout: dict[str, Any] | None = None  # the layout search's best, for the submission as submitted only

    def open(self, check_id: str, *rules: str) -> bool:
        """Returns True when ``check_id`` fails or warns (by one of ``rules``, when named).

        A check whose inputs contradict each other (rule ``inconsistent``) has no evidence to size a change from.
        """
        check = self.checks.get(check_id)
        return check is not None and _status(check) in PROBLEM_STATUSES and check["rule"] != INCONSISTENT and (
            not rules or check["rule"] in rules)

    def evidence(self, check_id: str) -> dict[str, Any]:
        check = self.checks.get(check_id)
        return check["evidence"] if check else {}

    def threshold(self, check_id: str, name: str) -> Any:
        return self.checks[check_id]["thresholds"][name]

    def get(self, pointer: str, default: Any = None) -> Any:
        """Returns the resolved value at ``pointer`` (numbers plain, catalogue fills included)."""
        return self.inputs.get(pointer, default)

    def submitted(self, pointer: str, default: Any = None) -> Any:
        """Returns the member at ``pointer`` as the submission states it (numbers with their provenance, no
        catalogue fills): what a change that replaces a member whole starts from."""
        return member_at(self.document, pointer, default)

    def group(self, index: int) -> QuotedNodeGroup:
        """Returns node group ``index`` of the job's cluster."""
        return self.job.cluster.node_groups[index]

    def training_group(self) -> int | None:
        """Returns the index of the node group that trains: the one the workload names, else the first with GPUs."""
        return self.group_of(self.job.training.node_group.value)

    def serving_group(self) -> int | None:
        """Returns the index of the node group that serves: the one the workload names, else the first with GPUs."""
        return self.group_of(self.job.serving.node_group.value)

    def group_of(self, name: str | None) -> int | None:
        """Returns the index of node group ``name``, or of the first group with GPUs when ``name`` is None."""
        for index, group in enumerate(self.job.cluster.node_groups):
            if group.name.value == name if name is not None else group.gpu.count.value:
                return index
        return None


def situation(document: dict[str, Any], record: dict[str, Any], policy: Policy, catalogue: Catalogue,
              best_layout: dict[str, Any] | None = None) -> Situation:
    """Returns the Situation of ``document``, whose full evaluation is ``record``."""
    inputs = Inputs(document, catalogue, policy)
    return Situation(document, inputs, parse_job(inputs), {c["id"]: c for c in record["checks"]}, policy,
                     catalogue, best_layout)


def _status(check: dict[str, Any]) -> str:
    # A final record shows a waived result as waived; what the rules said is its original status.
    return check.get("original_status") or check["status"]


def problems_of(record: dict[str, Any]) -> dict[str, str]:
    """Returns the checks of ``record`` that fail or warn, with their status (original status where waived).

    A warning that only restates that other checks lack inputs, asks for a measurement of the modelled rate, finds
    the vendor's line items at odds with the node groups, finds no racks quoted, or finds hardware the catalogue lacks
    described by the vendor's own figures (NOT_REMEDIABLE) is left out: no change to the quote or the workload supplies
    a missing input, a measurement or a datasheet, only the vendor corrects its own lines, and only the facility knows
    the racks' power budgets, PDUs and cooling.
    """
    return {c["id"]: _status(c) for c in record["checks"]
            if _status(c) in PROBLEM_STATUSES and c["rule"] not in NOT_REMEDIABLE.get(c["id"], ())}


def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]] if pointer else []


def _overlap(first: str, second: str) -> bool:
    a, b = _tokens(first), _tokens(second)
    return a[:len(b)] == b or b[:len(a)] == a


def patch_edits(patch: dict[str, Any], prefix: str = "") -> tuple[tuple[str, Any], ...]:
    """Returns a JSON merge patch as edits: one (pointer, value) per member it sets or (None) removes."""
    edits: list[tuple[str, Any]] = []
    for name, value in patch.items():
        pointer = f"{prefix}/{escape(name)}"
        if isinstance(value, dict) and value:
            edits.extend(patch_edits(value, pointer))
        else:
            edits.append((pointer, value))
    return tuple(edits)


def apply_edits(document: dict[str, Any], edits: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """Returns a copy of ``document`` with every edit applied in order; objects on the way are created."""
    result = copy.deepcopy(document)
    for pointer, value in edits:
        *parents, last = _tokens(pointer)
        node: Any = result
        for token in parents:
            if isinstance(node, list):
                node = node[int(token)]
            else:
                node = node.setdefault(token, {})
        if isinstance(node, list):
            node[int(last)] = copy.deepcopy(value)
        elif value is None:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)
    return result


def edit_patch(pointer: str, value: Any) -> dict[str, Any]:
    """Returns the JSON merge patch (RFC 7396) of one edit: ``value`` (None: removed) at the object member
    ``pointer`` names, with the objects on the way."""
    patch: Any = value
    for token in reversed(_tokens(pointer)):
        patch = {token: patch}
    return patch


def diff_patch(original: Any, changed: Any) -> Any:
    """Returns the JSON merge patch (RFC 7396) that turns ``original`` into ``changed``.

    Members ``changed`` lacks are removed with null; objects are compared member by member; anything else,
    arrays included, is carried whole where it differs.
    """
    if not isinstance(original, dict) or not isinstance(changed, dict):
        return copy.deepcopy(changed)
    patch: dict[str, Any] = {name: None for name in original if name not in changed}
    for name, value in changed.items():
        if name not in original:
            patch[name] = copy.deepcopy(value)
        elif original[name] != value:
            patch[name] = diff_patch(original[name], value)
    return patch

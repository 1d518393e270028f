"""The plumbing every acceptance check shares: its declaration, the facts it hands the engine, its context.

A check module declares what it is (id, title, the plan item it implements), the facts it needs (its
``gather`` reads inputs and calls estimators; it never does arithmetic of its own), and its decision as
``Rule`` objects whose conditions durable_rules evaluates over those facts. Thresholds are named from the
policy in ``thresholds``; a rule compares a fact with ``m.<threshold name>``, never with a literal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from rules.inputs import Inputs, Reader
from rules.policy import Policy
from rules.status import Basis, Status

# The documents the checks implement, named by their titles (never by a file name) wherever users read them.
ACCEPTANCE_PLAN = "AI Training Server Sizing: Memory, GPU Count and Checkpoint Plan"
CAPACITY_PLANNING_GUIDE = "GPU Capacity Planning for AI Training & Serving"


class Stage(StrEnum):
    DECIDE = "decide"  # the check has its facts; its own rules decide
    INSUFFICIENT_DATA = "insufficient-data"  # a needed input is missing; the shared rule says so
    NOT_APPLICABLE = "not-applicable"  # the workload does not exercise the check
    INCONSISTENT = "inconsistent"  # the inputs contradict each other (an estimator refused them): a failure


@dataclass(frozen=True)
class Rule:
    """One outcome of a check: a durable_rules condition over the fact ``m`` and the words that explain it."""

    status: Status
    name: str
    when: Callable[[Any], Any]
    message: str
    remediation: str = ""


@dataclass
class Facts:
    """What a check hands the engine: evidence (numbers with units), its basis, and the stage it reached."""

    evidence: dict[str, Any] = field(default_factory=dict)
    basis: Basis = Basis.ESTIMATED
    stage: Stage = Stage.DECIDE
    reason: str = ""


class Context:
    """One check's view of an evaluation: its inputs reader, the policy, and values shared between checks."""

    def __init__(self, inputs: Inputs, policy: Policy, shared: dict[str, Any], check: type[Check]) -> None:
        self.inputs = inputs
        self.policy = policy
        self.reader: Reader = inputs.reader()
        self._shared = shared
        self._check = check
        self.peer_missing: dict[str, list[str]] = {}

    # ---- inputs -------------------------------------------------------------------------------
    def num(self, pointer: str, default: float | None = None) -> float | None:
        return self.reader.num(pointer, default)

    def need(self, pointer: str) -> float | None:
        return self.reader.need(pointer)

    def get(self, pointer: str, default: Any = None) -> Any:
        return self.reader.get(pointer, default)

    @property
    def missing(self) -> list[str]:
        return self.reader.missing

    def threshold(self, name: str) -> Any:
        """Returns the policy value the check names ``name`` in its ``thresholds``."""
        return self.policy.value(self._check.thresholds[name])

    def setting(self, path: str) -> Any:
        """Returns a policy value by dotted path (for estimator parameters that are not thresholds)."""
        return self.policy.value(path)

    def memo(self, key: str, compute: Callable[[Context], Any]) -> Any:
        """Returns ``compute(self)`` computed once per evaluation; the inputs it read count for every caller."""
        if key not in self._shared:
            probe = Context(self.inputs, self.policy, self._shared, self._check)
            value = compute(probe)
            self._shared[key] = (value, probe.reader.pointers, list(probe.reader.missing))
        value, pointers, missing = self._shared[key]
        self.reader.record(pointers)
        for pointer in missing:
            if pointer not in self.reader.missing:
                self.reader.missing.append(pointer)
        return value

    # ---- outcomes -----------------------------------------------------------------------------
    def insufficient(self, reason: str = "", **evidence: Any) -> Facts:
        return Facts(evidence=evidence, stage=Stage.INSUFFICIENT_DATA, reason=reason)

    def not_applicable(self, reason: str) -> Facts:
        return Facts(stage=Stage.NOT_APPLICABLE, reason=reason)


class Check:
    """Base class of the acceptance checks; subclasses are declarations, see rules/checks/peak_memory.py."""

    id: ClassVar[str]
    title: ClassVar[str]
    plan_item: ClassVar[str]  # the heading of the acceptance plan item, quoted from the seed document
    plan_source: ClassVar[str] = ACCEPTANCE_PLAN  # the title of the document the plan item is quoted from
    thresholds: ClassVar[dict[str, str]] = {}  # fact name → dotted policy path
    rules: ClassVar[tuple[Rule, ...]] = ()
    headline: ClassVar[str] = ""  # the deciding figure for one-line summaries, a format string over evidence
    # A check that reports on the others (training-objective lists what they lack) gathers after them and
    # reads their missing inputs from ``Context.peer_missing``.
    gathers_last: ClassVar[bool] = False
    insufficient_remediation: ClassVar[str] = "Add the missing inputs to the submission and evaluate again."

    def gather(self, ctx: Context) -> Facts:  # pragma: no cover - every check overrides it
        raise NotImplementedError

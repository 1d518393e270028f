"""The plumbing every acceptance check shares: its declaration, the facts it hands the engine, its context.

A check module declares what it is (id, title, the plan item it implements), the facts it needs and its
decision. Its ``gather`` reads inputs, calls estimators and names the figures; it does no arithmetic of
its own and never compares a figure with a threshold. The decision is a set of independent rules in the
deny/warn manner of conftest: each ``Rule`` states one condition for ``fail`` or ``warn`` as a
durable_rules condition over those facts, and no rule restates another's condition or its negation
(tests/test_rule_independence.py). The check's status is the most severe rule that matched; among rules of
that status the first declared gives the record's rule name and words (declaration order is precedence).
A rule may carry an ``Exemption``: a condition under which its finding is tolerated, like conftest's
exceptions. A check none of whose rules counts passes with the outcome it declares in ``passing``.
Thresholds are named from the policy in ``thresholds``; a rule compares a fact with ``m.<threshold name>``,
never with a literal other than a count of zero or 1 as the whole of a limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any, ClassVar, TypeVar

from rules.job.given import SPEC_DEFAULT, Given
from rules.job.inputs import Inputs, Reader
from rules.job.parse import parse_job
from rules.job.spec import Job
from rules.policy import Policy
from rules.status import Basis, Status

# The documents the checks implement, named by their titles (never by a file name) wherever users read them.
ACCEPTANCE_PLAN = "AI Training Server Sizing: Memory, GPU Count and Checkpoint Plan"
CAPACITY_PLANNING_GUIDE = "GPU Capacity Planning for AI Training & Serving"

# The statuses a rule may conclude, most severe first: the order in which they decide a check.
RULE_STATUSES = (Status.FAIL, Status.WARN)

T = TypeVar("T")


class Stage(StrEnum):
    DECIDE = "decide"  # the check has its facts; its own rules decide
    INSUFFICIENT_DATA = "insufficient-data"  # a needed input is missing; the shared rule says so
    NOT_APPLICABLE = "not-applicable"  # the workload does not exercise the check
    INCONSISTENT = "inconsistent"  # the inputs contradict each other (an estimator refused them): a failure


@dataclass(frozen=True)
class Fact:
    """A fact named in a rule condition (``m.<name>``): a figure of the evidence or a policy threshold."""

    name: str


@dataclass(frozen=True)
class Comparison:
    """One comparison a rule condition makes: a fact, an operator (``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``)
    and another fact or a literal."""

    left: Fact
    op: str
    right: Fact | str | int | float | bool | None


def comparisons(condition: Callable[[Any], Any]) -> tuple[Comparison, ...]:
    """Returns the comparisons ``condition`` makes, in order, by evaluating it over a probe fact.

    The same lambda that durable_rules turns into a condition is run here on a stand-in for ``m`` whose
    attributes note what is compared with what; ``&`` and ``|`` join the notes. Anything else a
    condition could do (arithmetic, Python's ``and``/``or``/``not``) raises TypeError, so no condition
    holds a comparison this cannot see.
    """
    return _Probed.of(condition(_ProbeFact())).comparisons


def facts_named(condition: Callable[[Any], Any]) -> frozenset[str]:
    """Returns the names of the facts ``condition`` reads."""
    return frozenset(side.name for c in comparisons(condition) for side in (c.left, c.right) if isinstance(side, Fact))


class _ProbeFact:
    def __getattr__(self, name: str) -> _Operand:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Operand(Fact(name))


class _Operand:
    def __init__(self, fact: Fact) -> None:
        self.fact = fact

    def _compare(self, op: str, other: Any) -> _Probed:
        right = other.fact if isinstance(other, _Operand) else other
        if not isinstance(right, Fact | str | int | float | bool | None):
            raise TypeError(f"a rule compares {self.fact.name} with {other!r}, which is neither a fact nor a literal")
        return _Probed((Comparison(self.fact, op, right),))

    def __lt__(self, other: Any) -> _Probed:
        return self._compare("<", other)

    def __le__(self, other: Any) -> _Probed:
        return self._compare("<=", other)

    def __gt__(self, other: Any) -> _Probed:
        return self._compare(">", other)

    def __ge__(self, other: Any) -> _Probed:
        return self._compare(">=", other)

    def __eq__(self, other: Any) -> _Probed:  # type: ignore[override]
        return self._compare("==", other)

    def __ne__(self, other: Any) -> _Probed:  # type: ignore[override]
        return self._compare("!=", other)

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        raise TypeError(f"a rule condition must compare fact {self.fact.name}, not test it for truth")

    def __getattr__(self, name: str) -> Any:
        raise TypeError(f"a rule condition reads flat facts only: {self.fact.name}.{name} is not supported")


@dataclass(frozen=True)
class _Probed:
    comparisons: tuple[Comparison, ...]

    @staticmethod
    def of(condition: Any) -> _Probed:
        if not isinstance(condition, _Probed):
            raise TypeError(f"a rule condition must be comparisons joined by & and |, not {condition!r}")
        return condition

    def __and__(self, other: Any) -> _Probed:
        return _Probed(self.comparisons + _Probed.of(other).comparisons)

    __or__ = __and__

    def __bool__(self) -> bool:
        raise TypeError("join rule conditions with & and |, not with and/or/not")


# The words of an outcome: a str.format template over the evidence and thresholds, or, where the words depend
# on the figures in a way a template cannot say, a function of them (never of the decision: the rule is taken).
Words = str | Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True)
class Exemption:
    """A condition under which its rule does not count, in the manner of conftest's exceptions.

    When the rule matched and so did this, the rule is set aside; a check that nothing else fails or warns
    then passes under this name and message (the record then says why the rule's finding is tolerated).
    """

    name: str
    when: Callable[[Any], Any]
    message: str
    status: ClassVar[Status] = Status.PASS
    remediation: ClassVar[str] = ""


@dataclass(frozen=True)
class Rule:
    """One condition for ``fail`` or ``warn``: a durable_rules condition over the fact ``m`` and its words."""

    status: Status
    name: str
    when: Callable[[Any], Any]
    message: Words
    remediation: Words = ""
    unless: Exemption | None = None

    def __post_init__(self) -> None:
        if self.status not in RULE_STATUSES:
            raise ValueError(f"rule {self.name} concludes {self.status.value}; a rule concludes fail or warn, and a "
                             "check passes when none of its rules matched (declare the words in Check.passing)")

    @property
    def severity(self) -> int:
        """Returns the rank of the rule's status: 0 for fail, 1 for warn (lower decides first)."""
        return RULE_STATUSES.index(self.status)


@dataclass(frozen=True)
class Passing:
    """The outcome of a check none of whose rules matched: the record's rule name and message."""

    name: str
    message: Words
    status: ClassVar[Status] = Status.PASS
    remediation: ClassVar[str] = ""


Outcome = Rule | Exemption | Passing


@dataclass
class Facts:
    """What a check hands the engine: evidence (numbers with units), its basis, and the stage it reached.

    ``unjudged`` names evidence shown for context that no rule may judge (a figure that holds only in a
    hypothetical, such as the run time of a job that does not fit): the engine does not post it, and the
    rules that name it do not apply.
    """

    evidence: dict[str, Any] = field(default_factory=dict)
    basis: Basis = Basis.ESTIMATED
    stage: Stage = Stage.DECIDE
    reason: str = ""
    unjudged: frozenset[str] = frozenset()


class Context:
    """One check's view of an evaluation: its inputs reader, the policy, and values shared between checks."""

    def __init__(self, inputs: Inputs, policy: Policy, shared: dict[Any, Any], check: type[Check] | None) -> None:
        self.inputs = inputs
        self.policy = policy
        self.reader = Reader(inputs)
        self._read = self.reader.read  # the pointers read, which value() and memo() note here directly
        self._shared = shared
        self._check = check
        self.peer_missing: dict[str, list[str]] = {}
        job = shared.get(Job)
        if job is not None:  # parsed by an earlier context of the evaluation (``job`` below)
            self.job = job

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

    @cached_property
    def job(self) -> Job:
        """Returns the evaluation's job (rules/job), parsed from its inputs once and shared by every check."""
        job = self._shared.get(Job)
        if job is None:
            job = self._shared[Job] = parse_job(self.inputs)
        return job

    def value(self, given: Given[T]) -> T | None:
        """Returns a value of the job (a default included) and notes its pointer as read when the submission
        states it (a default is not an input of the submission)."""
        value, pointer, source = given
        # An array of texts or numbers (a tuple) is looked into, not named as an input itself, as its items' are not.
        if value is not None and source != SPEC_DEFAULT and type(value) is not tuple:
            self._read[pointer] = None
        return value

    def needed(self, given: Given[T]) -> T | None:
        """Returns ``value(given)``; notes its pointer as missing when the submission does not hold it."""
        if given.value is None:
            if given.pointer not in self.reader.missing:
                self.reader.missing.append(given.pointer)
            return None
        return self.value(given)

    def threshold(self, name: str) -> Any:
        """Returns the policy value the check names ``name`` in its ``thresholds``."""
        if self._check is None:
            raise LookupError(f"threshold {name!r} read outside a check: facts read for the search have none")
        return self.policy.value(self._check.thresholds[name])

    def setting(self, path: str) -> Any:
        """Returns a policy value by dotted path (for estimator parameters that are not thresholds)."""
        return self.policy.value(path)

    def memo(self, compute: Callable[[Context], Any], *, reads_of_refusal: bool = False) -> Any:
        """Returns ``compute(self)`` computed once per evaluation (keyed by the function itself); the inputs it read
        count for every caller.

        A raise keeps nothing, and the inputs read before it count for the caller only with ``reads_of_refusal``
        (for a fact that was read directly before it was memoised, so that a refusal still names what it read).
        """
        memoised = self._shared.get(compute)
        if memoised is None:
            probe = Context(self.inputs, self.policy, self._shared, self._check)
            try:
                value = compute(probe)
            except Exception:
                if reads_of_refusal:
                    self._take_reads(probe._read, probe.reader.missing)
                raise
            # The pointers as a dict (in the order read), which every later caller's reader takes at once.
            memoised = self._shared[compute] = (value, dict(probe._read), list(probe.reader.missing))
        value, pointers, missing = memoised
        self._read.update(pointers)  # a fact read on every path: its reads noted without a call
        if missing:
            self._take_reads({}, missing)
        return value

    def _take_reads(self, pointers: dict[str, None], missing: list[str]) -> None:
        self._read.update(pointers)
        if missing:
            noted = self.reader.missing
            for pointer in missing:
                if pointer not in noted:
                    noted.append(pointer)

    # ---- outcomes -----------------------------------------------------------------------------
    def insufficient(self, reason: str = "", **evidence: Any) -> Facts:
        return Facts(evidence=evidence, stage=Stage.INSUFFICIENT_DATA, reason=reason)

    def not_applicable(self, reason: str) -> Facts:
        return Facts(stage=Stage.NOT_APPLICABLE, reason=reason)


def facts_context(inputs: Inputs, policy: Policy) -> Context:
    """Returns a context that reads the facts of ``inputs`` under ``policy`` outside any check (the layout search
    sizes its job with the facts the checks read): its own job and memo, no thresholds, and no record is made of
    what it reads."""
    return Context(inputs, policy, {}, None)


class Check:
    """Base class of the acceptance checks; subclasses are declarations, see rules/checks/peak_memory.py."""

    id: ClassVar[str]
    title: ClassVar[str]
    plan_item: ClassVar[str]  # the heading of the acceptance plan item, quoted from the seed document
    plan_source: ClassVar[str] = ACCEPTANCE_PLAN  # the title of the document the plan item is quoted from
    thresholds: ClassVar[dict[str, str]] = {}  # fact name → dotted policy path
    rules: ClassVar[tuple[Rule, ...]] = ()  # the conditions for fail and warn, in order of precedence
    passing: ClassVar[Passing]  # the rule name and message of the check when none of its rules matched
    headline: ClassVar[str] = ""  # the deciding figure for one-line summaries, a format string over evidence
    # A check that reports on the others (training-objective lists what they lack) gathers after them and
    # reads their missing inputs from ``Context.peer_missing``.
    gathers_last: ClassVar[bool] = False
    insufficient_remediation: ClassVar[str] = "Add the missing inputs to the submission and evaluate again."

    def gather(self, ctx: Context) -> Facts:  # pragma: no cover - every check overrides it
        raise NotImplementedError

    @classmethod
    def outcome(cls, name: str) -> Outcome:
        """Returns the rule, exemption or pass outcome called ``name``; KeyError when the check has none."""
        if cls.passing.name == name:
            return cls.passing
        for rule in cls.rules:
            if rule.name == name:
                return rule
        for rule in cls.rules:
            if rule.unless is not None and rule.unless.name == name:
                return rule.unless
        raise KeyError(f"check {cls.id} has no rule named {name!r}")

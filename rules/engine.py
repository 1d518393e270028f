"""The one adapter around durable_rules: post facts under a fresh state, collect verdicts, delete the state.

durable_rules keeps every state it has seen until it is deleted (an evaluation that forgets to delete
fails with MemoryError after a few thousand runs), keeps exceptions raised inside actions on the state
instead of raising them, and raises MessageNotHandledException when no rule matches a fact. This module
turns all three into explicit behaviour: the state is always deleted, action errors are re-raised as
EngineError, and every fact is acknowledged by one rule shared by every check (the acknowledgement of the
decide stage, or the rule of its other stage), which takes all the facts of its stage in one action, and
must have been seen by it.

A check is decided as conftest decides a policy: every rule of the check whose condition holds is a
finding; the most severe finding decides (fail before warn), the first declared among equals gives the
words, a finding whose exemption also holds is set aside, and a check with no finding passes. The engine
fails closed where durable would silently not match: a rule that names a fact the check did not give
(absent, None, or not a number, string or boolean) can be neither true nor false, and unless a finding
that outranks it decided the check, deciding it raises EngineError rather than letting it pass.

durable_rules is used through its public API only: the rules are written with ``durable.lang`` (``when_all``
and its conditions over ``m``, each rule's ``define()``), and one ``durable.engine.Ruleset`` per engine takes
the facts (``assert_facts``), runs the actions they trigger on the caller's thread (``do_actions``) and frees
the state (``delete_state``). durable's ``Host`` (which ``durable.lang.post`` and ``assert_facts`` go through)
is not used: its constructor starts two dispatcher threads that poll every registered ruleset, and one of them
could start an evaluation's pending action between its ``assert_facts`` and ``do_actions`` and run it on
another thread, after the evaluation read its verdicts. Nor is ``durable.lang.ruleset``, which registers every
definition in a module-global table that only the Host empties.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from durable import engine as durable_engine
from durable import lang

from rules.checks.base import Check, Facts, Passing, Rule, Stage, facts_named
from rules.errors import EngineError
from rules.status import Status

# durable's C engine is not thread-safe, and durable.lang's rule objects read its module-global definition
# stacks: every call into durable happens under this lock.
_lock = threading.RLock()
_names = itertools.count()
# The state of each post: a new sid every time in this process (durable's states live in this process only, and
# each is deleted once decided), without uuid4's read of the system's random source.
_sids = itertools.count()


@dataclass(frozen=True)
class _StageRule:
    """A rule every check shares: the stage its gather reached decides it, whatever its own rules say."""

    stage: Stage
    status: Status

    @property
    def name(self) -> str:
        return self.stage.value


SHARED_RULES = (_StageRule(Stage.NOT_APPLICABLE, Status.NOT_APPLICABLE),
                _StageRule(Stage.INSUFFICIENT_DATA, Status.INSUFFICIENT_DATA),
                _StageRule(Stage.INCONSISTENT, Status.FAIL))

# What a durable action notes: the acknowledgement of a fact at the decide stage, a shared stage rule, a
# check's rule by its index, or the exemption of the rule at that index.
_SEEN = ("seen", -1)


_INT64 = 2**63


def durable_number(value: int | float) -> int | float:
    """Returns ``value`` in a form durable_rules 2.0.28 parses and compares correctly.

    Its C JSON parser rejects a float written with an exponent but no decimal point (json.dumps gives
    "1e-05", "1e+16"; error code 204) and wraps integers beyond int64. Such integers become floats, and
    such floats move one ulp away from zero, whose shortest form has a decimal point ("1.0000000000000001e-05").
    Equal values stay equal, order is kept (two values could meet only if one lay exactly one ulp above the other).
    """
    if isinstance(value, int) and not -_INT64 <= value < _INT64:
        value = float(value)
    if isinstance(value, float) and math.isfinite(value):
        written = repr(value)
        while "e" in written and "." not in written:
            value = math.nextafter(value, math.copysign(math.inf, value))
            written = repr(value)
    return value


def fact_for(check: type[Check], facts: Facts, thresholds: dict[str, Any], sid: str,
             named: frozenset[str] | None = None) -> dict[str, Any]:
    """Returns the flat fact durable_rules sees: scalar evidence the rules may judge, named thresholds, check
    id and stage.

    ``named``: the facts the check's rules and exemptions name (``facts_named``); the others are left out,
    since no condition can read them (a threshold of that name outranks the evidence, as when all are posted).
    """
    fact: dict[str, Any] = {}
    evidence, unjudged = facts.evidence, facts.unjudged
    if named is None:
        values = {**evidence, **thresholds}
        keys: Iterable[str] = values
    else:  # one pass over the named facts, without a dict of the values first
        values, keys = evidence, named
    for key in keys:
        if key in thresholds:
            value = thresholds[key]
        elif key in values:
            value = values[key]
        else:
            continue
        if key in unjudged:
            continue
        kind = type(value)
        # The common cases as durable reads them, without durable_number's checks: repr writes no exponent
        # for a float of magnitude in [1e-4, 1e16).
        if kind is str or kind is bool or (kind is int and -_INT64 <= value < _INT64) or (
                kind is float and (1e-4 <= abs(value) < 1e16 or value == 0.0)):
            fact[key] = value
        elif isinstance(value, bool | str):
            fact[key] = value
        elif isinstance(value, int | float):
            fact[key] = durable_number(value)
    fact.update({"sid": sid, "check": check.id, "stage": facts.stage._value_})  # _value_: .value without a call
    return fact


class RuleEngine:
    """One durable_rules ruleset holding every rule of the given checks; thread-safe."""

    def __init__(self, checks: Sequence[type[Check]]) -> None:
        self.checks = tuple(checks)
        for check in self.checks:
            _require_declaration(check)
        # The facts each rule's condition and exemption name, to tell a false condition from an unknown one.
        self._needs = {check.id: tuple((facts_named(rule.when),
                                        facts_named(rule.unless.when) if rule.unless else frozenset())
                                       for rule in check.rules)
                       for check in self.checks}
        self._named = {check_id: frozenset().union(*(condition | exemption for condition, exemption in needs))
                       for check_id, needs in self._needs.items()}
        # The facts the rules' conditions name: when all were given and no rule matched, the check passes.
        self._conditions = {check_id: frozenset().union(*(condition for condition, _ in needs))
                            for check_id, needs in self._needs.items()}
        self.ruleset = f"quotecheck_{next(_names)}"
        self._verdicts: dict[str, dict[str, set[tuple[str, int]]]] = defaultdict(lambda: defaultdict(set))
        with _lock:
            # No host: its actions post nothing to other rulesets, and a Host would start dispatcher threads.
            self._rules = durable_engine.Ruleset(self.ruleset, None, self._definition())

    def _definition(self) -> dict[str, Any]:
        """Returns the ruleset's definition as ``durable.lang.ruleset.define`` writes it: ``r_<n>`` → the n-th
        rule's condition and action."""
        # Every fact is acknowledged by one rule of its stage: at the decide stage the acknowledgement, at the
        # others the shared stage rule (a fact's stage is one of Stage's four), so durable never meets an
        # unhandled fact: deleting a state that holds one crashes durable_rules 2.0.28 (segmentation fault).
        # Each takes every fact of its stage in one action (cap: at most one fact per check is posted at a time),
        # instead of one action per fact.
        every = lang.cap(max(1, len(self.checks)))
        rules = [lang.when_all(every, lang.m.stage == Stage.DECIDE.value)(self._acknowledger(_SEEN))]
        rules.extend(lang.when_all(every, lang.m.stage == shared.stage.value)(self._acknowledger(("stage", index)))
                     for index, shared in enumerate(SHARED_RULES))
        for check in self.checks:
            decided = (lang.m.check == check.id) & (lang.m.stage == Stage.DECIDE.value)
            for index, rule in enumerate(check.rules):
                rules.append(lang.when_all(decided & rule.when(lang.m))(self._collector(check.id, ("rule", index))))
                if rule.unless is not None:
                    rules.append(lang.when_all(decided & rule.unless.when(lang.m))(
                        self._collector(check.id, ("exemption", index))))
        return {f"r_{index}": rule.define() for index, rule in enumerate(rules)}

    def _acknowledger(self, verdict: tuple[str, int]):
        """Returns the action of a rule every check shares: it notes ``verdict`` for the check of each fact it
        matched (a list, the rule being capped) under the state's sid."""
        def action(c: Any) -> None:
            noted = self._verdicts[c.s.sid]
            for fact in c.m:
                noted[fact["check"]].add(verdict)

        return action

    def _collector(self, check_id: str, verdict: tuple[str, int]):
        """Returns the action of one rule: it notes ``verdict`` for ``check_id`` under the state's sid."""
        def action(c: Any) -> None:
            self._verdicts[c.s.sid][check_id].add(verdict)  # the state's sid: fewer of durable's lookups than c.m.sid

        return action

    def decide(self, items: Iterable[tuple[type[Check], Facts, dict[str, Any]]]) -> dict[str, tuple[Status, str]]:
        """Returns check id → (status, rule name) for each (check, facts, thresholds).

        Raises EngineError when a rule action fails, when durable did not see a fact, and when a check
        cannot be decided because a rule that could outrank its outcome names a fact the check did not give.
        """
        items = list(items)
        posted, found = self._post(items, batch=True)
        if found is None:  # durable refused the batch or an action raised: post one by one to name the check
            posted, found = self._post(items, batch=False)
        decided: dict[str, tuple[Status, str]] = {}
        for check_id, (check, facts, fact) in posted.items():
            seen = found.get(check_id, set())
            stages = [SHARED_RULES[index] for kind, index in seen if kind == "stage"]
            if not (_SEEN in seen if facts.stage is Stage.DECIDE else stages):
                raise EngineError(f"durable_rules did not see the facts of check {check_id}")
            if facts.stage is Stage.DECIDE:
                given = set(fact) | facts.unjudged
                if len(seen) == 1 and self._conditions[check_id] <= given:  # no rule matched, and each could
                    decided[check_id] = (check.passing.status, check.passing.name)
                else:
                    decided[check_id] = _conclusion(check, self._needs[check_id], given, seen)
            else:
                if len(stages) != 1:
                    raise EngineError(f"check {check_id} at stage {facts.stage.value} matched {len(stages)} "
                                      "stage rules")
                decided[check_id] = (stages[0].status, stages[0].name)
        return decided

    def _post(self, items: list[tuple[type[Check], Facts, dict[str, Any]]], *, batch: bool
              ) -> tuple[dict[str, tuple[type[Check], Facts, dict[str, Any]]], dict[str, set[tuple[str, int]]] | None]:
        """Returns the facts posted by check id and the verdicts durable noted, under a fresh state it deletes.

        ``batch``: every fact goes to durable in one call (one pass through its engine), and the verdicts are
        None when durable refused them or an action raised; otherwise fact by fact, raising EngineError for the
        first check whose fact durable rejected or whose action raised.
        """
        sid = f"evaluation-{next(_sids)}"
        posted: dict[str, tuple[type[Check], Facts, dict[str, Any]]] = {}
        with _lock:
            try:
                for check, facts, thresholds in items:
                    # At a stage other than decide only the stage is read (by its shared rule): no evidence.
                    fact = fact_for(check, facts, thresholds, sid, self._named[check.id]
                                    if facts.stage is Stage.DECIDE else frozenset())
                    posted[check.id] = (check, facts, fact)
                    if not batch:
                        self._assert([fact], f"of check {check.id}")
                if batch and posted:
                    try:
                        self._assert([fact for _, _, fact in posted.values()], "of the evaluation")
                    except EngineError:
                        return posted, None
                return posted, self._verdicts.pop(sid, {})
            finally:
                self._verdicts.pop(sid, None)
                try:
                    self._rules.delete_state(sid)
                except Exception:  # noqa: BLE001 - no fact was asserted, so there is no state to free
                    pass

    def _assert(self, facts: list[dict[str, Any]], whose: str) -> None:
        """Asserts ``facts`` and runs the actions they trigger, on this thread; raises EngineError naming
        ``whose`` facts when durable rejected them or an action raised.

        durable catches what an action raises and writes it on the state as ``exception``; the state that
        ``do_actions`` completes with carries it.
        """
        try:
            state_handle = self._rules.assert_facts(facts)
        except Exception as error:  # durable raises plain Exception for engine-level faults
            raise EngineError(f"durable_rules rejected the facts {whose}: {error}") from None
        outcomes: list[tuple[Any, Any]] = []
        self._rules.do_actions(state_handle, lambda error, state: outcomes.append((error, state)))
        error, state = outcomes[-1] if outcomes else (None, None)
        if error is not None:
            raise EngineError(f"durable_rules failed to run the actions {whose}: {error}")
        if isinstance(state, dict) and state.get("exception"):
            raise EngineError(f"a rule {whose} raised: {state['exception']}")


def _conclusion(check: type[Check], needs: Sequence[tuple[frozenset[str], frozenset[str]]], given: set[str],
                seen: set[tuple[str, int]]) -> tuple[Status, str]:
    """Returns the (status, rule name) of a check at the decide stage from the rules durable matched.

    ``needs`` holds the facts each rule's condition and exemption name, ``given`` the facts posted or
    declared unjudged. A matched rule whose exemption also matched is set aside. The most severe remaining
    rule decides, the first declared among equals; with none, the first exemption that set a rule aside
    names the pass, else the check's declared pass outcome does. A rule that cannot be evaluated (it, or
    the exemption of a rule that matched, names a fact not given) must be outranked by the deciding rule.
    """
    findings: list[tuple[int, int, Rule]] = []
    exempted: list[Rule] = []
    unknown: list[tuple[int, int, Rule, list[str]]] = []
    for index, (rule, (condition_needs, exemption_needs)) in enumerate(zip(check.rules, needs, strict=True)):
        lacking = condition_needs - given
        matched = ("rule", index) in seen
        if matched and rule.unless is not None:
            lacking = exemption_needs - given
            if not lacking and ("exemption", index) in seen:
                exempted.append(rule)
                continue
        if lacking:
            unknown.append((rule.severity, index, rule, sorted(lacking)))
        elif matched:
            findings.append((rule.severity, index, rule))
    deciding = min(findings, key=lambda finding: finding[:2], default=None)
    for severity, index, rule, lacking in unknown:
        if deciding is None or (severity, index) < deciding[:2]:
            raise EngineError(f"check {check.id} cannot be decided: rule {rule.name} needs "
                              f"{', '.join(lacking)}, which the check did not give as numbers, strings or booleans")
    if deciding is not None:
        return deciding[2].status, deciding[2].name
    outcome = (exempted[0].unless if exempted else None) or check.passing
    return outcome.status, outcome.name


def _require_declaration(check: type[Check]) -> None:
    """Raises EngineError when a check lacks a pass outcome or names two of its outcomes alike."""
    passing = getattr(check, "passing", None)
    if not isinstance(passing, Passing):
        raise EngineError(f"check {check.id} declares no pass outcome (Check.passing)")
    names = [passing.name, *(r.name for r in check.rules), *(r.unless.name for r in check.rules if r.unless)]
    if len(names) != len(set(names)):
        raise EngineError(f"check {check.id} names two of its outcomes alike: {', '.join(names)}")

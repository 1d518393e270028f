"""The one adapter around durable_rules: post facts under a fresh state, collect verdicts, delete the state.

durable_rules keeps every state it has seen until it is deleted (an evaluation that forgets to delete
fails with MemoryError after a few thousand runs), keeps exceptions raised inside actions on the state
instead of raising them, and raises MessageNotHandledException when no rule matches a fact. This module
turns all three into explicit behaviour: the state is always deleted, action errors are re-raised as
EngineError, and every fact is acknowledged by a catch-all rule (and must have been seen by it).

A check is decided as conftest decides a policy: every rule of the check whose condition holds is a
finding; the most severe finding decides (fail before warn), the first declared among equals gives the
words, a finding whose exemption also holds is set aside, and a check with no finding passes. The engine
fails closed where durable would silently not match: a rule that names a fact the check did not give
(absent, None, or not a number, string or boolean) can be neither true nor false, and unless a finding
that outranks it decided the check, deciding it raises EngineError rather than letting it pass.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import durable_rules_engine
from durable import engine as durable_engine
from durable import lang

from rules.checks.base import Check, Facts, Passing, Rule, Stage, facts_named
from rules.errors import EngineError
from rules.status import Status

_lock = threading.RLock()
_host: durable_engine.Host | None = None
_names = itertools.count()
# The state of each post: a new sid every time in this process (durable's states live in this process only, and
# each is deleted once decided), without uuid4's read of the system's random source.
_sids = itertools.count()


class _SynchronousHost(durable_engine.Host):
    """A durable host without its background dispatcher threads.

    durable's Host polls every ruleset from two timer threads (for timers and queued actions, which no
    acceptance rule uses). The C engine is not thread-safe, so those threads would race with evaluations;
    here every call into the engine happens on the caller's thread, under ``_lock``.
    """

    def _run(self) -> None:
        return None


def _shared_host() -> durable_engine.Host:
    global _host
    if _host is None:
        _host = _SynchronousHost()
    return _host


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

# What a durable action notes: the catch-all acknowledgement, a shared stage rule, a check's rule by its
# index, or the exemption of the rule at that index.
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
    evidence = facts.evidence
    if named is None:
        values = {**evidence, **thresholds}
    else:
        values = {key: thresholds[key] if key in thresholds else evidence[key]
                  for key in named if key in thresholds or key in evidence}
    for key, value in values.items():
        if key in facts.unjudged:
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
        self.ruleset = f"quotecheck_{next(_names)}"
        self._verdicts: dict[str, dict[str, set[tuple[str, int]]]] = defaultdict(lambda: defaultdict(set))
        with _lock:  # durable's rule-definition context is module-global state
            self._define_and_register()

    def _define_and_register(self) -> None:
        definition = lang.ruleset(self.ruleset)
        with definition:
            for check in self.checks:
                of_check = lang.m.check == check.id
                # Every fact of a check is acknowledged by this rule, so durable never meets an unhandled fact:
                # deleting a state that holds one crashes durable_rules 2.0.28 (segmentation fault).
                lang.when_all(of_check)(self._collector(check.id, _SEEN))
                for index, shared in enumerate(SHARED_RULES):
                    lang.when_all(of_check & (lang.m.stage == shared.stage.value))(
                        self._collector(check.id, ("stage", index)))
                decide = lang.m.stage == Stage.DECIDE.value
                for index, rule in enumerate(check.rules):
                    lang.when_all(of_check & decide & rule.when(lang.m))(self._collector(check.id, ("rule", index)))
                    if rule.unless is not None:
                        lang.when_all(of_check & decide & rule.unless.when(lang.m))(
                            self._collector(check.id, ("exemption", index)))
        lang._rulesets.pop(self.ruleset, None)  # durable's module-level registry must not re-register it
        name, body = definition.define()
        _shared_host().register_rulesets({name: body})

    def _collector(self, check_id: str, verdict: tuple[str, int]):
        def action(c: Any) -> None:
            self._verdicts[c.m.sid][check_id].add(verdict)

        action.verdict = (check_id, verdict)  # what _run_batch notes for this action without calling it
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
            if _SEEN not in seen:
                raise EngineError(f"durable_rules did not see the facts of check {check_id}")
            if facts.stage is Stage.DECIDE:
                decided[check_id] = _conclusion(check, self._needs[check_id], set(fact) | facts.unjudged, seen)
            else:
                stages = [SHARED_RULES[index] for kind, index in seen if kind == "stage"]
                if len(stages) != 1:
                    raise EngineError(f"check {check_id} at stage {facts.stage.value} matched {len(stages)} "
                                      "stage rules")
                decided[check_id] = (stages[0].status, stages[0].name)
        return decided

    def _post(self, items: list[tuple[type[Check], Facts, dict[str, Any]]], *, batch: bool
              ) -> tuple[dict[str, tuple[type[Check], Facts, dict[str, Any]]], dict[str, set[tuple[str, int]]] | None]:
        """Returns the facts posted by check id and the verdicts durable noted, under a fresh state it deletes.

        ``batch``: every fact goes to durable in one call (one pass through its engine), and the verdicts are
        None when that call or an action failed; otherwise fact by fact, raising EngineError for the first
        check whose fact durable rejected or whose action raised.
        """
        sid = f"evaluation-{next(_sids)}"
        host = _shared_host()
        posted: dict[str, tuple[type[Check], Facts, dict[str, Any]]] = {}
        with _lock:
            try:
                for check, facts, thresholds in items:
                    fact = fact_for(check, facts, thresholds, sid, self._named[check.id])
                    posted[check.id] = (check, facts, fact)
                    if not batch:
                        self._assert(host, check, fact)
                if batch and posted and not self._run_batch(host, sid, [fact for _, _, fact in posted.values()]):
                    return posted, None
                return posted, self._verdicts.pop(sid, {})
            finally:
                self._verdicts.pop(sid, None)
                try:
                    host.delete_state(self.ruleset, sid)
                except Exception:  # noqa: BLE001 - no fact was asserted, so there is no state to free
                    pass

    def _run_batch(self, host: durable_engine.Host, sid: str, facts: list[dict[str, Any]]) -> bool:
        """Asserts ``facts`` under state ``sid`` and runs the actions they trigger; False when durable refused
        them or an action raised (the caller then posts them one by one, through durable's own dispatch, to
        name the check).

        The actions run here as durable's Ruleset._flush_actions runs them, without what only asynchronous
        actions need (a Closure with its lease timer, a Promise chain): start the state's first action, run it
        on the fact it matched, write the state back (no action changes it), complete it and start the next.
        An action of ``_collector`` is not called: the verdict it would note is noted, and the fact it matched
        is not parsed (``_action_name`` reads the rule's name from durable's message).
        """
        ruleset = host.get_ruleset(self.ruleset)
        try:
            state_handle = ruleset.assert_facts(facts)
            started = durable_rules_engine.start_action_for_state(ruleset._handle, state_handle)
        except Exception:  # noqa: BLE001 - refused: posted again one by one, which names the check
            return False
        if not started:
            return True
        state = started[0]  # written back as durable gave it (its dispatch writes back the same JSON, re-encoded)
        actions, verdicts = ruleset._actions, self._verdicts[sid]
        message: str | None = started[1]
        while message:
            name = _action_name(message)
            noted = getattr(actions[name]._func, "verdict", None) if name in actions else None
            if noted is not None:
                verdicts[noted[0]].add(noted[1])
            else:
                (name, matched), = json.loads(message).items()
                try:
                    actions[name]._func(_Matched(matched))
                except Exception:  # noqa: BLE001 - durable's dispatch catches it too; the one-by-one post reports it
                    with contextlib.suppress(Exception):  # the state is deleted next in any case
                        durable_rules_engine.abandon_action(ruleset._handle, state_handle)
                    return False
            durable_rules_engine.update_state(ruleset._handle, state)
            message = durable_rules_engine.complete_and_start_action(ruleset._handle, state_handle)
        return True

    def _assert(self, host: durable_engine.Host, check: type[Check], fact: dict[str, Any]) -> None:
        try:
            state = host.assert_fact(self.ruleset, fact)
        except Exception as error:  # durable raises plain Exception for engine-level faults
            raise EngineError(f"durable_rules rejected the facts of check {check.id}: {error}") from None
        if isinstance(state, dict) and state.get("exception"):
            raise EngineError(f"a rule of check {check.id} raised: {state['exception']}")


def _action_name(message: str) -> str | None:
    """Returns the rule name a durable action message ``{"<rule name>":{"m":{…}}}`` starts with, read without
    parsing the fact it carries; None when the message does not start so (it is then parsed in full).

    durable names rules r_0, r_1, …, which JSON writes without escapes; a name holding a backslash is refused.
    """
    if message.startswith('{"'):
        end = message.find('"', 2)
        if end > 2 and message.startswith('":', end) and "\\" not in message[2:end]:
            return message[2:end]
    return None


class _Matched:
    """What an action receives in place of durable's Closure: ``m``, the fact its rule matched."""

    __slots__ = ("m",)

    def __init__(self, matched: dict[str, Any]) -> None:
        self.m = durable_engine.Content(matched["m"])


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

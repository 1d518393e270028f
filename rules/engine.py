"""The one adapter around durable_rules: post facts under a fresh state, collect verdicts, delete the state.

durable_rules keeps every state it has seen until it is deleted (an evaluation that forgets to delete
fails with MemoryError after a few thousand runs), records exceptions raised inside actions on the state
instead of raising them, and raises MessageNotHandledException when no rule matches a fact. This module
turns all three into explicit behaviour: the state is always deleted, action errors are re-raised as
EngineError, and every fact must be matched by exactly one rule of its check.
"""

from __future__ import annotations

import itertools
import math
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from durable import engine as durable_engine
from durable import lang

from rules.checks.base import Check, Facts, Rule, Stage
from rules.errors import EngineError
from rules.status import Status

_lock = threading.RLock()
_host: durable_engine.Host | None = None
_names = itertools.count()


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


def _stage_rule(stage: Stage, status: Status) -> Rule:
    return Rule(status=status, name=stage.value, when=lambda m: m.stage == stage.value, message="")


_SEEN = Rule(status=Status.NOT_APPLICABLE, name="(seen)", when=lambda m: m.check, message="")

SHARED_RULES = (_stage_rule(Stage.NOT_APPLICABLE, Status.NOT_APPLICABLE),
                _stage_rule(Stage.INSUFFICIENT_DATA, Status.INSUFFICIENT_DATA),
                _stage_rule(Stage.INCONSISTENT, Status.FAIL))


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
        while "e" in repr(value) and "." not in repr(value):
            value = math.nextafter(value, math.copysign(math.inf, value))
    return value


def fact_for(check: type[Check], facts: Facts, thresholds: dict[str, Any], sid: str) -> dict[str, Any]:
    """Returns the flat fact durable_rules sees: scalar evidence, named thresholds, check id and stage."""
    fact: dict[str, Any] = {}
    for key, value in {**facts.evidence, **thresholds}.items():
        if isinstance(value, bool | str):
            fact[key] = value
        elif isinstance(value, int | float):
            fact[key] = durable_number(value)
    fact.update({"sid": sid, "check": check.id, "stage": facts.stage.value})
    return fact


class RuleEngine:
    """One durable_rules ruleset holding every rule of the given checks; thread-safe."""

    def __init__(self, checks: Sequence[type[Check]]) -> None:
        self.checks = tuple(checks)
        self.ruleset = f"quotecheck_{next(_names)}"
        self._verdicts: dict[str, dict[str, list[tuple[Status, str]]]] = defaultdict(lambda: defaultdict(list))
        with _lock:  # durable's rule-definition context is module-global state
            self._define_and_register()

    def _define_and_register(self) -> None:
        definition = lang.ruleset(self.ruleset)
        with definition:
            for check in self.checks:
                # Every fact of a check is acknowledged by this rule, so durable never meets an unhandled fact:
                # deleting a state that holds one crashes durable_rules 2.0.28 (segmentation fault).
                lang.when_all(lang.m.check == check.id)(self._recorder(check.id, _SEEN))
                for rule in SHARED_RULES:
                    lang.when_all((lang.m.check == check.id) & rule.when(lang.m))(self._recorder(check.id, rule))
                for rule in check.rules:
                    condition = ((lang.m.check == check.id) & (lang.m.stage == Stage.DECIDE.value)
                                 & rule.when(lang.m))
                    lang.when_all(condition)(self._recorder(check.id, rule))
        lang._rulesets.pop(self.ruleset, None)  # durable's module-level registry must not re-register it
        name, body = definition.define()
        _shared_host().register_rulesets({name: body})

    def _recorder(self, check_id: str, rule: Rule):
        def action(c: Any) -> None:
            self._verdicts[c.m.sid][check_id].append((rule.status, rule.name))

        return action

    def decide(self, items: Iterable[tuple[type[Check], Facts, dict[str, Any]]]) -> dict[str, tuple[Status, str]]:
        """Returns check id → (status, rule name) for each (check, facts, thresholds).

        Raises EngineError when a rule action fails, when no rule matches a fact, or when more than one
        does: a check's rules must cover every case exactly once.
        """
        sid = uuid.uuid4().hex
        host = _shared_host()
        posted: dict[str, dict[str, Any]] = {}
        with _lock:
            try:
                for check, facts, thresholds in items:
                    posted[check.id] = fact_for(check, facts, thresholds, sid)
                    self._assert(host, check, posted[check.id])
                found = self._verdicts.pop(sid, {})
            finally:
                self._verdicts.pop(sid, None)
                try:
                    host.delete_state(self.ruleset, sid)
                except Exception:  # noqa: BLE001 - no fact was asserted, so there is no state to free
                    pass
        decided: dict[str, tuple[Status, str]] = {}
        for check_id, fact in posted.items():
            seen = found.get(check_id, [])
            if (_SEEN.status, _SEEN.name) not in seen:
                raise EngineError(f"durable_rules did not see the facts of check {check_id}")
            # durable fires a rule once per matching branch of an `|`; one rule is still one verdict.
            verdicts = list(dict.fromkeys(v for v in seen if v[1] != _SEEN.name))
            if not verdicts:
                raise EngineError(f"no rule of check {check_id} matches its facts: {_short(fact)}")
            if len(verdicts) != 1:
                names = ", ".join(name for _, name in verdicts) or "none"
                raise EngineError(f"check {check_id} must be decided by exactly one rule; matched: {names}")
            decided[check_id] = verdicts[0]
        return decided

    def _assert(self, host: durable_engine.Host, check: type[Check], fact: dict[str, Any]) -> None:
        try:
            state = host.assert_fact(self.ruleset, fact)
        except Exception as error:  # durable raises plain Exception for engine-level faults
            raise EngineError(f"durable_rules rejected the facts of check {check.id}: {error}") from None
        if isinstance(state, dict) and state.get("exception"):
            raise EngineError(f"a rule of check {check.id} raised: {state['exception']}")


def _short(fact: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in fact.items() if k != "sid")
    return text if len(text) < 400 else text[:400] + "…"

"""The durable_rules adapter: the most severe matching rule decides, errors surface, states are always deleted."""

from __future__ import annotations

import json
import resource
import threading
from pathlib import Path

import pytest

from rules.checks.base import Check, Context, Exemption, Facts, Passing, Rule, Stage
from rules.engine import RuleEngine
from rules.errors import EngineError, InconsistentInput
from rules.evaluate import default_engine, evaluate, verdict_of
from rules.status import Status

EXAMPLE = Path(__file__).parent.parent / "examples" / "dgx-h100-70b-finetune.json"


def _check(check_id: str, *rules: Rule, passing: str = "ok") -> type[Check]:
    return type(check_id.title().replace("-", ""), (Check,), {
        "id": check_id, "title": check_id, "plan_item": check_id, "rules": rules, "thresholds": {"limit": "x"},
        "passing": Passing(passing, "")})


def _facts(**evidence) -> Facts:
    return Facts(evidence=evidence)


def test_a_check_no_rule_matches_passes_with_its_declared_outcome() -> None:
    check = _check("gap-check", Rule(Status.FAIL, "too-large", lambda m: m.value > m.limit, ""), passing="small")
    engine = RuleEngine([check])

    assert engine.decide([(check, _facts(value=2), {"limit": 3})]) == {"gap-check": (Status.PASS, "small")}
    assert engine.decide([(check, _facts(value=5), {"limit": 3})]) == {"gap-check": (Status.FAIL, "too-large")}


def test_the_most_severe_matching_rule_decides_and_the_first_declared_among_equals() -> None:
    check = _check("severity-check",
                   Rule(Status.WARN, "near", lambda m: m.value > m.warn_at, ""),
                   Rule(Status.FAIL, "over", lambda m: m.value > m.limit, ""),
                   Rule(Status.FAIL, "far-over", lambda m: m.value > m.far, ""))
    engine = RuleEngine([check])
    limits = {"warn_at": 5, "limit": 10, "far": 20}

    def decided(value: int) -> tuple[Status, str]:
        return engine.decide([(check, _facts(value=value), limits)])["severity-check"]

    assert decided(1) == (Status.PASS, "ok")
    assert decided(7) == (Status.WARN, "near")
    assert decided(15) == (Status.FAIL, "over")  # near matches too: fail outranks warn
    assert decided(25) == (Status.FAIL, "over")  # far-over matches too: declared later, so over decides


def test_an_or_condition_matching_on_both_branches_is_one_finding() -> None:
    # durable fires a rule once per matching branch of an |; the engine counts the rule once.
    check = _check("either-check", Rule(Status.WARN, "either", lambda m: (m.a > m.limit) | (m.b > m.limit), ""))
    engine = RuleEngine([check])

    assert engine.decide([(check, _facts(a=5, b=5), {"limit": 3})]) == {"either-check": (Status.WARN, "either")}


def test_an_exemption_sets_its_rule_aside_and_names_the_pass() -> None:
    check = _check("exempt-check",
                   Rule(Status.WARN, "far-off", lambda m: m.ratio > m.limit, "", "look again",
                        unless=Exemption("far-off-but-cheap", lambda m: m.cost <= m.tolerated, "cheap")),
                   Rule(Status.FAIL, "broken", lambda m: m.broken == True, ""))  # noqa: E712
    engine = RuleEngine([check])
    limits = {"limit": 2, "tolerated": 0.01}

    def decided(**evidence) -> tuple[Status, str]:
        return engine.decide([(check, _facts(broken=False, **evidence), limits)])["exempt-check"]

    assert decided(ratio=3, cost=0.05) == (Status.WARN, "far-off")
    assert decided(ratio=3, cost=0.001) == (Status.PASS, "far-off-but-cheap")
    assert decided(ratio=1, cost=0.001) == (Status.PASS, "ok")  # the exemption alone is no outcome
    assert engine.decide([(check, _facts(broken=True, ratio=3, cost=0.001), limits)])["exempt-check"] == (
        Status.FAIL, "broken")


def test_a_rule_whose_fact_is_missing_fails_closed_unless_a_finding_outranks_it() -> None:
    # durable would simply not match a rule over an absent fact, and the check would pass.
    check = _check("absent-check",
                   Rule(Status.FAIL, "broken", lambda m: m.errors > m.limit, ""),
                   Rule(Status.WARN, "slow", lambda m: m.latency > m.slo, ""))
    engine = RuleEngine([check])
    limits = {"limit": 0, "slo": 100}

    with pytest.raises(EngineError, match="rule slow needs latency"):
        engine.decide([(check, _facts(errors=0), limits)])
    with pytest.raises(EngineError, match="rule slow needs latency"):
        engine.decide([(check, _facts(errors=0, latency=None), limits)])
    with pytest.raises(EngineError, match="rule broken needs errors"):
        engine.decide([(check, _facts(latency=500), limits)])  # a warning cannot stand for an unknown failure
    assert engine.decide([(check, _facts(errors=3), limits)]) == {"absent-check": (Status.FAIL, "broken")}


def test_unjudged_evidence_is_not_posted_and_its_rules_do_not_apply() -> None:
    check = _check("unjudged-check", Rule(Status.FAIL, "late", lambda m: m.days > m.limit, ""))
    engine = RuleEngine([check])
    hypothetical = Facts(evidence={"days": 40}, unjudged=frozenset({"days"}))

    assert engine.decide([(check, hypothetical, {"limit": 30})]) == {"unjudged-check": (Status.PASS, "ok")}


def test_a_rule_concludes_fail_or_warn_and_a_check_declares_its_pass() -> None:
    with pytest.raises(ValueError, match="a rule concludes fail or warn"):
        Rule(Status.PASS, "fine", lambda m: m.value > 0, "")
    undeclared = type("Undeclared", (Check,), {"id": "undeclared", "title": "", "plan_item": "", "rules": ()})
    with pytest.raises(EngineError, match="declares no pass outcome"):
        RuleEngine([undeclared])
    with pytest.raises(EngineError, match="names two of its outcomes alike"):
        RuleEngine([_check("twice", Rule(Status.FAIL, "ok", lambda m: m.value > 0, ""))])


def test_an_error_inside_a_rule_action_surfaces() -> None:
    # durable_rules keeps an exception raised by an action on the state instead of raising it.
    class ExplodingEngine(RuleEngine):
        def _collector(self, check_id: str, rule: Rule):
            def action(c) -> None:
                raise RuntimeError("action exploded")

            return action

    check = _check("raising-check", Rule(Status.FAIL, "any", lambda m: m.value > 0, ""))
    engine = ExplodingEngine([check])

    with pytest.raises(EngineError, match="a rule of check raising-check raised: .*action exploded"):
        engine.decide([(check, _facts(value=1), {"limit": 0})])


def test_the_state_is_deleted_after_every_evaluation_even_on_error() -> None:
    check = _check("state-check", Rule(Status.FAIL, "negative", lambda m: m.value < m.limit, ""))
    engine = RuleEngine([check])
    sids: list[str] = []
    assert_facts = engine._rules.assert_facts

    def noting_sids(facts: list[dict]):
        sids.extend(fact["sid"] for fact in facts)
        return assert_facts(facts)

    engine._rules.assert_facts = noting_sids
    engine.decide([(check, _facts(value=1), {"limit": 0})])
    with pytest.raises(EngineError):
        engine.decide([(check, _facts(other=1), {"limit": 0})])

    assert engine._verdicts == {} and len(set(sids)) == 2
    for sid in sids:
        with pytest.raises(Exception, match="error code"):  # durable reports an unknown state as an error
            engine._rules.get_state(sid)


def test_a_state_holding_facts_only_the_shared_acknowledgements_matched_is_deleted() -> None:
    # Deleting a state that holds a fact no rule matched crashes durable_rules 2.0.28; here no check's own rule
    # matches, so each fact is held only by the capped acknowledgement of its stage, taken in one action.
    checks = [_check(f"quiet-{n}", Rule(Status.FAIL, "negative", lambda m: m.value < 0, "")) for n in range(3)]
    engine = RuleEngine(checks)
    sids: list[str] = []
    assert_facts = engine._rules.assert_facts

    def noting_sids(facts: list[dict]):
        sids.extend(fact["sid"] for fact in facts)
        return assert_facts(facts)

    engine._rules.assert_facts = noting_sids
    stages = [_facts(value=1), Facts(stage=Stage.NOT_APPLICABLE), Facts(stage=Stage.INSUFFICIENT_DATA)]
    for _ in range(3):
        assert engine.decide([(check, facts, {}) for check, facts in zip(checks, stages, strict=True)]) == {
            "quiet-0": (Status.PASS, "ok"), "quiet-1": (Status.NOT_APPLICABLE, "not-applicable"),
            "quiet-2": (Status.INSUFFICIENT_DATA, "insufficient-data")}

    assert engine._verdicts == {} and len(set(sids)) == 3
    for sid in set(sids):
        with pytest.raises(Exception, match="error code"):
            engine._rules.get_state(sid)


def test_stage_rules_decide_insufficient_and_not_applicable() -> None:
    check = _check("stage-check", Rule(Status.FAIL, "negative", lambda m: m.value < 0, ""))
    engine = RuleEngine([check])
    skipped = Facts(stage=Stage.NOT_APPLICABLE)
    missing = Facts(stage=Stage.INSUFFICIENT_DATA)

    assert engine.decide([(check, skipped, {})]) == {"stage-check": (Status.NOT_APPLICABLE, "not-applicable")}
    assert engine.decide([(check, missing, {})]) == {"stage-check": (Status.INSUFFICIENT_DATA, "insufficient-data")}
    contradictory = Facts(stage=Stage.INCONSISTENT, reason="8 GPUs do not divide by tensor 3")
    assert engine.decide([(check, contradictory, {})]) == {"stage-check": (Status.FAIL, "inconsistent")}


def test_contradictory_inputs_fail_the_check_with_the_estimators_reason() -> None:
    submission = json.loads(EXAMPLE.read_text())
    model = submission["workload"]["training"]["model"]
    model["trainable_parameters"] = model["parameters"] * 2

    record = evaluate(submission)

    result = next(c for c in record["checks"] if c["id"] == "peak-memory")
    assert result["status"] == "fail" and result["rule"] == "inconsistent"
    assert "trainable_parameters" in result["message"] and "exceeds parameters" in result["message"]


def test_every_sharding_strategy_refused_reports_the_estimators_reason() -> None:
    # Given trainable parameters above the parameter count, no strategy can be sized at all,
    submission = json.loads(EXAMPLE.read_text())
    model = submission["workload"]["training"]["model"]
    model["trainable_parameters"] = model["parameters"] * 2

    record = evaluate(submission)

    # then sharding names the refusal instead of failing on an empty list of strategies.
    result = next(c for c in record["checks"] if c["id"] == "sharding")
    assert result["rule"] == "inconsistent" and "exceeds parameters" in result["message"]


def _raising_check(check_id: str, error: Exception) -> type[Check]:
    def gather(self, ctx: Context) -> Facts:
        raise error

    check = _check(check_id, Rule(Status.FAIL, "negative", lambda m: m.value < 0, ""))
    check.gather, check.thresholds = gather, {}
    return check


def test_an_estimators_refusal_is_reported_as_contradictory_inputs() -> None:
    check = _raising_check("refusing-check", InconsistentInput("tensor 3 does not divide 8 GPUs"))

    record = evaluate(json.loads(EXAMPLE.read_text()), engine=RuleEngine([check]))

    [result] = record["checks"]
    assert (result["status"], result["rule"]) == ("fail", "inconsistent")
    assert result["message"] == "the inputs contradict each other: tensor 3 does not divide 8 GPUs"


def test_any_other_value_error_while_gathering_is_an_engine_error_not_a_verdict() -> None:
    # A ValueError that no estimator raised as a refusal is a defect: it must not pass for bad input.
    check = _raising_check("buggy-check", ValueError("min() arg is an empty sequence"))

    with pytest.raises(EngineError, match="buggy-check.*min\\(\\) arg is an empty sequence"):
        evaluate(json.loads(EXAMPLE.read_text()), engine=RuleEngine([check]))


def test_concurrent_evaluations_do_not_mix_verdicts() -> None:
    submission = json.loads(EXAMPLE.read_text())
    expected = [c["status"] for c in evaluate(submission)["checks"]]
    seen: list[list[str]] = []

    def run() -> None:
        for _ in range(20):
            seen.append([c["status"] for c in evaluate(submission)["checks"]])

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(seen) == 80 and all(statuses == expected for statuses in seen)


def test_empty_or_all_skipped_plan_fails_closed() -> None:
    assert verdict_of([]) == "fail"
    assert verdict_of(["not-applicable", "insufficient-data"]) == "fail"
    assert verdict_of(["pass", "insufficient-data"]) == "incomplete"
    assert verdict_of(["pass", "warn", "not-applicable"]) == "warn"
    assert verdict_of(["pass", "fail"]) == "fail"


def test_ten_thousand_rule_evaluations_keep_resident_memory_flat() -> None:
    # durable_rules keeps every state it is not told to delete (MemoryError after a few thousand runs);
    # this posts the facts of every check 10,000 times. `make bench` does the same with whole evaluations.
    engine = default_engine()
    items = _gathered_facts(json.loads(EXAMPLE.read_text()))
    for _ in range(500):  # warm-up: caches, allocator arenas
        engine.decide(items)
    warm_kib = _rss_kib()
    for _ in range(10_000):
        engine.decide(items)
    after_kib = _rss_kib()

    assert after_kib <= warm_kib * 1.10, f"RSS grew from {warm_kib} KiB to {after_kib} KiB"


def _gathered_facts(submission: dict) -> list:
    from rules.job.inputs import Inputs
    from rules.policy import default_policy

    inputs, policy, shared = Inputs(submission), default_policy(), {}
    items = []
    for check in default_engine().checks:
        facts = check().gather(Context(inputs, policy, shared, check))
        items.append((check, facts, {name: policy.value(path) for name, path in check.thresholds.items()}))
    return items


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # pragma: no cover - non-Linux


def test_context_memo_shares_inputs_between_checks() -> None:
    from rules.job.inputs import Inputs
    from rules.policy import default_policy

    inputs = Inputs(json.loads(EXAMPLE.read_text()))
    shared: dict = {}
    first = Context(inputs, default_policy(), shared, _check("a-check"))
    second = Context(inputs, default_policy(), shared, _check("b-check"))
    runs = []

    def node_count(c: Context) -> float | None:
        runs.append(c)
        return c.value(c.job.cluster.node_groups[0].count)

    first.memo(node_count)
    # The fact is keyed by its function: a second check asking for it gets the value and its reads, not a new run
    value = second.memo(node_count)

    assert value == 16 and len(runs) == 1 and second.reader.pointers == ["/quote/node_groups/0/count"]
    assert first.memo(lambda c: 17) == 17  # another function is another fact


def test_a_memoised_fact_that_raises_keeps_nothing_and_counts_its_reads_only_when_asked() -> None:
    from rules.job.inputs import Inputs
    from rules.policy import default_policy

    # Given a fact that reads two inputs, notes a third missing, then refuses them
    def refused(c: Context) -> None:
        c.num("/quote/node_groups/0/count")
        c.need("/quote/node_groups/0/gpu/count")
        c.need("/workload/training/no_such_input")
        raise InconsistentInput("refused")

    inputs = Inputs(json.loads(EXAMPLE.read_text()))
    shared: dict = {}
    silent = Context(inputs, default_policy(), shared, _check("a-check"))
    counted = Context(inputs, default_policy(), shared, _check("b-check"))
    with pytest.raises(InconsistentInput):
        silent.memo(refused)
    # When it is asked again with reads_of_refusal, it is computed again (a raise keeps nothing)
    with pytest.raises(InconsistentInput):
        counted.memo(refused, reads_of_refusal=True)

    # Then only that caller counts what the fact read before it raised, as a direct read would have
    assert silent.reader.pointers == [] and silent.missing == []
    assert counted.reader.pointers == ["/quote/node_groups/0/count", "/quote/node_groups/0/gpu/count"]
    assert counted.missing == ["/workload/training/no_such_input"] and "refused" not in shared


@pytest.mark.parametrize(("value", "limit", "status"), [
    (1e-05, 0.0, Status.PASS), (5e-324, 0.0, Status.PASS), (1e16, 1e15, Status.PASS), (1e16, 1e17, Status.FAIL),
    (10**20, 10**21, Status.FAIL), (10**21, 10**20, Status.PASS), (1e-05, 1e-05, Status.PASS)])
def test_numbers_durable_cannot_parse_are_posted_in_a_form_it_compares_correctly(value, limit, status) -> None:
    # durable_rules 2.0.28 rejects "1e-05" (an exponent without a decimal point, error code 204) and wraps
    # integers beyond int64; the adapter rewrites both without changing any comparison.
    check = _check("number-check", Rule(Status.FAIL, "below", lambda m: m.value < m.limit, ""), passing="at-least")
    engine = RuleEngine([check])

    assert engine.decide([(check, _facts(value=value), {"limit": limit})])["number-check"][0] == status


def test_engines_built_from_many_threads_at_once_are_all_usable() -> None:
    check = _check("parallel-check", Rule(Status.FAIL, "negative", lambda m: m.value < 0, ""))
    engines: list[RuleEngine] = []
    errors: list[BaseException] = []

    def build() -> None:
        try:
            engines.append(RuleEngine([check]))
        except BaseException as error:  # noqa: BLE001 - collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=build) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors and len({e.ruleset for e in engines}) == 8
    assert all(e.decide([(check, _facts(value=1), {})]) == {"parallel-check": (Status.PASS, "ok")} for e in engines)


def test_numbers_json_cannot_carry_exactly_are_refused_by_pointer() -> None:
    # The submission digest is over RFC 8785 canonical JSON, which holds integers only within ±(2^53 - 1).
    from rules.errors import InvalidSubmission

    submission = json.loads(EXAMPLE.read_text())
    submission["quote"]["node_groups"][0]["count"] = 10**20

    with pytest.raises(InvalidSubmission) as raised:
        evaluate(submission)

    assert [p.pointer for p in raised.value.problems] == ["/quote/node_groups/0/count"]


def test_large_but_exact_inputs_fail_their_checks_instead_of_raising() -> None:
    submission = json.loads(EXAMPLE.read_text())
    submission["quote"]["node_groups"][0]["count"] = 2**50
    submission["workload"]["training"]["gpus"] = 2**53 - 1

    record = evaluate(submission)

    assert record["verdict"] in ("fail", "warn", "incomplete", "pass")

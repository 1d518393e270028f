"""The remediation search (rules/advice/remedies.py): every listed remedy, applied as a merge patch and evaluated,
gets the
verdict it states; the list is ranked by added cost, then days.

The figures are checked against evaluations of the patched submissions, never against literals the search made.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from rules.advice.compare import merge_patch
from rules.advice.remedies import remedy_id, search_remedies
from rules.advice.remedy_changes import apply_edits, diff_patch, patch_edits
from rules.evaluate import evaluate

ROOT = Path(__file__).parent.parent
FAILING = ROOT / "examples" / "fail-70b-ddp-one-rack.json"
PASSING = ROOT / "examples" / "dgx-h100-70b-finetune.json"
SHARDING = "/workload/training/parallelism/sharding"


def _document(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


@cache
def _failing() -> dict[str, Any]:
    return search_remedies(_document(FAILING))


def _short_window() -> dict[str, Any]:
    """The passing 16-node example with a 1.5-day window: 2.4 expected days miss it."""
    return merge_patch(_document(PASSING), {"workload": {"training": {"completion_window_days": 1.5}}})


@cache
def _short() -> dict[str, Any]:
    return search_remedies(_short_window())


def _modelled_short_window() -> dict[str, Any]:
    """The same example with no stated throughput and a 2-day window: at the modelled bf16 rate it misses it."""
    patch = {"workload": {"training": {"completion_window_days": 2, "throughput": None}}}
    return merge_patch(_document(PASSING), patch)


@cache
def _modelled_short() -> dict[str, Any]:
    return search_remedies(_modelled_short_window())


_DOCUMENTS = {"fail-70b-ddp-one-rack": lambda: _document(FAILING), "short-window": _short_window,
              "modelled-short-window": _modelled_short_window}


def _statuses(record: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in record["checks"]}


def _edited(remedy: dict[str, Any]) -> set[str]:
    return {pointer for pointer, _ in patch_edits(remedy["patch"])}


@pytest.mark.parametrize("result", [_failing, _short, _modelled_short], ids=list(_DOCUMENTS))
def test_each_listed_patch_applied_and_evaluated_gets_the_stated_verdict_and_days(result, request) -> None:
    found = result()
    document = _DOCUMENTS[request.node.callspec.id]()
    assert found["remedies"], found["note"]
    for remedy in [*found["remedies"], *found["partial"]]:
        # Given the remedy's patch applied to the submission (RFC 7396)
        record = evaluate(merge_patch(document, remedy["patch"]))
        # Then the evaluation says what the remedy says
        assert record["verdict"] == remedy["verdict"], remedy["changes"]
        timing = next(c for c in record["checks"] if c["id"] == "time-to-result")["evidence"]
        assert timing.get("days") == remedy["days"]
        remaining = {c["id"] for c in remedy["remaining"]}
        assert {i for i, s in _statuses(record).items() if s in ("fail", "warn")} == remaining
        assert remedy["id"] == remedy_id(remedy["patch"])
    # and every remedy makes every check pass
    assert all(r["verdict"] == "pass" and not r["remaining"] for r in found["remedies"])


def test_the_one_rack_example_has_remedies_by_sharding_and_by_racks_and_pdus() -> None:
    # Given DDP on 32 H100s in one rack whose 2N PDUs give 17.3 kW for 40.8 kW of nodes
    found = _failing()
    document = _document(FAILING)
    assert found["verdict"] == "fail"
    assert {p["id"] for p in found["problems"]} >= {"peak-memory", "sharding", "gradient-accumulation", "rack-power"}
    remedies = found["remedies"]

    # Then a remedy shards the model state (a workload change) ...
    sharded = [r for r in remedies if _edited(r) & {SHARDING} and
               merge_patch(document, r["patch"])["workload"]["training"]["parallelism"]["sharding"] in
               ("zero3", "fsdp-full")]
    assert sharded
    # ... and its only quote change spreads the nodes over more racks, or raises the PDUs
    racks = [r for r in sharded if {p for p in _edited(r) if p.startswith("/quote")} == {"/quote/racks"}]
    assert racks
    more_racks = [r for r in racks if sum(k["count"] for k in merge_patch(document, r["patch"])["quote"]["racks"]) > 1]
    larger_pdus = [r for r in racks if any(p["rating_kw"] > 21.6 for k in merge_patch(document, r["patch"])["quote"][
        "racks"] for p in k["pdus"])]
    assert more_racks and larger_pdus
    # ... each passes in full (asserted for every remedy above) and says in words what it changes
    assert all(any("racks like legacy-rack-7" in text for text in r["changes"]) for r in racks)


def test_no_workload_change_alone_passes_the_one_rack_example_because_rack_power_reads_the_quote_only() -> None:
    found = _failing()
    assert not [r for r in found["remedies"] if r["scope"] == "workload"]
    # The search shows how far the workload alone goes: everything but the racks' power
    workload = next(p for p in found["partial"] if p["scope"] == "workload")
    assert workload["remaining"] == [{"id": "rack-power", "status": "fail", "rule": "over-limit"}]
    assert any("zero3" in text or "fsdp-full" in text or "layout search" in text for text in workload["changes"])
    assert not {p for p, _ in patch_edits(workload["patch"]) if p.startswith("/quote")}


def test_the_list_is_ranked_by_added_cost_with_unpriced_changes_last_then_by_days() -> None:
    for found in (_failing(), _short()):
        ranks = [(r["added_cost"] is None, r["added_cost"] if r["added_cost"] is not None else r["priced_cost"],
                  r["days"]) for r in found["remedies"]]
        assert ranks == sorted(ranks)
    # The one-rack example's remedies all place nodes in racks the quote does not price: said, not guessed
    assert all(r["added_cost"] is None and r["unpriced"] for r in _failing()["remedies"])
    assert _failing()["cost_basis"] in ("cost_per_run", "quote_total")
    assert _failing()["ranked_by"].startswith("added ")


def test_more_nodes_are_priced_at_the_groups_unit_price() -> None:
    # Given the 16-node example whose window is cut to 1.5 days (it needs 208 GPUs)
    found = _short()
    document = _short_window()
    priced = [r for r in found["remedies"] if r["added_cost"] is not None]
    assert priced
    best = found["remedies"][0]
    assert best is priced[0]
    # Then the cheapest passing remedy quotes more nodes, each at the quote's per-node price
    nodes = merge_patch(document, best["patch"])["quote"]["node_groups"][0]["count"]
    if found["cost_basis"] == "quote_total":
        assert best["added_cost"] == (nodes - 16) * document["quote"]["node_groups"][0]["unit_price"]
    # and the racks place them all (rack-power passes on the patched submission: asserted above for every remedy)
    racks = merge_patch(document, best["patch"])["quote"]["racks"]
    assert sum(r["count"] * r["node_groups"]["gpu"] for r in racks) == nodes
    # and the server line of the quote ("DGX H100 system", 16 at 289,000) counts them too, so the quote still adds up
    # (time-to-result's quote-arithmetic) and its total grows by the added cost
    lines = merge_patch(document, best["patch"])["quote"]["line_items"]
    assert [line["quantity"] for line in lines] == [nodes, 8]


def test_a_passing_submission_has_nothing_to_remedy() -> None:
    found = search_remedies(_document(PASSING))
    assert found["remedies"] == [] and found["evaluations"] == 0 and found["verdict"] == "pass"
    assert found["note"].startswith("every check passes")


def test_the_search_keeps_within_its_policy_budget() -> None:
    found = _failing()
    assert 0 < found["evaluations"] <= found["max_evaluations"]
    progress: list[tuple[int, int]] = []
    search_remedies(_document(FAILING), on_progress=lambda done, total: progress.append((done, total)))
    assert progress[-1][0] == progress[-1][1] == found["max_evaluations"]
    assert [done for done, _ in progress] == sorted(done for done, _ in progress)


def test_the_diff_patch_of_a_changed_copy_turns_the_original_into_it() -> None:
    original = _document(FAILING)
    changed = apply_edits(original, (("/quote/racks/0/count", 4), ("/quote/node_groups/0/unit_price", None),
                                     ("/workload/training/parallelism/sharding", "zero3"),
                                     ("/quote/storage/write_gbs", 12.5)))
    patch = diff_patch(original, changed)
    assert merge_patch(original, patch) == changed
    assert patch["quote"]["node_groups"][0].get("unit_price", "absent") == "absent"  # arrays carried whole
    assert patch["workload"] == {"training": {"parallelism": {"sharding": "zero3"}}}
    assert original == _document(FAILING)  # neither input is changed
    untouched = copy.deepcopy(original)
    assert diff_patch(original, untouched) == {}


def _small_budget_policy(evaluations: int):
    from rules.policy import parse_policy

    document = json.loads((ROOT / "rules" / "data" / "policy.default.json").read_text())
    document["remedies"]["max_evaluations"] = evaluations
    return parse_policy(json.dumps(document).encode(), "test: small remedies budget")


def test_every_fixture_and_example_can_be_searched_and_each_remedy_gets_its_verdict() -> None:
    # The changes are proposed from whatever evidence a check gives: every fixture of every rule, with a small
    # budget, is searched without an error, and what is listed is what the evaluation of the patch says.
    from tests.checks.fixture_support import fixture_paths, load_fixture

    policy = _small_budget_policy(4)
    documents = [load_fixture(path) for path in fixture_paths()]
    documents += [_document(path) for path in sorted((ROOT / "examples").glob("*.json"))]
    found = 0
    for document in documents:
        result = search_remedies(document, policy)
        assert result["evaluations"] <= 4
        for remedy in [*result["remedies"], *result["partial"]]:
            assert evaluate(merge_patch(document, remedy["patch"]), policy)["verdict"] == remedy["verdict"]
        found += len(result["remedies"])
    assert found >= 20  # rack, storage, host RAM, sharding, interval, node count and layout remedies among them


def test_with_cost_per_run_in_the_evidence_the_added_cost_is_its_difference() -> None:
    # Given evaluations whose time-to-result evidence carries a full cost per run (the cost model's figure)
    from rules.advice.remedies import COST_PER_RUN, Trial, _remedy
    from rules.advice.remedy_changes import WORKLOAD, Change

    def record(cost: float | None, sharding: str) -> dict[str, Any]:
        evidence = {"days": 2.0, **({COST_PER_RUN: cost} if cost is not None else {})}
        return {"verdict": "pass", "summary": {}, "checks": [
            {"id": "time-to-result", "status": "pass", "rule": "within-window", "evidence": evidence},
            {"id": "sharding", "status": "fail" if sharding == "ddp" else "pass", "rule": "x", "evidence": {}}]}

    base_document = {"workload": {"training": {"parallelism": {"sharding": "ddp"}}}}
    change = Change("sharding=zero3", WORKLOAD, "shard with zero3", (("/workload/training/parallelism/sharding",
                                                                      "zero3"),), ("sharding",))
    base = Trial((), base_document, record(1000.0, "ddp"))
    document = apply_edits(base_document, change.edits)

    # When a workload change makes the run cheaper per run
    remedy = _remedy(Trial((change,), document, record(800.0, "zero3")), base, COST_PER_RUN)

    # Then its added cost is the change in cost per run (negative: it saves), though it adds nothing to the quote
    assert remedy["added_cost"] == -200.0 and remedy["priced_cost"] == 0.0 and remedy["fixes"] == ["sharding"]
    # and an evaluation without the figure leaves the cost unknown, saying why
    unknown = _remedy(Trial((change,), document, record(None, "zero3")), base, COST_PER_RUN)
    assert unknown["added_cost"] is None and unknown["unpriced"] == ["its evaluation gives no cost_per_run"]


PRECISION = "/workload/training/precision"


def test_a_modelled_16_bit_schedule_that_misses_is_offered_fp8_as_a_numerics_decision_ranked_after_more_nodes():
    # Given the 16-node H100 example at the modelled bf16 rate with a 2-day window (time-to-result fails)
    found = _modelled_short()
    assert {p["id"]: p["rule"] for p in found["problems"]} == {"time-to-result": "misses-window"}
    fp8 = [r for r in found["remedies"] if PRECISION in _edited(r)]
    others = [r for r in found["remedies"] if PRECISION not in _edited(r)]
    # Then one remedy switches the GEMMs to fp8 and nothing else, saying it is a numerics decision
    assert [r["patch"] for r in fp8] == [{"workload": {"training": {"precision": "fp8-mixed"}}}]
    assert "numerics decision" in fp8[0]["changes"][0]
    assert [d.split(":")[0] for d in fp8[0]["decisions"]] == ["numerics"]
    assert all(not r["decisions"] for r in others)
    # and it ranks after the remedies that leave the numerics alone, though it adds nothing to the quote (the
    # example is priced in EUR, its full cost per run told in EUR: the ranking basis is the cost per run, which the
    # shorter fp8 run lowers)
    assert found["cost_basis"] == "cost_per_run"
    assert others and fp8[0]["priced_cost"] == 0 < min(r["priced_cost"] for r in others)
    assert fp8[0]["added_cost"] < 0
    assert found["remedies"].index(fp8[0]) > max(found["remedies"].index(r) for r in others)


def test_no_precision_change_for_a_stated_throughput_or_a_gpu_without_fp8():
    # A stated throughput was measured at its own precision: fp8 would not change the days the check reads
    assert not [r for r in [*_short()["remedies"], *_short()["partial"]] if PRECISION in _edited(r)]
    # An A100 has no FP8 Tensor Cores (catalogue fp8_tflops null)
    a100 = merge_patch(_modelled_short_window(), {"quote": {"node_groups": [
        {**_document(PASSING)["quote"]["node_groups"][0], "server_model": "DGX-A100",
         "gpu": {"model": "A100-SXM4-80GB", "count": 8}}]}})
    found = search_remedies(a100)
    assert found["problems"]
    assert not [r for r in [*found["remedies"], *found["partial"]] if PRECISION in _edited(r)]


def test_a_run_that_needs_most_of_its_window_is_offered_more_nodes_of_the_quoted_kind_priced_that_pass():
    # Given the 16-node example (2.37 days at its stated MFU) with a 2.5-day window: 95 % of it, above the policy's
    # 85 %, so time-to-result warns little-slack and nothing else fails or warns
    document = merge_patch(_document(PASSING), {"workload": {"training": {"completion_window_days": 2.5}}})
    found = search_remedies(document)
    assert found["problems"] == [{"id": "time-to-result", "status": "warn", "rule": "little-slack"}]
    # Then a remedy quotes more nodes of the quoted kind. 18 nodes (144 GPUs) would bring the run under 85 % but the
    # global batch of 256 does not split over 144 data-parallel ranks, so the next count where it does, 32, is offered
    nodes = [r for r in found["remedies"] if "/quote/node_groups" in _edited(r)]  # arrays are carried whole
    assert nodes, found["note"]
    patched = merge_patch(document, nodes[0]["patch"])
    group = patched["quote"]["node_groups"][0]
    assert group["server_model"] == "DGX-H100" and group["count"] == 32
    assert patched["workload"]["training"]["global_batch"] % (group["count"] * 8) == 0
    # priced at the group's unit price, and it passes when applied
    assert nodes[0]["priced_cost"] == (32 - 16) * 289000
    record = evaluate(patched)
    # ranked by what it adds to the full cost per run (in the quote's EUR): the patched run's less the original's
    assert found["cost_basis"] == "cost_per_run"
    cost_per_run = [next(c for c in r["checks"] if c["id"] == "time-to-result")["evidence"]["cost_per_run"]
                    for r in (evaluate(document), record)]
    assert nodes[0]["added_cost"] == pytest.approx(cost_per_run[1] - cost_per_run[0])
    assert record["verdict"] == nodes[0]["verdict"] == "pass"


def test_full_recompute_is_not_free_a_stated_mfu_is_scaled_by_the_work_per_token_it_adds():
    from rules.advice.remedy_changes import apply_edits, situation
    from rules.advice.remedy_workload import recompute_change
    from rules.catalogue import load_catalogue
    from rules.policy import default_policy
    from tests.checks.fixture_support import fixture_paths, load_fixture

    # Given Llama-2-7B (6,738,415,616 parameters, 32 layers, hidden 4,096) at sequence 4,096 with selective recompute
    # and a stated MFU of 0.40, whose micro-batch 16 does not fit
    path = next(p for p in fixture_paths() if p.name == "fail_dgx_h100_llama2_7b_micro_batch_16_does_not_fit.json")
    document = load_fixture(path)
    record = evaluate(document)
    [change] = recompute_change(situation(document, record, default_policy(), load_catalogue()))
    # Then full recompute keeps the GPUs' hardware rate and does the recomputed forward too: per token
    # 6N + 16·L·s·h = 49.02 GFLOP with selective recompute, 8N + 16·L·s·h = 62.50 with full (Narayanan et al. eq. 3)
    n, attention = 6738415616, 16 * 32 * 4096 * 4096
    assert dict(change.edits) == {"/workload/training/activation_checkpointing": "full",
                                  "/workload/training/throughput/mfu": pytest.approx(
                                      0.40 * (6 * n + attention) / (8 * n + attention), rel=1e-12)}
    assert "the stated mfu 0.4 becomes 0.3137" in change.text
    # and the changed submission trains fewer tokens per second by the same ratio (its days are what the remedy costs)
    rate = {name: next(c for c in doc["checks"] if c["id"] == "interconnect-scaling")["evidence"]
            ["tokens_per_s_per_gpu"]
            for name, doc in (("before", record), ("after", evaluate(apply_edits(document, change.edits))))}
    assert rate["after"] / rate["before"] == pytest.approx((6 * n + attention) / (8 * n + attention), rel=1e-9)

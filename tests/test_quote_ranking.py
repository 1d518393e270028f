"""The decision of a comparison of quotes (rules/advice/quote_ranking.py): who is ranked, in what order, the soonest
and the cheapest that pass; and a stated throughput kept by the comparison (rules/advice/compare_quotes.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rules.advice.compare_quotes import compare_quotes, quote_row, quotes_key
from rules.advice.quote_ranking import NOTHING_DECIDED, decide, decision
from rules.policy import default_policy

EXAMPLE = Path(__file__).parents[1] / "examples" / "dgx-h100-70b-finetune.json"
PASS = [{"id": "peak-memory", "status": "pass", "message": "fits"}]


def _check(check_id: str, status: str, message: str = "") -> dict[str, Any]:
    return {"id": check_id, "status": status, "message": message or f"{check_id} is {status}"}


def _row(name: str, checks: list[dict[str, Any]], waived: tuple[str, ...] = (), *, days_p50: float | None = 10.0,
         days_p90: float | None = 12.0, quote_total: float | None = 1e6, cost_per_run: float | None = 5e4,
         currency: str | None = "USD") -> dict[str, Any]:
    return {"name": name, "vendor": f"Vendor {name}", "quote_id": name.upper(), "days": days_p50,
            "days_p50": days_p50, "days_p90": days_p90, "quote_total": quote_total, "cost_per_run": cost_per_run,
            "cost_per_million_tokens": None, "currency": currency, **decision(checks, waived)}


def test_a_failed_check_stops_a_quote_and_is_named_with_its_message():
    result = decision([_check("peak-memory", "fail", "needs 90 GiB per GPU, 72 usable"), _check("rack-power", "pass")],
                      ())

    assert result["passes"] is False and result["verdict_after_waivers"] == "fail"
    assert result["stopped_by"] == [{"id": "peak-memory", "status": "fail",
                                     "message": "needs 90 GiB per GPU, 72 usable"}]


def test_insufficient_data_stops_a_quote_as_a_failure_does():
    result = decision([_check("time-to-result", "insufficient-data"), _check("peak-memory", "pass")], ())

    assert result["passes"] is False and result["verdict_after_waivers"] == "incomplete"
    assert [stop["id"] for stop in result["stopped_by"]] == ["time-to-result"]


def test_a_quote_whose_every_failure_is_waived_passes_and_names_the_waived_checks():
    checks = [_check("rack-power", "fail"), _check("time-to-result", "insufficient-data"), _check("sharding", "warn")]

    result = decision(checks, {"rack-power", "time-to-result"})

    assert result["passes"] is True and result["stopped_by"] == []
    assert result["waived_checks"] == ["rack-power", "time-to-result"]
    assert result["verdict_after_waivers"] == "warn"  # a warning does not stop a quote


def test_a_waiver_of_one_check_does_not_cover_another():
    result = decision([_check("rack-power", "fail"), _check("peak-memory", "fail")], {"rack-power"})

    assert result["passes"] is False and [stop["id"] for stop in result["stopped_by"]] == ["peak-memory"]


def test_an_evaluation_that_decides_nothing_stops_its_quote():
    result = decision([_check("time-to-result", "not-applicable")], ())

    assert result["passes"] is False and result["stopped_by"][0]["message"] == NOTHING_DECIDED


def test_only_passing_quotes_are_ranked_soonest_first_and_the_others_are_listed_apart():
    rows = [_row("slow", [_check("a", "pass")], days_p50=20.0, days_p90=25.0),
            _row("failing", [_check("a", "fail")], days_p50=1.0, days_p90=2.0),
            _row("fast", [_check("a", "fail")], ("a",), days_p50=5.0, days_p90=6.0)]

    result = decide(rows)

    assert [(row["name"], row["rank"]) for row in result["passing"]] == [("fast", 1), ("slow", 2)]
    assert [(row["name"], row["rank"]) for row in result["not_ranked"]] == [("failing", None)]
    assert result["soonest"]["name"] == "fast" and result["soonest"]["days_p50"] == 5.0


def test_cheapest_that_passes_is_the_lowest_cost_per_run_not_the_lowest_total():
    rows = [_row("dear-to-run", PASS, quote_total=1e6, cost_per_run=9e4),
            _row("cheap-to-run", PASS, quote_total=2e6, cost_per_run=3e4, days_p50=11.0),
            _row("cheapest-but-failing", [_check("a", "fail")], cost_per_run=1e3)]

    result = decide(rows)

    assert result["soonest"]["name"] == "dear-to-run"
    assert result["cheapest"]["name"] == "cheap-to-run" and result["cheapest"]["cost_per_run"] == 3e4
    assert result["cheapest_note"] is None and result["cheapest_by"] == ["cost_per_run", "rank"]


def test_equal_cost_per_run_goes_to_the_sooner_quote():
    rows = [_row("later", PASS, days_p50=12.0, cost_per_run=4e4), _row("sooner", PASS, days_p50=8.0, cost_per_run=4e4)]

    assert decide(rows)["cheapest"]["name"] == "sooner"


def test_costs_in_different_currencies_name_no_cheapest_and_say_why():
    rows = [_row("dollars", PASS, cost_per_run=4e4, currency="USD"),
            _row("euros", PASS, cost_per_run=3e4, currency="EUR")]

    result = decide(rows)

    assert result["cheapest"] is None and "different currencies (EUR, USD)" in result["cheapest_note"]


def test_no_passing_quote_names_neither_soonest_nor_cheapest():
    result = decide([_row("failing", [_check("a", "fail")])])

    assert result["passing"] == [] and result["soonest"] is None and result["cheapest"] is None
    assert result["cheapest_note"] == "no quote passes its checks"


def test_a_passing_quote_without_days_ranks_last_and_is_not_the_soonest():
    rows = [_row("unknown", PASS, days_p50=None, days_p90=None)]

    result = decide(rows)

    assert result["passing"][0]["rank"] == 1 and result["soonest"] is None


def test_a_stated_throughput_is_kept_so_the_quote_is_compared_at_its_own_layout():
    # Given the DGX H100 example, which states its MFU (0.38) for its FSDP layout
    document = json.loads(EXAMPLE.read_text())
    assert document["workload"]["training"]["throughput"] == {"mfu": 0.38}

    # When it is compared
    row = quote_row("q", document, default_policy())

    # Then its stated rate decides its days, at the layout it was stated for
    assert row["layout"] == "submitted" and row["best_layout"] is None and row["throughput_from"] == "mfu"
    assert "states its training throughput (mfu)" in row["submitted_vs_best"]
    assert row["assumed_layout"]["sharding"] == "fsdp-full" and row["assumed_layout"]["tensor"] == 1
    # and without the stated rate the search's best layout runs at the modelled rate
    del document["workload"]["training"]["throughput"]
    modelled = quote_row("q", document, default_policy())
    assert modelled["layout"] == "best" and modelled["throughput_from"] == "modelled"
    assert modelled["assumed_layout"] == modelled["best_layout"]


def test_waivers_are_part_of_what_identifies_a_comparison():
    document = json.loads(EXAMPLE.read_text())
    quotes = [("a", document), ("b", document)]

    assert quotes_key(quotes, "1", "sha256:x") != quotes_key(quotes, "1", "sha256:x", {"a": ["rack-power"]})
    result = compare_quotes(quotes, waived={"a": ["rack-power"]})
    assert result["waived"] == {"a": ["rack-power"], "b": []}
    assert result["key"] == quotes_key(quotes, result["engine_version"], result["policy"]["digest"],
                                       {"a": ["rack-power"]})

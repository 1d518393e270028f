"""The cost figures in the record: time-to-result's full cost and rented run, inference-capacity's serving cost.

Each figure is checked against a hand calculation from the default policy's rates (rules/data/policy.default.json:
5-year amortisation, 0.0806 per kWh, PUE 1.56, 184.06 per kW-month, support 12 % a year, H100 on-demand 12.29
per GPU-hour) and the quoted hardware (DGX H100: 10.2 kW nameplate maximum, 8 GPUs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fixture_support import load_fixture

from rules.advice.compare import merge_patch
from rules.evaluate import evaluate
from rules.policy import parse_policy

ROOT = Path(__file__).resolve().parents[2]
# 2 DGX H100 at 289,000, Llama 2 7B ZeRO-1 on 16 GPUs: 0.51 days expected (a fixture that passes).
FIXTURE = ROOT / "tests/checks/time_to_result/pass_2x_dgx_h100_llama2_7b_finetune_6b_tokens.json"
USD = {"quote": {"currency": "USD"}}
DAYS_PER_MONTH = 365 / 12


def _check(document: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in evaluate(document)["checks"] if c["id"] == check_id)


def _timing(patch: dict[str, Any]) -> dict[str, Any]:
    return _check(merge_patch(load_fixture(FIXTURE), patch), "time-to-result")


def test_cost_components_of_two_dgx_h100_by_hand():
    result = _timing(USD)
    e = result["evidence"]
    days = e["run_days"]

    assert e["quote_total"] == 578_000 and e["power_kw"] == pytest.approx(20.4)
    assert e["cost_capital"] == pytest.approx(578_000 * days / (5 * 365))
    assert e["energy_kwh"] == pytest.approx(20.4 * 1.56 * 24 * days)
    assert e["cost_power"] == pytest.approx(20.4 * 1.56 * 0.0806 * 24 * days)
    assert e["cost_facility"] == pytest.approx(20.4 * 184.06 * days / DAYS_PER_MONTH)
    assert e["cost_support"] == pytest.approx(578_000 * 0.12 * days / 365)
    parts = e["cost_capital"] + e["cost_power"] + e["cost_facility"] + e["cost_support"]
    assert e["cost_per_run"] == pytest.approx(parts)
    assert e["cost_per_day"] == pytest.approx(parts / days)
    assert e["cost_per_million_tokens"] == pytest.approx(parts / 6_000)  # 6e9 tokens
    assert "full cost per run USD " in result["message"] and "capital only" not in result["message"]


def test_rent_instead_names_the_break_even_utilisation():
    e = _timing(USD)["evidence"]
    days = e["run_days"]

    assert e["rent_gpu_model"] == "H100-SXM5-80GB"
    assert e["rent_cost_per_run"]["on_demand"] == pytest.approx(16 * days * 24 * 12.29)
    assert e["rent_cost_per_run"]["reserved"] == pytest.approx(16 * days * 24 * 4.916)
    assert e["rent_cost_per_run"]["spot"] == pytest.approx(16 * e["rent_spot_days"] * 24 * 2.25)
    assert e["rent_spot_days"] >= days
    # owned per GPU-hour at full use: cost per day / (16 GPUs × 24 h); break-even against on-demand
    assert e["cost_per_gpu_hour"] == pytest.approx(e["cost_per_day"] / (16 * 24))
    assert e["break_even_utilisation"] == pytest.approx(e["cost_per_gpu_hour"] / 12.29)


def test_doubling_the_nodes_holds_the_cost_per_run_as_the_time_about_halves():
    # Given the same run on 4 nodes instead of 2 (the quote doubles: capital and power)
    two = _timing(USD)["evidence"]
    four = _timing({"quote": {"currency": "USD", "node_groups": [
        {"name": "gpu", "count": 4, "server_model": "DGX-H100", "unit_price": 289_000}]},
        "workload": {"training": {"gpus": 32}}})["evidence"]

    # Then the cost per day doubles (it used to rise four-fold: total / days) ...
    assert four["cost_per_day"] == pytest.approx(2 * two["cost_per_day"])
    # ... and the cost per run moves only as far as the time misses halving exactly
    time_ratio = four["run_days"] / (two["run_days"] / 2)
    assert four["cost_per_run"] / two["cost_per_run"] == pytest.approx(time_ratio)
    assert time_ratio == pytest.approx(1, abs=0.05)


def test_a_quote_in_another_currency_is_not_compared():
    result = _timing({})  # the base quote is in EUR, the policy in USD
    e = result["evidence"]

    assert e["cost_comparable"] is False and e["cost_per_run"] is None and e["break_even_utilisation"] is None
    assert "priced in EUR and the policy's rates in USD" in result["message"]
    assert "no currency is converted" in result["message"]
    # the rented run is in the policy's currency and still shown
    assert e["rent_cost_per_run"]["on_demand"] == pytest.approx(16 * e["run_days"] * 24 * 12.29)


def test_not_shared_means_no_queue_wait():
    e = _timing(USD)["evidence"]
    assert e["queue_wait_days"] == 0 and e["queue_basis"] == "not shared" and e["days"] == e["run_days"]


def test_serving_cost_per_million_tokens_of_the_l40s_example_by_hand():
    # examples/l40s-8b-serving.json priced in USD: 2 servers at 98,500 + 2 PDUs at 2,400 = 201,800; 2 × 5 kW
    document = merge_patch(json.loads((ROOT / "examples/l40s-8b-serving.json").read_text()), USD)
    e = _check(document, "inference-capacity")["evidence"]

    per_day = (201_800 / (5 * 365) + 10 * 1.56 * 0.0806 * 24 + 10 * 184.06 / DAYS_PER_MONTH
               + 201_800 * 0.12 / 365)
    assert e["serving_cost_basis"] == "the whole quote"
    assert e["serving_cost_per_day"] == pytest.approx(per_day)
    # 6 rps × 256 output tokens × 86,400 s a day
    assert e["served_tokens_per_day"] == pytest.approx(6 * 256 * 86_400)
    assert e["cost_per_million_tokens_served"] == pytest.approx(per_day / (6 * 256 * 86_400 / 1e6))


def test_a_policy_may_charge_the_facility_per_rack_month():
    # Given a policy charging 2,500 per rack-month and the one-rack example (USD)
    policy_document = json.loads((ROOT / "rules/data/policy.default.json").read_text())
    policy_document["cost"]["facility_basis"] = "rack_month"
    policy_document["cost"]["facility_per_rack_month"]["value"] = 2_500
    policy = parse_policy(json.dumps(policy_document).encode(), "test:rack-month")
    document = json.loads((ROOT / "examples/fail-70b-ddp-one-rack.json").read_text())

    e = next(c for c in evaluate(document, policy)["checks"] if c["id"] == "time-to-result")["evidence"]

    # Then the facility is 1 rack × 2,500 × run days / (365 / 12)
    assert e["facility_basis"] == "rack_month"
    assert e["cost_facility"] == pytest.approx(2_500 * e["run_days"] / DAYS_PER_MONTH)

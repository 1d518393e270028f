"""The cost figures in the record: time-to-result's full cost and rented run, inference-capacity's serving cost.

Each figure is checked against a hand calculation from the default policy's cited rates (rules/data/
policy.default.json: 5-year amortisation, USD 0.0806 per kWh, PUE 1.56, USD 184.06 per kW-month, support 12 % a
year, H100 on-demand USD 12.29 per GPU-hour), the quoted hardware (DGX H100: 10.2 kW nameplate maximum, 8 GPUs),
the typical sustained draw of an H100 node under training, 76 % of its 10.2 kW rating (Newkirk et al.,
arXiv:2506.14551, 2025), and, for a quote in euros, the ECB's euro reference rate of 14 March 2025,
1 EUR = 1.0889 USD.
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
SUSTAINED = 0.76  # Newkirk et al. 2025: H100 HGX nodes under computationally intensive training, 76 % of 10.2 kW
USD_PER_EUR = 1.0889  # ECB euro foreign exchange reference rate, 14 March 2025


def _check(document: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in evaluate(document)["checks"] if c["id"] == check_id)


def _timing(patch: dict[str, Any]) -> dict[str, Any]:
    return _check(merge_patch(load_fixture(FIXTURE), patch), "time-to-result")


def test_cost_components_of_two_dgx_h100_by_hand():
    result = _timing(USD)
    e = result["evidence"]
    days = e["run_days"]
    # 2 nodes × 10.2 kW nameplate, drawing 76 % of it under training: 15.504 kW
    kw = 2 * 10.2 * SUSTAINED

    assert e["quote_total"] == 578_000 and e["power_nameplate_kw"] == pytest.approx(20.4)
    assert e["power_kw"] == pytest.approx(15.504) == pytest.approx(kw)
    assert e["power_basis"] == "typical sustained share of nameplate" and e["sustained_power_fraction"] == SUSTAINED
    assert e["cost_capital"] == pytest.approx(578_000 * days / (5 * 365))
    assert e["energy_kwh"] == pytest.approx(kw * 1.56 * 24 * days)
    assert e["cost_power"] == pytest.approx(kw * 1.56 * 0.0806 * 24 * days)
    assert e["cost_facility"] == pytest.approx(kw * 184.06 * days / DAYS_PER_MONTH)
    assert e["cost_support"] == pytest.approx(578_000 * 0.12 * days / 365)
    parts = e["cost_capital"] + e["cost_power"] + e["cost_facility"] + e["cost_support"]
    assert e["cost_per_run"] == pytest.approx(parts)
    assert e["cost_per_day"] == pytest.approx(parts / days)
    assert e["cost_per_million_tokens"] == pytest.approx(parts / 6_000)  # 6e9 tokens
    assert e["cost_currency"] == e["cost_rates_currency"] == "USD" and e["exchange_rate"] is None
    assert "full cost per run USD " in result["message"] and "capital only" not in result["message"]


def test_a_measured_sustained_draw_replaces_the_typical_share():
    # Given 7.8 kW measured per node under training (measurements.power)
    e = _timing({**USD, "measurements": {"power": {"sustained_w_per_node": 7_800}}})["evidence"]

    # Then the power is charged on the measured draw, not on a share of the nameplate
    assert e["power_basis"] == "measured sustained draw" and e["sustained_power_fraction"] is None
    assert e["power_kw"] == pytest.approx(2 * 7.8)
    assert e["cost_power"] == pytest.approx(2 * 7.8 * 1.56 * 0.0806 * 24 * e["run_days"])


def test_without_a_sustained_share_the_nameplate_maximum_is_charged():
    policy_document = json.loads((ROOT / "rules/data/policy.default.json").read_text())
    policy_document["cost"]["sustained_power_fraction"]["value"] = None
    policy = parse_policy(json.dumps(policy_document).encode(), "test:nameplate")

    e = next(c for c in evaluate(merge_patch(load_fixture(FIXTURE), USD), policy)["checks"]
             if c["id"] == "time-to-result")["evidence"]

    assert e["power_basis"] == "nameplate maximum" and e["power_kw"] == pytest.approx(20.4)


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


def test_a_quote_in_euros_is_costed_in_euros_at_the_ecb_reference_rate():
    result = _timing({})  # the base quote is in EUR, the policy's rates in USD
    e = result["evidence"]
    days, kw = e["run_days"], 2 * 10.2 * SUSTAINED
    # The policy's rates in euros at 1.0889 USD per EUR: USD 0.0806/kWh is EUR 0.07402/kWh, USD 184.06 per
    # kW-month is EUR 169.03, the H100's USD 12.29 per GPU-hour on demand is EUR 11.287
    assert 0.0806 / USD_PER_EUR == pytest.approx(0.074019, abs=1e-6)
    assert 184.06 / USD_PER_EUR == pytest.approx(169.033, abs=1e-3)
    assert 12.29 / USD_PER_EUR == pytest.approx(11.2866, abs=1e-4)

    # Then every cost figure is in the quote's EUR, and the record says which rate of which day converted what
    assert e["cost_currency"] == "EUR" and e["cost_rates_currency"] == "USD" and e["cost_comparable"] is True
    assert (e["exchange_rate"], e["exchange_rate_unit"], e["exchange_rate_as_of"]) == (
        USD_PER_EUR, "USD per EUR", "2025-03-14")
    assert "European Central Bank" in e["exchange_rate_source"]
    assert set(e["exchange_rate_converts"]) == {"cost_power", "cost_facility", "electricity_per_kwh",
                                                "rent_cost_per_run"}
    # the quote's own amounts need no rate: EUR 578,000 amortised, and its support
    assert e["cost_capital"] == pytest.approx(578_000 * days / (5 * 365))
    assert e["cost_support"] == pytest.approx(578_000 * 0.12 * days / 365)
    # the policy's rates converted
    assert e["electricity_per_kwh"] == pytest.approx(0.0806 / USD_PER_EUR)
    assert e["cost_power"] == pytest.approx(kw * 1.56 * 24 * days * 0.0806 / USD_PER_EUR)
    assert e["cost_facility"] == pytest.approx(kw * 184.06 / USD_PER_EUR * days / DAYS_PER_MONTH)
    assert e["cost_per_run"] == pytest.approx(e["cost_capital"] + e["cost_power"] + e["cost_facility"]
                                              + e["cost_support"])
    assert e["rent_cost_per_run"]["on_demand"] == pytest.approx(16 * days * 24 * 12.29 / USD_PER_EUR)
    assert e["break_even_utilisation"] == pytest.approx(e["cost_per_gpu_hour"] / (12.29 / USD_PER_EUR))
    assert "full cost per run EUR " in result["message"] and "1.0889 USD per EUR" in result["message"]


def test_without_a_rate_for_its_currency_a_quote_keeps_its_capital_and_support_and_says_why_the_rest_is_missing():
    # Given a policy with no reference rate for the euro
    policy_document = json.loads((ROOT / "rules/data/policy.default.json").read_text())
    policy_document["cost"]["exchange_rates"] = {}
    policy = parse_policy(json.dumps(policy_document).encode(), "test:no-rates")

    result = next(c for c in evaluate(load_fixture(FIXTURE), policy)["checks"] if c["id"] == "time-to-result")
    e = result["evidence"]
    days = e["run_days"]

    # Then capital and support are still costed, in the quote's EUR ...
    assert e["cost_currency"] == "EUR" and e["exchange_rate"] is None
    assert e["cost_capital"] == pytest.approx(578_000 * days / (5 * 365))
    assert e["cost_support"] == pytest.approx(578_000 * 0.12 * days / 365)
    # ... while power, facility, the full cost and the rented run are left out, saying why
    assert e["cost_power"] is e["cost_facility"] is e["cost_per_run"] is e["break_even_utilisation"] is None
    assert e["cost_comparable"] is False and all(v is None for v in e["rent_cost_per_run"].values())
    assert "no USD per EUR reference rate" in e["cost_problem"]
    assert "no USD per EUR reference rate" in result["message"] and "capital EUR " in result["message"]


def test_not_shared_means_no_queue_wait():
    e = _timing(USD)["evidence"]
    assert e["queue_wait_days"] == 0 and e["queue_basis"] == "not shared" and e["days"] == e["run_days"]


def test_serving_cost_per_million_tokens_of_the_l40s_example_by_hand():
    # examples/l40s-8b-serving.json priced in USD: 2 servers at 98,500 + 2 PDUs at 2,400 = 201,800; 2 × 5 kW
    # nameplate, drawing the typical 76 % of it
    document = merge_patch(json.loads((ROOT / "examples/l40s-8b-serving.json").read_text()), USD)
    e = _check(document, "inference-capacity")["evidence"]

    kw = 10 * SUSTAINED
    per_day = (201_800 / (5 * 365) + kw * 1.56 * 0.0806 * 24 + kw * 184.06 / DAYS_PER_MONTH
               + 201_800 * 0.12 / 365)
    assert e["serving_cost_basis"] == "the whole quote"
    assert e["serving_cost_per_day"] == pytest.approx(per_day)
    # 6 rps × 256 output tokens × 86,400 s a day
    assert e["served_tokens_per_day"] == pytest.approx(6 * 256 * 86_400)
    assert e["cost_per_million_tokens_served"] == pytest.approx(per_day / (6 * 256 * 86_400 / 1e6))


def test_the_l40s_example_in_euros_is_served_at_a_cost_in_euros():
    e = _check(json.loads((ROOT / "examples/l40s-8b-serving.json").read_text()), "inference-capacity")["evidence"]

    kw = 10 * SUSTAINED
    per_day = (201_800 / (5 * 365) + kw * 1.56 * 24 * 0.0806 / USD_PER_EUR
               + kw * 184.06 / USD_PER_EUR / DAYS_PER_MONTH + 201_800 * 0.12 / 365)
    assert e["cost_currency"] == "EUR" and e["exchange_rate"] == USD_PER_EUR
    assert e["serving_cost_per_day"] == pytest.approx(per_day)


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


def test_the_eur_example_costs_its_run_in_euros():
    # examples/dgx-h100-70b-finetune.json: 16 DGX H100 (10.2 kW nameplate each) quoted in EUR, its line items
    # 16 × 289,000 + 8 × 31,000 = EUR 4,872,000
    document = json.loads((ROOT / "examples/dgx-h100-70b-finetune.json").read_text())
    result = _check(document, "time-to-result")
    e = result["evidence"]
    days, capital, kw = e["run_days"], 16 * 289_000 + 8 * 31_000, 16 * 10.2 * SUSTAINED

    # The cost per run, recomputed from the inputs: capital and support in EUR as quoted, power and facility
    # from the policy's USD rates at 1.0889 USD per EUR (ECB, 14 March 2025)
    expected = (capital * days / (5 * 365)  # straight-line over 5 years
                + kw * 1.56 * 24 * days * 0.0806 / USD_PER_EUR  # energy × PUE × EUR per kWh
                + kw * 184.06 / USD_PER_EUR * days / DAYS_PER_MONTH  # facility per kW-month
                + capital * 0.12 * days / 365)  # support, 12 % a year
    assert e["quote_total"] == capital == 4_872_000
    assert e["cost_currency"] == "EUR" and e["cost_per_run"] == pytest.approx(expected)
    assert e["cost_per_run"] == pytest.approx(12_583, abs=1)  # at the modelled 2.37 days
    assert "full cost per run EUR 12,583" in result["message"]


def test_the_h200_example_reports_its_break_even_utilisation_against_the_aws_on_demand_rate():
    # examples/h200-128node-pretraining.json: 132 DGX H200 (128 training, 4 serving; 10.2 kW nameplate each, 8 GPUs)
    # quoted in USD at 132 × 385,000 + 48 × 31,000 + 8 × 410,000 = USD 55,588,000
    e = _check(json.loads((ROOT / "examples/h200-128node-pretraining.json").read_text()), "time-to-result")["evidence"]
    capital, kw, gpus = 55_588_000, 132 * 10.2 * SUSTAINED, 132 * 8

    # Owned per day: capital / (5 × 365) + energy + facility + support, then per GPU-hour at full use
    per_day = (capital / (5 * 365) + kw * 1.56 * 24 * 0.0806 + kw * 184.06 / DAYS_PER_MONTH + capital * 0.12 / 365)
    per_gpu_hour = per_day / (gpus * 24)
    # AWS p5en.48xlarge (8 × H200) On-Demand, US East: $84.80/h, $10.60 per GPU-hour
    on_demand = 84.80 / 8
    assert e["rent_rates_per_gpu_hour"]["on_demand"] == pytest.approx(10.60)
    assert e["cost_per_day"] == pytest.approx(per_day)
    assert e["cost_per_gpu_hour"] == pytest.approx(per_gpu_hour)
    assert e["break_even_utilisation"] == pytest.approx(per_gpu_hour / on_demand)
    assert e["break_even_utilisation"] == pytest.approx(0.216, abs=0.001)


def test_every_catalogue_gpu_has_each_rental_kind_priced_or_says_why_not():
    catalogue = json.loads((ROOT / "rules/data/catalogue.json").read_text())
    rates = json.loads((ROOT / "rules/data/policy.default.json").read_text())["cost"]["rental_per_gpu_hour"]

    # Rates are keyed by the catalogue's GPU model id, and every GPU has an entry for every kind
    assert set(catalogue["gpus"]) <= set(rates)
    for gpu in catalogue["gpus"]:
        assert set(rates[gpu]) == {"on_demand", "reserved", "spot"}, gpu
        for kind, rate in rates[gpu].items():
            # each rate cited and dated; a null one says what was searched and that none is published
            assert rate["source"] and rate["as_of"], (gpu, kind)
            if rate["value"] is None:
                assert rate["source"].startswith("no published"), (gpu, kind)
            else:
                assert rate["value"] > 0, (gpu, kind)
    unpriced = {kind: {gpu for gpu in catalogue["gpus"] if rates[gpu][kind]["value"] is None}
                for kind in ("on_demand", "reserved", "spot")}
    # GB300 NVL72 is sold by the rack under contracts quoted on request: no published rate per GPU of any kind;
    # GB200 NVL72 likewise has an on-demand rate only; no reserved or spot H100 NVL, reserved L4 or MI300X
    assert unpriced == {
        "on_demand": {"B300-GB300-288GB"},
        "reserved": {"B300-GB300-288GB", "B200-GB200-186GB", "H100-NVL-94GB", "L4-24GB", "MI300X-192GB"},
        "spot": {"B300-GB300-288GB", "B200-GB200-186GB", "H100-NVL-94GB"},
    }


def test_the_h200_example_is_rented_reserved_and_on_spot_at_the_cited_aws_rates():
    e = _check(json.loads((ROOT / "examples/h200-128node-pretraining.json").read_text()), "time-to-result")["evidence"]
    days, gpus = e["run_days"], 128 * 8  # the 128 training nodes of 8 H200

    # AWS Capacity Block p5e.48xlarge USD 5.408 and spot p5en.48xlarge USD 24.2902/h / 8 = USD 3.0363 per GPU-hour
    assert e["rent_rates_per_gpu_hour"] == pytest.approx({"on_demand": 10.60, "reserved": 5.408, "spot": 3.0363})
    assert e["rent_rates_as_of"] == {"on_demand": "2025-05", "reserved": "2024-12", "spot": "2025-05"}
    assert e["rent_cost_per_run"]["reserved"] == pytest.approx(gpus * days * 24 * 5.408)
    assert e["rent_spot_days"] >= days
    assert e["rent_cost_per_run"]["spot"] == pytest.approx(gpus * e["rent_spot_days"] * 24 * 3.0363)
    assert e["rent_unpriced"] == {}


def test_a_b300_quote_is_rented_at_the_qubrid_year_and_the_coreweave_spot_rates():
    # Given the 2-node fixture on HGX B300 (8 × B300-SXM-270GB each), quoted in USD
    e = _timing({"quote": {"currency": "USD", "node_groups": [
        {"name": "gpu", "count": 2, "server_model": "HGX-B300-8GPU", "unit_price": 400_000}]}})["evidence"]
    days = e["run_days"]

    # Reserved: Qubrid USD 389,400 a year / (8 × 8,760 h); spot: CoreWeave HGX B300 USD 35.84/h / 8
    assert e["rent_gpu_model"] == "B300-SXM-270GB"
    assert e["rent_rates_per_gpu_hour"]["reserved"] == pytest.approx(389_400 / (8 * 8_760), abs=1e-4)
    assert e["rent_rates_per_gpu_hour"]["spot"] == pytest.approx(35.84 / 8)
    assert e["rent_cost_per_run"]["on_demand"] == pytest.approx(16 * days * 24 * 6.125)
    assert e["rent_cost_per_run"]["reserved"] == pytest.approx(16 * days * 24 * 5.5565)
    assert e["rent_cost_per_run"]["spot"] == pytest.approx(16 * e["rent_spot_days"] * 24 * 4.48)


def test_a_gb300_quote_is_not_rented_and_says_why_for_each_kind():
    # Given one GB300 NVL72 rack (72 GPUs) training the fixture's model, quoted in USD
    result = _timing({"quote": {"currency": "USD", "node_groups": [
        {"name": "gpu", "count": 1, "server_model": "GB300-NVL72", "unit_price": 4_000_000}]},
        "workload": {"training": {"gpus": 72, "global_batch": 144}}})
    e = result["evidence"]

    # Then no kind is priced, each with the policy's reason, and the message names the on-demand one
    assert e["rent_gpu_model"] == "B300-GB300-288GB"
    assert e["rent_cost_per_run"] == {"on_demand": None, "reserved": None, "spot": None}
    assert set(e["rent_unpriced"]) == {"on_demand", "reserved", "spot"}
    assert all(why.startswith("no published") for why in e["rent_unpriced"].values())
    assert "no rental rate for B300-GB300-288GB in the policy (no published on-demand rate" in result["message"]

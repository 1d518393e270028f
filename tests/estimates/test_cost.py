"""Tests for rules.estimates.power_cost.cost: the full cost of owning hardware for a run, against hand calculations.

The small quote: 2 nodes of 8 GPUs, 10 kW nameplate each, 1,000,000 of capital; 4-year amortisation,
0.10 per kWh at PUE 1.5, 150 per kW-month of facility, support 10 % of capital a year; a 36.5-day run.
"""

import pytest

from rules.errors import InconsistentInput
from rules.estimates.power_cost.cost import (
    OwnedHardware,
    OwnershipRates,
    amortised_capital,
    energy_kwh,
    owned_cost,
    owned_cost_per_gpu_hour,
    per_million_tokens,
    priced_total,
    served_tokens_per_day,
)
from rules.estimates.power_cost.power import NodePower

RATES = OwnershipRates(amortisation_years=4, electricity_per_kwh=0.10, pue=1.5, support_fraction_per_year=0.10,
                       facility_basis="kw_month", facility_per_kw_month=150.0)
SMALL = OwnedHardware(1_000_000.0, (NodePower(2, 10_000.0),), ((2, 8),))
DAYS = 36.5


def test_priced_total_sums_extended_prices_of_the_example_quote():
    # examples/dgx-h100-70b-finetune.json: 16 DGX H100 at 289,000 + 8 NDR switches at 31,000 = 4,872,000.
    assert priced_total([(16, 289_000), (8, 31_000)]) == pytest.approx(4_872_000)
    assert priced_total([]) == 0.0
    with pytest.raises(ValueError, match="unit_price"):
        priced_total([(1, -5)])


def test_small_quote_components_by_hand():
    cost = owned_cost(SMALL, RATES, DAYS)

    # capital: 1,000,000 × 36.5 / (4 × 365) = 25,000
    assert cost.capital == pytest.approx(25_000)
    # energy: 20 kW × 1.5 × 24 h × 36.5 d = 26,280 kWh, at 0.10 = 2,628
    assert cost.energy_kwh == pytest.approx(26_280)
    assert cost.power == pytest.approx(2_628)
    # facility: 20 kW × 150 × (36.5 / (365 / 12) = 1.2 months) = 3,600
    assert cost.facility == pytest.approx(3_600)
    # support: 1,000,000 × 0.10 × 36.5 / 365 = 10,000
    assert cost.support == pytest.approx(10_000)
    assert cost.total == pytest.approx(41_228)
    assert cost.per_day == pytest.approx(41_228 / 36.5)
    # 16 GPUs at full use: 1,129.53 per day / (16 × 24) = 2.9415 per GPU-hour
    assert owned_cost_per_gpu_hour(cost, SMALL.gpus) == pytest.approx(41_228 / 36.5 / 384)
    # 10 billion tokens: 41,228 / 10,000 million = 4.1228 per million
    assert per_million_tokens(cost.total, 1e10) == pytest.approx(4.1228)


def test_facility_per_rack_month_when_the_quote_lists_its_racks():
    rates = OwnershipRates(4, 0.10, 1.5, 0.10, facility_basis="rack_month", facility_per_rack_month=2_000.0)
    in_one_rack = OwnedHardware(1_000_000.0, (NodePower(2, 10_000.0),), ((2, 8),), rack_kinds=(1,))

    # 1 rack × 2,000 × 1.2 months = 2,400; without racks listed there is no rack count to charge
    assert owned_cost(in_one_rack, rates, DAYS).facility == pytest.approx(2_400)
    assert owned_cost(in_one_rack, rates, DAYS).facility_basis == "rack_month"
    with pytest.raises(InconsistentInput, match="facility_per_kw_month"):
        owned_cost(SMALL, rates, DAYS)


def test_measured_sustained_draw_replaces_the_nameplate():
    measured = OwnedHardware(1_000_000.0, (NodePower(2, 10_000.0, sustained_w=7_000.0),), ((2, 8),))

    # 14 kW × 1.5 × 24 × 36.5 = 18,396 kWh
    assert owned_cost(measured, RATES, DAYS).energy_kwh == pytest.approx(18_396)


def test_doubling_the_nodes_holds_the_cost_per_run_when_the_time_halves():
    # Given twice the hardware (capital, power) for half the days
    doubled = OwnedHardware(2_000_000.0, (NodePower(4, 10_000.0),), ((4, 8),))

    one, two = owned_cost(SMALL, RATES, DAYS), owned_cost(doubled, RATES, DAYS / 2)

    # Then every component, and so the cost per run, is the same; the cost per day doubles (not four-fold)
    for part in ("capital", "power", "facility", "support", "total"):
        assert getattr(two, part) == pytest.approx(getattr(one, part)), part
    assert two.per_day == pytest.approx(2 * one.per_day)


def test_amortisation_and_energy_refuse_what_cannot_be():
    assert amortised_capital(730_000, 365, 2) == pytest.approx(365_000)
    assert energy_kwh(1.0, 1.0, 1.0) == pytest.approx(24.0)
    with pytest.raises(InconsistentInput, match="pue"):
        OwnershipRates(4, 0.1, 0.9, 0.1, facility_per_kw_month=150.0)
    with pytest.raises(InconsistentInput, match="facility_per_kw_month"):
        OwnershipRates(4, 0.1, 1.5, 0.1)
    with pytest.raises(InconsistentInput, match="days"):
        owned_cost(SMALL, RATES, 0)


def test_served_tokens_per_day_is_rps_times_output_tokens_over_a_day():
    # 6 rps × 256 output tokens × 86,400 s = 132,710,400 tokens a day (examples/l40s-8b-serving.json)
    assert served_tokens_per_day(6, 256) == pytest.approx(132_710_400)

"""Tests for rules.estimates.power_cost.rental: the run on rented GPUs, spot preemptions and the break-even
utilisation."""

import json
import math
from pathlib import Path

import pytest

from rules.estimates.power_cost.cost import OwnedHardware, OwnershipRates, owned_cost, owned_cost_per_gpu_hour
from rules.estimates.power_cost.power import NodePower
from rules.estimates.power_cost.rental import (
    RentalRates,
    break_even_utilisation,
    rented_cost,
    rented_run,
    spot_overhead,
    with_preemptions,
)
from rules.estimates.reliability.goodput_sim import GoodputInputs

ROOT = Path(__file__).resolve().parents[2]
# Ten hours of compute on one node, hourly checkpoints that cost nothing, instant restarts, node MTBF 730 h.
JOB = GoodputInputs(compute_s=36_000.0, nodes=1, node_mtbf_h=730.0, interval_s=3_600.0, save_s=0.0, restart_s=0.0)


def test_rented_cost_is_gpus_times_hours_times_rate():
    # 16 GPUs × 36.5 days × 24 h × 10.00 = 140,160
    assert rented_cost(16, 36.5, 10.0) == pytest.approx(140_160)


def test_one_preemption_per_node_month_halves_a_730_hour_mtbf():
    # 1/MTBF' = 1/730 h + 1 per 730 h (a month of 365/12 days) = 2/730: MTBF' = 365 h
    assert with_preemptions(JOB, 1.0).node_mtbf_h == pytest.approx(365.0)
    assert with_preemptions(JOB, 0.0).node_mtbf_h == pytest.approx(730.0)


def test_spot_overhead_matches_the_first_order_loss_of_half_an_interval_per_preemption():
    # Daly's wall time is M(e^{L/M} − 1) per segment: the ratio at M = 365 h against 730 h, L = 1 h
    exact = 365 * math.expm1(1 / 365) / (730 * math.expm1(1 / 730))
    assert spot_overhead(JOB, 1.0) == pytest.approx(exact, rel=1e-12)
    # To first order each extra interruption (1/730 per hour) loses half an interval: 1 + 0.5 h / 730 h
    assert spot_overhead(JOB, 1.0) == pytest.approx(1 + 0.5 / 730, rel=1e-6)
    assert spot_overhead(JOB, 0.0) == 1.0


def test_rented_run_prices_each_kind_and_stretches_spot():
    rates = RentalRates(on_demand=10.0, reserved=4.0, spot=2.5)

    run = rented_run(16, 36.5, rates, JOB, 1.0)

    assert run.cost["on_demand"] == pytest.approx(140_160)
    assert run.cost["reserved"] == pytest.approx(16 * 36.5 * 24 * 4.0)
    assert run.spot_days == pytest.approx(36.5 * (1 + 0.5 / 730), rel=1e-6)
    assert run.cost["spot"] == pytest.approx(16 * run.spot_days * 24 * 2.5)
    assert rented_run(16, 36.5, RentalRates(reserved=4.0), JOB, 1.0).cost["on_demand"] is None


def test_break_even_utilisation_of_the_small_quote_by_hand():
    # The small quote of test_cost.py: 41,228 over 36.5 days on 16 GPUs = 2.94149 per GPU-hour at full use
    rates = OwnershipRates(4, 0.10, 1.5, 0.10, facility_per_kw_month=150.0)
    hardware = OwnedHardware(1_000_000.0, (NodePower(2, 10_000.0),), ((2, 8),))
    owned = owned_cost_per_gpu_hour(owned_cost(hardware, rates, 36.5), hardware.gpus)
    assert owned == pytest.approx(2.94149, abs=1e-5)

    # Against on-demand at 10.00 per GPU-hour: buying wins above 29.4 % utilisation
    u = break_even_utilisation(owned, 10.0)
    assert u == pytest.approx(0.294149, abs=1e-6)
    # At u the owned cost per used GPU-hour, owned / u, is the rented rate
    assert owned / u == pytest.approx(10.0)
    # A rate below the owned cost at full use: renting is cheaper even at 100 % use
    assert break_even_utilisation(owned, 2.0) > 1


def test_the_default_policy_rates_price_exactly_the_kinds_they_hold():
    rates = json.loads((ROOT / "rules/data/policy.default.json").read_text())["cost"]["rental_per_gpu_hour"]

    for gpu, kinds in rates.items():
        # Every rate is accepted (positive, or None with its reason in the policy) ...
        rental = RentalRates(**{kind: rate["value"] for kind, rate in kinds.items()})
        run = rented_run(8, 10.0, rental, JOB, 1.0)
        # ... and the run is priced at exactly the kinds with a value, at GPUs × hours × rate (spot: its days)
        for kind, rate in kinds.items():
            days = run.spot_days if kind == "spot" else run.days
            expected = None if rate["value"] is None else 8 * days * 24 * rate["value"]
            assert run.cost[kind] == (pytest.approx(expected) if expected is not None else None), (gpu, kind)

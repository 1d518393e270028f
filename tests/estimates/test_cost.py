"""Tests for rules.estimates.cost: a quote's total and its spread over a run's days."""

import pytest

from rules.estimates.cost import cost_per_day, priced_total


def test_priced_total_sums_extended_prices_of_the_example_quote():
    # examples/dgx-h100-70b-finetune.json: 16 DGX H100 at 289,000 + 8 NDR switches at 31,000 = 4,872,000.
    assert priced_total([(16, 289_000), (8, 31_000)]) == pytest.approx(4_872_000)
    assert priced_total([]) == 0.0


def test_cost_per_day_spreads_the_total_over_the_run():
    assert cost_per_day(4_872_000, 4.0) == pytest.approx(1_218_000)
    with pytest.raises(ValueError, match="days"):
        cost_per_day(1.0, 0)
    with pytest.raises(ValueError, match="unit_price"):
        priced_total([(1, -5)])

"""What a quote costs, and that cost spread over the days a training run takes.

Capital only: no amortisation period, power, cooling, space, staff or support contract is modelled; a
reader comparing quotes should add those. Amounts are in the quote's currency.
"""

from __future__ import annotations

from collections.abc import Iterable

from rules.estimates._args import require_non_negative, require_positive


def priced_total(items: Iterable[tuple[float, float]]) -> float:
    """Return Σ quantity × unit price over (quantity, unit_price) pairs: a quote's total before tax.

    Source: the arithmetic of a bill of materials (extended price = quantity × unit price; total = sum of
    the extended prices), as in the quote's own line items.
    """
    total = 0.0
    for quantity, unit_price in items:
        require_non_negative("quantity", quantity)
        require_non_negative("unit_price", unit_price)
        total += quantity * unit_price
    return total


def cost_per_day(total: float, days: float) -> float:
    """Return ``total`` spread over ``days``: the capital cost of each day the run occupies the hardware.

    Without an amortisation period this is the quote total per day of the run if the hardware were
    bought for this run alone: a plain ratio for the record, not an operating cost and not a ranking of
    quotes (a shorter run raises it).
    """
    require_non_negative("total", total)
    require_positive("days", days)
    return total / days

"""The currency a result's cost is told in: the quote's own, with the policy's rates converted into it.

The quote's capital, and the support charged as a share of it, are in the quote's currency and need no rate. The
policy's rates (electricity, facility, rental) are in ``cost.currency``; a quote in another currency has them
converted at the policy's dated reference rate for its currency (``cost.exchange_rates``), and where the policy has
none they are left out, saying so, rather than added to amounts in another currency. The conversion itself:
rules/estimates/power_cost/currency.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rules.checks.base import Context
from rules.estimates.power_cost.cost import OwnershipRates
from rules.estimates.power_cost.currency import ExchangeRate, ownership_rates_in, rental_rates_in
from rules.estimates.power_cost.rental import RentalRates

# The figures a rate converts, as the evidence names them (capital and support are the quote's own amounts).
CONVERTED_FIGURES = ("cost_power", "cost_facility", "electricity_per_kwh", "rent_cost_per_run")


@dataclass(frozen=True)
class Money:
    """The currency of the cost figures and how the policy's rates reach it."""

    currency: str | None  # the quote's: every cost figure is in it (None when the quote states none)
    rates_currency: str  # the policy's rates' (cost.currency)
    rate: ExchangeRate | None = None  # converts the policy's rates into ``currency``; None when none is needed
    rate_as_of: str | None = None
    rate_source: str | None = None
    problem: str | None = None  # why the policy's rates cannot be told in ``currency``; None when they can

    @property
    def rates_apply(self) -> bool:
        """Returns whether the policy's rates can be told in the quote's currency (same currency, or a rate)."""
        return self.problem is None

    def ownership(self, rates: OwnershipRates) -> OwnershipRates:
        """Returns the policy's ownership rates in the quote's currency (as they are when no rate is needed)."""
        return rates if self.rate is None else ownership_rates_in(rates, self.rate)

    def rental(self, rates: RentalRates) -> RentalRates:
        """Returns the policy's rental rates in the quote's currency (as they are when no rate is needed)."""
        return rates if self.rate is None else rental_rates_in(rates, self.rate)

    def evidence(self) -> dict[str, Any]:
        """Returns the currency evidence: the figures' currency, the policy's, and the rate that converted what."""
        rate = self.rate
        return {
            "cost_currency": self.currency,
            "cost_rates_currency": self.rates_currency,
            "exchange_rate": None if rate is None else rate.base_per_unit,
            "exchange_rate_unit": None if rate is None else rate.pair,
            "exchange_rate_as_of": self.rate_as_of,
            "exchange_rate_source": self.rate_source,
            "exchange_rate_converts": [] if rate is None else list(CONVERTED_FIGURES),
        }

    def note(self) -> str:
        """Returns the conversion in words ("" when none was made)."""
        if self.rate is None:
            return ""
        return (f"power, facility and rental converted from {self.rates_currency} at {self.rate.base_per_unit:g} "
                f"{self.rate.pair}, the reference rate of {self.rate_as_of}")


def money(ctx: Context) -> Money:
    """Returns the currency of the quote's cost figures and the rate, if any, that brings the policy's rates to it."""
    return ctx.memo(_money)


def _money(ctx: Context) -> Money:
    policy_currency = ctx.setting("cost.currency")
    quote_currency = ctx.value(ctx.job.cluster.currency)
    if quote_currency is None:
        return Money(None, policy_currency, problem=(
            f"the quote states no currency, so the policy's {policy_currency} rates for power, facility and rental "
            "are not set beside its prices"))
    if quote_currency == policy_currency:
        return Money(quote_currency, policy_currency)
    entry = ctx.setting("cost.exchange_rates").get(quote_currency)
    if entry is None:
        return Money(quote_currency, policy_currency, problem=(
            f"the policy's power, facility and rental rates are in {policy_currency} and it has no {policy_currency} "
            f"per {quote_currency} reference rate (cost.exchange_rates), so they are not converted into the "
            f"quote's {quote_currency}"))
    rate = ExchangeRate(quote_currency, policy_currency, entry["value"])
    return Money(quote_currency, policy_currency, rate, entry["as_of"], entry["source"])

"""The policy's rates in the buyer's currency: amounts converted at a dated reference exchange rate.

The quote's own prices (its capital, and the support charged as a share of it) are in the quote's currency and
are never converted. The policy's rates (electricity, facility, rental) are in the policy's currency; where the
policy holds a reference rate for the quote's currency they are converted into it, so that every cost figure is
in the quote's currency.

A reference rate is quoted as the European Central Bank quotes its euro reference rates: units of the base
currency per one unit of the other ("1 EUR = 1.0889 USD" is 1.0889 USD per EUR; ECB, *Euro foreign exchange
reference rates*, https://www.ecb.europa.eu/stats/policy_and_exchange_rates/euro_reference_exchange_rates/).
An amount in the base currency is therefore worth amount / rate in the other: USD 108.89 at 1.0889 USD per EUR is
EUR 100. A rate per unit (per kWh, per kW-month, per GPU-hour) converts the same way, since the unit is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rules.errors import InconsistentInput
from rules.estimates._args import require_positive
from rules.estimates.power_cost.cost import OwnershipRates
from rules.estimates.power_cost.rental import RATE_KINDS, RentalRates


@dataclass(frozen=True)
class ExchangeRate:
    """A dated reference rate: ``base_per_unit`` units of ``base`` per one unit of ``currency``."""

    currency: str  # ISO 4217 code converted into (the quote's), e.g. "EUR"
    base: str  # ISO 4217 code of the policy's rates, e.g. "USD"
    base_per_unit: float  # e.g. 1.0889 USD per EUR

    def __post_init__(self) -> None:
        require_positive("exchange rate", self.base_per_unit)
        if self.currency == self.base:
            raise InconsistentInput(f"an exchange rate converts between two currencies; got {self.base} to itself")

    @property
    def pair(self) -> str:
        """Returns the rate's unit in words, e.g. "USD per EUR"."""
        return f"{self.base} per {self.currency}"


def from_base(amount: float, rate: ExchangeRate) -> float:
    """Returns ``amount`` in the base currency expressed in ``rate.currency``: amount / base per unit."""
    return amount / rate.base_per_unit


def ownership_rates_in(rates: OwnershipRates, rate: ExchangeRate) -> OwnershipRates:
    """Returns ``rates`` with its prices (electricity per kWh, facility per kW-month and per rack-month) converted.

    The amortisation period, the PUE and the support fraction are not amounts and stay as they are.
    """
    return replace(
        rates,
        electricity_per_kwh=from_base(rates.electricity_per_kwh, rate),
        facility_per_kw_month=(None if rates.facility_per_kw_month is None
                               else from_base(rates.facility_per_kw_month, rate)),
        facility_per_rack_month=(None if rates.facility_per_rack_month is None
                                 else from_base(rates.facility_per_rack_month, rate)),
    )


def rental_rates_in(rates: RentalRates, rate: ExchangeRate) -> RentalRates:
    """Returns ``rates`` (per GPU-hour) converted into ``rate.currency``; a kind without a rate stays without."""
    converted = {}
    for kind in RATE_KINDS:
        value = rates.rate(kind)
        converted[kind] = None if value is None else from_base(value, rate)
    return RentalRates(**converted)

"""The full cost of owning the quoted hardware for the days a run takes: per run, per day and per million tokens.

Model (a straight-line total cost of ownership, every rate from the policy's ``cost`` section with its source):

- **capital**: the quote's total, amortised straight-line over the policy's period: capital × run days /
  (amortisation years × 365). Straight-line depreciation charges the cost evenly over the useful life
  (IRS Publication 946, "How To Depreciate Property", ch. 4, the straight line method; IAS 16 ¶62).
- **power**: the hardware's IT draw in kW × PUE × price per kWh × hours. The draw is what rack-power uses
  (:func:`rules.estimates.power_cost.power.rack_draw_kw`) of the nodes as the caller gives them: a GPU node's
  measured sustained watts, else its typical sustained share of nameplate
  (:func:`rules.estimates.power_cost.power.typical_sustained_w`), else the nameplate maximum, an upper bound.
  PUE = total facility energy / IT energy (The Green Grid, White Paper #49, "PUE: A Comprehensive Examination of
  the Metric", 2012), so the facility's cooling and losses are paid at the same price per kWh.
- **facility**: space, cooling plant and power distribution as a colocation provider charges them: per kW of
  IT draw per month, or per rack per month; months = days / (365 / 12).
- **support/operations**: a fraction of capital per year × days / 365.

Per day: the total over the run's days, a rate that does not depend on how long the run takes (capital and
support accrue per day whether the run is short or long). Per million tokens: the run's cost / (tokens / 10⁶).
Serving: the cost per day of the serving hardware / the tokens it serves per day (rps × output tokens ×
86,400 s). Amounts are in one currency: the caller converts the policy's rates into the quote's first
(rules/estimates/power_cost/currency.py); the quote's capital is never converted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rules.errors import InconsistentInput
from rules.estimates._args import (
    require_choice,
    require_non_negative,
    require_non_negative_int,
    require_positive,
    require_positive_int,
)
from rules.estimates.power_cost.power import NodePower, rack_draw_kw
from rules.units import SECONDS_PER_DAY

DAYS_PER_YEAR = 365.0
MONTHS_PER_YEAR = 12.0
DAYS_PER_MONTH = DAYS_PER_YEAR / MONTHS_PER_YEAR
HOURS_PER_DAY = 24.0
TOKENS_PER_MILLION = 1e6
KW_MONTH = "kw_month"
RACK_MONTH = "rack_month"
FACILITY_BASES = (KW_MONTH, RACK_MONTH)


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


@dataclass(frozen=True)
class OwnershipRates:
    """The rates of owning hardware (``cost`` in the policy), in the currency the cost is told in."""

    amortisation_years: float
    electricity_per_kwh: float
    pue: float  # total facility energy / IT energy, ≥ 1
    support_fraction_per_year: float  # support and operations per year, as a fraction of capital
    facility_basis: str = KW_MONTH  # "kw_month" or "rack_month"
    facility_per_kw_month: float | None = None
    facility_per_rack_month: float | None = None

    def __post_init__(self) -> None:
        require_positive("amortisation_years", self.amortisation_years)
        require_non_negative("electricity_per_kwh", self.electricity_per_kwh)
        require_positive("pue", self.pue)
        if self.pue < 1:
            raise InconsistentInput(f"pue is total facility energy over IT energy, at least 1; got {self.pue!r}")
        require_non_negative("support_fraction_per_year", self.support_fraction_per_year)
        require_choice("facility_basis", self.facility_basis, FACILITY_BASES)
        require_non_negative(f"facility_per_{self.facility_basis}", self.facility_rate)

    @property
    def facility_rate(self) -> float:
        """Returns the facility rate of the chosen basis (per kW-month or per rack-month); raises when unset."""
        rate = self.facility_per_kw_month if self.facility_basis == KW_MONTH else self.facility_per_rack_month
        require_non_negative(f"facility_per_{self.facility_basis}", rate)  # None is refused too
        return rate


@dataclass(frozen=True)
class OwnedHardware:
    """What is bought: its capital, the power of its nodes, its GPUs and the racks it fills."""

    capital: float
    nodes: tuple[NodePower, ...]  # node groups whose power is known (measured sustained, else nameplate)
    gpu_groups: tuple[tuple[int, int], ...] = ()  # (nodes, GPUs per node) of each group with GPUs
    rack_kinds: tuple[int, ...] | None = None  # racks built of each kind, for a facility charged per rack-month

    def __post_init__(self) -> None:
        require_non_negative("capital", self.capital)
        for nodes, per_node in self.gpu_groups:
            require_non_negative_int("nodes", nodes)
            require_non_negative_int("gpus per node", per_node)
        for count in self.rack_kinds or ():
            require_non_negative_int("racks", count)

    @property
    def it_kw(self) -> float:
        """Returns the IT draw in kW: :func:`rules.estimates.power_cost.power.rack_draw_kw` over the nodes (0 with
        none)."""
        return rack_draw_kw(self.nodes) if self.nodes else 0.0

    @property
    def racks(self) -> int | None:
        """Returns the racks built (Σ over the kinds); None when the quote lists none."""
        return sum(self.rack_kinds) if self.rack_kinds else None

    @property
    def gpus(self) -> int:
        """Returns Σ nodes × GPUs per node over the groups with GPUs."""
        return sum(nodes * per_node for nodes, per_node in self.gpu_groups)


@dataclass(frozen=True)
class OwnedCost:
    """The cost of owning the hardware for ``days``, by component, in the rates' currency."""

    days: float
    capital: float  # amortised share of the capital
    power: float
    facility: float
    support: float
    energy_kwh: float  # drawn from the grid: IT energy × PUE
    facility_basis: str

    @property
    def total(self) -> float:
        """Returns capital + power + facility + support."""
        return self.capital + self.power + self.facility + self.support

    @property
    def per_day(self) -> float:
        """Returns the total per day of the run: the cost of holding the hardware for one day."""
        return self.total / self.days


def amortised_capital(capital: float, days: float, years: float) -> float:
    """Returns the straight-line share of ``capital`` for ``days``: capital × days / (years × 365)."""
    require_non_negative("capital", capital)
    require_non_negative("days", days)
    require_positive("amortisation_years", years)
    return capital * days / (years * DAYS_PER_YEAR)


def energy_kwh(it_kw: float, pue: float, days: float) -> float:
    """Returns the energy drawn from the grid in ``days``: IT kW × PUE × 24 h × days (Green Grid WP #49)."""
    require_non_negative("it_kw", it_kw)
    require_positive("pue", pue)
    require_non_negative("days", days)
    return it_kw * pue * HOURS_PER_DAY * days


def facility_cost(it_kw: float, racks: int | None, rates: OwnershipRates, days: float) -> float:
    """Returns the facility charge for ``days``: kW × rate × months, or racks × rate × months (months = days/(365/12)).

    A rack-month basis needs the racks: with none known, the kW-month rate applies when the policy has one.
    """
    require_non_negative("it_kw", it_kw)
    require_non_negative("days", days)
    months = days / DAYS_PER_MONTH
    if rates.facility_basis == RACK_MONTH and racks is not None:
        return racks * rates.facility_rate * months
    per_kw = rates.facility_per_kw_month
    require_non_negative("facility_per_kw_month", per_kw)
    return it_kw * per_kw * months


def support_cost(capital: float, fraction_per_year: float, days: float) -> float:
    """Returns support and operations for ``days``: capital × fraction per year × days / 365."""
    require_non_negative("capital", capital)
    require_non_negative("support_fraction_per_year", fraction_per_year)
    require_non_negative("days", days)
    return capital * fraction_per_year * days / DAYS_PER_YEAR


def owned_cost(hardware: OwnedHardware, rates: OwnershipRates, days: float) -> OwnedCost:
    """Returns the cost of owning ``hardware`` for ``days`` by component (module docstring: the model)."""
    require_positive("days", days)
    kwh = energy_kwh(hardware.it_kw, rates.pue, days)
    basis = rates.facility_basis if hardware.racks is not None else KW_MONTH
    return OwnedCost(
        days=days,
        capital=amortised_capital(hardware.capital, days, rates.amortisation_years),
        power=kwh * rates.electricity_per_kwh,
        facility=facility_cost(hardware.it_kw, hardware.racks, rates, days),
        support=support_cost(hardware.capital, rates.support_fraction_per_year, days),
        energy_kwh=kwh,
        facility_basis=basis,
    )


def per_million_tokens(amount: float, tokens: float) -> float:
    """Returns ``amount`` per million tokens: amount / (tokens / 10⁶)."""
    require_non_negative("amount", amount)
    require_positive("tokens", tokens)
    return amount / (tokens / TOKENS_PER_MILLION)


def served_tokens_per_day(rps: float, output_tokens: int) -> float:
    """Returns the output tokens served per day at an average ``rps``: rps × output tokens × 86,400 s."""
    require_positive("rps", rps)
    require_positive_int("output_tokens", output_tokens)
    return rps * output_tokens * SECONDS_PER_DAY


def owned_cost_per_gpu_hour(cost: OwnedCost, gpus: int) -> float:
    """Returns the owned cost per GPU-hour when every GPU is in use every hour: cost per day / (GPUs × 24)."""
    require_positive_int("gpus", gpus)
    return cost.per_day / (gpus * HOURS_PER_DAY)

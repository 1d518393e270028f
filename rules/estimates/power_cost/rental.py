"""The same run on rented GPUs: on-demand, reserved and spot at the policy's rates, and when buying wins.

- **On-demand and reserved**: GPUs × run hours × rate per GPU-hour, for the run's expected days (failures and
  restarts included, as on owned hardware).
- **Spot**: spot capacity is taken back at random. Preemptions of each node are modelled as a Poisson process
  of the policy's rate, independent of the node's own failures, so that the job sees one Poisson process of
  interruptions with the summed rate (superposition of independent Poisson processes: Kingman 1993,
  *Poisson Processes*, §2.2): per node, 1/MTBF_spot = 1/MTBF + λ_preempt. Each preemption costs what a failure
  costs (the work since the last checkpoint and a restart). The spot run's days are the owned run's days ×
  the ratio of Daly's expected wall times with and without the preemptions
  (:func:`rules.estimates.reliability.goodput_sim.daly_expected_wall_time_s`, Daly 2006 FGCS 22(3) §3), so that a
  preemption rate of 0 gives exactly the owned days.
- **Break-even utilisation**: owning costs the same every hour whether the GPUs work or not; renting by the
  hour costs only the hours used. At utilisation u, owning costs (owned cost per GPU-hour at 100 % use) / u
  per used GPU-hour, which equals the rented rate r at u* = owned per GPU-hour / r. Above u*, buying is
  cheaper per used GPU-hour; at u* > 1, renting is cheaper even at full use. A reserved rate is paid for
  every hour of the term, used or not, so only pay-as-you-go rates (on-demand, spot) have a break-even
  utilisation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from rules.estimates._args import require_non_negative, require_positive, require_positive_int
from rules.estimates.power_cost.cost import DAYS_PER_MONTH, HOURS_PER_DAY
from rules.estimates.reliability.goodput_sim import GoodputInputs, daly_expected_wall_time_s

ON_DEMAND = "on_demand"
RESERVED = "reserved"
SPOT = "spot"
RATE_KINDS = (ON_DEMAND, RESERVED, SPOT)
HOURS_PER_MONTH = DAYS_PER_MONTH * HOURS_PER_DAY  # 730 h


@dataclass(frozen=True)
class RentalRates:
    """Rental rates of one GPU model per GPU-hour, in one currency; None where the policy has none."""

    on_demand: float | None = None
    reserved: float | None = None
    spot: float | None = None

    def __post_init__(self) -> None:
        for kind in RATE_KINDS:
            rate = getattr(self, kind)
            if rate is not None:
                require_positive(f"{kind} rate", rate)

    def rate(self, kind: str) -> float | None:
        """Returns the rate of ``kind`` ("on_demand", "reserved" or "spot"); None when the policy has none."""
        return getattr(self, kind)


@dataclass(frozen=True)
class RentedRun:
    """The run on rented GPUs: its days and cost per rate kind (None where there is no rate)."""

    gpus: int
    days: float  # on-demand and reserved
    spot_days: float | None  # with the preemptions; None when no run finishes as modelled
    cost: dict[str, float | None]  # by rate kind

    @property
    def spot_overhead(self) -> float | None:
        """Returns spot days / days: the stretch the preemptions add (1 without preemptions)."""
        return self.spot_days / self.days if self.spot_days is not None else None


def rented_cost(gpus: int, days: float, rate_per_gpu_hour: float) -> float:
    """Returns GPUs × days × 24 h × rate per GPU-hour."""
    require_positive_int("gpus", gpus)
    require_non_negative("days", days)
    require_positive("rate_per_gpu_hour", rate_per_gpu_hour)
    return gpus * days * HOURS_PER_DAY * rate_per_gpu_hour


def with_preemptions(job: GoodputInputs, preemptions_per_node_month: float) -> GoodputInputs:
    """Returns ``job`` with each node also preempted at the given rate: 1/MTBF' = 1/MTBF + λ (Kingman §2.2)."""
    require_non_negative("preemptions_per_node_month", preemptions_per_node_month)
    per_node_hour = preemptions_per_node_month / HOURS_PER_MONTH
    return replace(job, node_mtbf_h=1.0 / (1.0 / job.node_mtbf_h + per_node_hour))


def spot_overhead(job: GoodputInputs, preemptions_per_node_month: float) -> float:
    """Returns Daly's expected wall time with the preemptions over that without them (≥ 1; inf if it overflows)."""
    without = daly_expected_wall_time_s(job)
    with_spot = daly_expected_wall_time_s(with_preemptions(job, preemptions_per_node_month))
    if not math.isfinite(with_spot) or not math.isfinite(without):
        return math.inf
    return with_spot / without


def rented_run(gpus: int, days: float, rates: RentalRates, job: GoodputInputs | None,
               preemptions_per_node_month: float) -> RentedRun:
    """Returns the run priced at each rate kind; spot days stretched by :func:`spot_overhead` of ``job``.

    Without the job's goodput inputs (``job`` None) the spot days are taken as the owned days (no preemption
    overhead can be modelled), and said so by the caller.
    """
    require_positive("days", days)
    overhead = spot_overhead(job, preemptions_per_node_month) if job is not None else 1.0
    spot_days = days * overhead if math.isfinite(overhead) else None
    cost: dict[str, float | None] = {}
    for kind in RATE_KINDS:
        rate = rates.rate(kind)
        run_days = spot_days if kind == SPOT else days
        cost[kind] = rented_cost(gpus, run_days, rate) if rate is not None and run_days is not None else None
    return RentedRun(gpus=gpus, days=days, spot_days=spot_days, cost=cost)


def break_even_utilisation(owned_per_gpu_hour: float, rented_per_gpu_hour: float) -> float:
    """Returns u* = owned cost per GPU-hour at 100 % use / rented rate: above u*, buying is cheaper per used hour."""
    require_non_negative("owned_per_gpu_hour", owned_per_gpu_hour)
    require_positive("rented_per_gpu_hour", rented_per_gpu_hour)
    return owned_per_gpu_hour / rented_per_gpu_hour

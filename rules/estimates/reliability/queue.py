"""Waiting in a shared cluster's queue before a training run starts: a measured wait, or the M/M/1 mean wait.

When the cluster is shared, the run waits for the work ahead of it. Two ways to know how long:

- a wait measured on the existing cluster (``measured_queue_wait_days``), taken as it is;
- the expected utilisation ρ of the cluster by other work (``shared_cluster_utilisation``), turned into the
  mean wait of an M/M/1 queue: jobs arrive at random (Poisson), one at a time hold the cluster for an
  exponentially distributed service time of mean 1/μ, and the mean wait before service is
  W = ρ/(1 − ρ) · 1/μ (Kleinrock 1975, *Queueing Systems, Volume 1: Theory*, §3.2 "M/M/1: the classical
  queueing system": mean time in system T = (1/μ)/(1 − ρ), of which 1/μ is service, so W = T − 1/μ).
  The mean service time is taken as this run's expected days: the jobs ahead are assumed to be of its
  size. The wait grows without bound as ρ → 1, so ρ must be below 1.

The wait then stands before the run: days to result = wait + run days, and the days left to the run inside
a completion window are the window less the wait.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.errors import InconsistentInput
from rules.estimates._args import is_number, require_non_negative, require_positive

NOT_SHARED = "not shared"
MEASURED = "measured"
MM1 = "M/M/1 from the cluster's utilisation"


@dataclass(frozen=True)
class SharedCluster:
    """What the workload says about sharing the cluster: its utilisation by other work, or a measured wait."""

    utilisation: float | None = None  # ρ in [0, 1): the share of time other work holds the cluster
    measured_wait_days: float | None = None  # mean queue wait measured on the existing cluster

    def __post_init__(self) -> None:
        if self.utilisation is not None and (not is_number(self.utilisation) or not 0 <= self.utilisation < 1):
            raise InconsistentInput(f"shared_cluster_utilisation must be in [0, 1), got {self.utilisation!r}")
        if self.measured_wait_days is not None:
            require_non_negative("measured_queue_wait_days", self.measured_wait_days)

    @property
    def basis(self) -> str:
        """Returns where the wait comes from: measured (preferred), M/M/1 from the utilisation, or not shared."""
        if self.measured_wait_days is not None:
            return MEASURED
        if self.utilisation is not None:
            return MM1
        return NOT_SHARED


def mm1_wait_days(utilisation: float, service_days: float) -> float:
    """Returns the M/M/1 mean wait before service, in days: ρ/(1 − ρ) × mean service days (Kleinrock §3.2)."""
    if not is_number(utilisation) or not 0 <= utilisation < 1:
        raise InconsistentInput(f"utilisation must be in [0, 1), got {utilisation!r}")
    require_positive("service_days", service_days)
    return utilisation / (1.0 - utilisation) * service_days


def queue_wait_days(cluster: SharedCluster | None, run_days: float) -> float:
    """Returns the expected wait before the run starts, days: measured, else M/M/1 with this run's days, else 0."""
    if cluster is None or cluster.basis == NOT_SHARED:
        return 0.0
    if cluster.measured_wait_days is not None:
        return cluster.measured_wait_days
    return mm1_wait_days(cluster.utilisation, run_days)


def run_window_days(cluster: SharedCluster | None, window_days: float) -> float:
    """Returns the days a completion window leaves to the run itself once the queue wait is taken out.

    Measured wait w: window − w. M/M/1: the wait is ρ/(1 − ρ) × run days, so wait + run = run/(1 − ρ) fits the
    window when the run takes at most window × (1 − ρ). May be 0 or negative: the wait alone fills the window.
    """
    require_positive("window_days", window_days)
    if cluster is None or cluster.basis == NOT_SHARED:
        return window_days
    if cluster.measured_wait_days is not None:
        return window_days - cluster.measured_wait_days
    return window_days * (1.0 - cluster.utilisation)

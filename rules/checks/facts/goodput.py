"""Days to completion by simulation: the seeded Monte Carlo run of the quoted job (restart-behavior, time-to-result).

The simulated job is the time-to-result schedule's failure-free compute (tokens / (GPUs × tokens/s per GPU ×
scaling efficiency), no goodput: the simulation adds the saves, the lost work and the restarts itself) on
the layout's nodes, with the node MTBF, checkpoint interval, save time and restart time of the first-order
goodput (rules/checks/facts/reliability.py), so that both estimates describe one job. On a shared cluster a run
is inside the window when it fits what the queue wait leaves of it (rules/estimates/reliability/queue.py). Trials and
seed come
from the policy (``goodput.trials``, ``goodput.seed``): the same submission under the same policy gives the
same figures. Memoised per evaluation, so that both checks show one distribution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rules.checks.base import Context
from rules.checks.facts.layout import layout
from rules.checks.facts.reliability import goodput_facts
from rules.checks.facts.schedule import quoted_run_plan
from rules.estimates.reliability.goodput_sim import (
    MAX_EXPECTED_FAILURES,
    GoodputDistribution,
    GoodputInputs,
    finite_or_none,
    simulate_goodput,
)

# The simulated days, absent from the evidence (None) when no simulated run finishes, and what a message says then.
SIMULATED_DAYS = ("days_p50", "days_p90", "days_p99", "days_mean")
NEVER_FINISHES = f"no simulated run finishes (more than {MAX_EXPECTED_FAILURES:.0e} interruptions expected per run)"


@dataclass(frozen=True)
class SimulatedRun:
    """The distribution of the quoted job's days to completion over the policy's seeded trials."""

    job: GoodputInputs
    distribution: GoodputDistribution

    @property
    def finishes(self) -> bool:
        """Returns False when, as modelled, no run finishes (every simulated figure infinite)."""
        return finite_or_none(self.distribution.days_mean) is not None

    def evidence(self) -> dict[str, Any]:
        """Returns restart-behavior's simulated figures: days p50/p90/p99 and mean, interruptions per run.

        Figures of a job that never finishes are None: the record is canonical JSON, which holds no infinity.
        """
        result = self.distribution
        return {
            "days_p50": finite_or_none(result.days_p50),
            "days_p90": finite_or_none(result.days_p90),
            "days_p99": finite_or_none(result.days_p99),
            "days_mean": finite_or_none(result.days_mean),
            "failures_mean": finite_or_none(result.failures_mean),
            "expected_days_daly": finite_or_none(result.expected_days),
            "goodput_trials": result.trials,
            "goodput_seed": result.seed,
        }

    def window_evidence(self) -> dict[str, Any]:
        """Returns time-to-result's figures: the simulated ones and the share of runs inside the window."""
        share = self.distribution.window_probability
        # None: the queue wait alone fills the window, so no run finishes inside it.
        return {**self.evidence(), "window_probability": share if share is not None else 0.0}


def simulated_run(ctx: Context) -> SimulatedRun | None:
    """Returns the quoted job's simulated days to completion; None when the schedule or the goodput is unknown."""
    return ctx.memo(_simulated_run)


def _simulated_run(ctx: Context) -> SimulatedRun | None:
    run = quoted_run_plan(ctx)
    reliability = goodput_facts(ctx)
    plan = layout(ctx)
    node_mtbf_h = ctx.needed(ctx.job.training.reliability.node_mtbf_h)
    if run is None or reliability is None or plan is None or node_mtbf_h is None:
        return None
    job = GoodputInputs(compute_s=run.schedule.compute_s, nodes=plan.nodes, node_mtbf_h=node_mtbf_h,
                        interval_s=reliability.interval_s, save_s=reliability.save_s,
                        restart_s=reliability.restart_s)
    # On a shared cluster the queue wait comes first: a run is in time when it fits what the wait leaves.
    window = run.schedule.run_window_days
    distribution = simulate_goodput(job, seed=ctx.setting("goodput.seed"), trials=ctx.setting("goodput.trials"),
                                    window_days=window if window > 0 else None)
    return SimulatedRun(job, distribution)

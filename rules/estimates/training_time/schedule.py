"""Time to result: how long a training run takes on the quoted GPUs, and how many GPUs its window needs.

Step 3 of the capacity-planning guide ("GPU Capacity Planning for AI Training & Serving"): training time =
tokens / (tokens/s per GPU × GPUs), and the GPUs needed = max(memory requirement, throughput target);
failures and restarts stretch the failure-free time by 1 / goodput (Daly 2006, rules/estimates/reliability/failures.py).
On a shared cluster the wait in its queue comes first (rules/estimates/reliability/queue.py): days to result = queue
wait +
run days, and the GPUs the window needs are those that fit the run into what the wait leaves of the window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rules.estimates._args import require_positive
from rules.estimates.model.layout import Layout
from rules.estimates.ratios import fraction_of
from rules.estimates.reliability.failures import expected_wall_days
from rules.estimates.reliability.queue import SharedCluster, queue_wait_days, run_window_days
from rules.estimates.training_time.compute import gpus_needed, throughput_min_gpus, tokens_time_s
from rules.units import SECONDS_PER_DAY

# A job that never finishes (goodput 0) reports this many days: durable_rules accepts no infinity.
NEVER_DAYS = 1e9


@dataclass(frozen=True)
class RunRate:
    """How fast the quoted job trains: one replica's rate per GPU, the scaling efficiency and the goodput."""

    tokens_per_s_per_gpu: float
    scaling_efficiency: float
    goodput: float


@dataclass(frozen=True)
class Schedule:
    """How long the run takes on the quoted hardware, and how many GPUs the window needs."""

    tokens: float
    compute_s: float  # no failures, no checkpoints: tokens / (tokens/s per GPU × GPUs × scaling efficiency)
    compute_days: float  # the same in days
    days: float  # expected days to result: queue wait + run days (NEVER_DAYS at goodput 0)
    window_days: float
    window_fraction: float  # days / window
    gpus: int
    gpus_per_node: int
    memory_min_gpus: int | None
    throughput_min_gpus: int | None  # None at goodput 0, or when the queue wait fills the window
    gpus_needed: int | None  # None when no GPU count fits memory (``gpus_needed_reason`` says why)
    gpus_needed_reason: str | None
    run_days: float  # expected days of the run itself: compute days / goodput (NEVER_DAYS at goodput 0)
    queue_wait_days: float  # expected wait in a shared cluster's queue before the run starts
    run_window_days: float  # what the window leaves to the run once the wait is taken out (≤ 0: none)

    @property
    def nodes_needed(self) -> int | None:
        """Returns the whole nodes ``gpus_needed`` fills; None when no count is advised."""
        return math.ceil(self.gpus_needed / self.gpus_per_node) if self.gpus_needed is not None else None

    @property
    def oversize_ratio(self) -> float | None:
        """Returns quoted GPUs / needed GPUs; None when no count is advised."""
        return fraction_of(self.gpus, self.gpus_needed) if self.gpus_needed is not None else None


def run_tokens(dataset_tokens: float, epochs: float) -> float:
    """Returns the tokens a run trains on: dataset tokens × epochs (passes over the dataset)."""
    require_positive("dataset_tokens", dataset_tokens)
    require_positive("epochs", epochs)
    return dataset_tokens * epochs


def run_schedule(tokens: float, window_days: float, rate: RunRate, layout: Layout, memory_min_gpus: int | None,
                 no_fit_reason: str | None, cluster: SharedCluster | None = None) -> Schedule:
    """Returns the run's compute days, expected days and the GPU count its window needs.

    Compute days: :func:`rules.estimates.training_time.compute.tokens_time_s` with the scaling efficiency; expected
    days:
    :func:`rules.estimates.reliability.failures.expected_wall_days` with the goodput. ``gpus_needed`` =
    :func:`rules.estimates.training_time.compute.gpus_needed` of the memory need (``memory_min_gpus``, 1 when
    unknown) and
    the throughput need (:func:`rules.estimates.training_time.compute.throughput_min_gpus` at the quoted rate,
    efficiency
    and goodput), in whole nodes and model replicas; None with ``no_fit_reason`` when no GPU count fits one
    step in memory, so that no count is advised that could not run. ``cluster``, when the cluster is shared,
    adds the queue wait (:func:`rules.estimates.reliability.queue.queue_wait_days`) to the days, and the throughput need
    fits the run into the days the wait leaves (:func:`rules.estimates.reliability.queue.run_window_days`; none when the
    wait alone fills the window).
    """
    compute_s = tokens_time_s(tokens, rate.tokens_per_s_per_gpu, layout.gpus, rate.scaling_efficiency)
    compute_days = compute_s / SECONDS_PER_DAY
    run_days = min(expected_wall_days(compute_days, rate.goodput), NEVER_DAYS)
    wait_days = queue_wait_days(cluster, run_days)
    days = min(run_days + wait_days, NEVER_DAYS)
    run_window = run_window_days(cluster, window_days)
    throughput_need = None
    if rate.goodput > 0 and run_window > 0:
        throughput_need = throughput_min_gpus(
            run_window * SECONDS_PER_DAY, tokens=tokens, tokens_per_s_per_gpu=rate.tokens_per_s_per_gpu,
            scaling_efficiency=rate.scaling_efficiency, goodput=rate.goodput)
    needed = None
    if not no_fit_reason:
        needed = gpus_needed(memory_min_gpus or 1, throughput_need or 1, multiple_of=layout.whole_unit_gpus)
    return Schedule(tokens=tokens, compute_s=compute_s, compute_days=compute_days, days=days,
                    window_days=window_days, window_fraction=fraction_of(days, window_days), gpus=layout.gpus,
                    gpus_per_node=layout.gpus_per_node, memory_min_gpus=memory_min_gpus,
                    throughput_min_gpus=throughput_need, gpus_needed=needed, gpus_needed_reason=no_fit_reason,
                    run_days=run_days, queue_wait_days=wait_days, run_window_days=run_window)

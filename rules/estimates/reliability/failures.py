"""Failure rates, work lost per failure and goodput of a long training job.

Model: nodes fail independently with exponentially distributed times between failures, so a job's
failure rate is the sum of its nodes' rates; checkpoints are taken every ``interval_s`` of compute and
each takes ``save_s`` of blocking time; a failure loses the work since the last checkpoint plus the
restart. The first-order overhead (Young 1974; Daly 2006, FGCS 22(3)) is
``save_s / interval_s + lost_per_failure_s / job_mtbf_s``, valid when the interval, the save and the
restart are all small against the job MTBF.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rules.estimates._args import require_non_negative, require_positive, require_positive_int, require_unit_interval

HOURS_PER_DAY = 24.0


def job_mtbf_h(node_mtbf_h: float, nodes: int) -> float:
    """Return the job's mean time between failures in hours: node MTBF / nodes.

    With independent, exponentially distributed node failures the job fails at the sum of the node
    rates (the minimum of exponentials is exponential with the summed rate). Source: standard
    series-system reliability; Daly 2006, FGCS 22(3), whose M is this whole-system MTBF.
    """
    require_positive("node_mtbf_h", node_mtbf_h)
    require_positive_int("nodes", nodes)
    return node_mtbf_h / nodes


def job_mtbf_from_interruptions_h(interruptions: int, period_h: float) -> float:
    """Return the observed job MTBF in hours: observation period / interruptions.

    Source: Llama 3 (Meta 2024, "The Llama 3 Herd of Models", arXiv 2407.21783, §3.3.4): 419 unexpected
    interruptions in a 54-day snapshot on 16,384 H100 GPUs → 1296 h / 419 = 3.09 h.
    """
    require_positive_int("interruptions", interruptions)
    require_positive("period_h", period_h)
    return period_h / interruptions


def node_mtbf_from_job_h(job_mtbf_h: float, nodes: int) -> float:
    """Return the per-node MTBF in hours implied by a job MTBF: job MTBF × nodes.

    The inverse of :func:`job_mtbf_h`. Llama 3 §3.3.4 (2048 nodes of 8 GPUs, job MTBF 3.09 h) implies
    about 6,300 h per node; that figure counts every unexpected interruption (GPU, HBM, network, host,
    software) against the nodes.
    """
    require_positive("job_mtbf_h", job_mtbf_h)
    require_positive_int("nodes", nodes)
    return job_mtbf_h * nodes


def lost_work_per_failure_s(
    interval_s: float, save_s: float, restart_s: float, save_lost_fraction: float = 1.0
) -> float:
    """Return the expected time lost per failure: interval/2 + save_lost_fraction × save + restart.

    A failure strikes uniformly within a checkpoint cycle, so on average half an interval of work is
    lost and must be recomputed, plus the time to restart (reschedule, reload the checkpoint, warm
    up). ``save_lost_fraction`` = 1 (default) also charges a whole save, the conservative convention
    of this project (a failure during a save voids that checkpoint); 0.5 gives Young's (τ + δ)/2 + R
    (Young 1974; Daly 2006, FGCS 22(3), first-order model).
    """
    require_positive("interval_s", interval_s)
    require_non_negative("save_s", save_s)
    require_non_negative("restart_s", restart_s)
    require_unit_interval("save_lost_fraction", save_lost_fraction)
    return interval_s / 2.0 + save_lost_fraction * save_s + restart_s


@dataclass(frozen=True)
class Goodput:
    """First-order goodput of a checkpointed job and its two overheads."""

    goodput: float  # fraction of wall time doing new work, in [0, 1]
    save_overhead: float  # save_s / interval_s
    failure_overhead: float  # lost_per_failure_s / job_mtbf_s
    lost_per_failure_s: float
    failures_per_day: float


def job_goodput(
    interval_s: float,
    save_s: float,
    restart_s: float,
    job_mtbf_s: float,
    save_lost_fraction: float = 1.0,
) -> Goodput:
    """Return goodput = 1 − (save/interval + lost work per failure / job MTBF), floored at 0.

    First-order model of Daly 2006 (FGCS 22(3)), the one whose optimum is Young's τ = √(2δM): with
    ``save_lost_fraction=0`` and no restart, goodput at that τ is exactly 1 − √(2δ/M). ``save_s`` is
    the blocking part of a save (the staging copy only, for asynchronous checkpointing);
    ``restart_s`` the time from failure to training again. A goodput of 0 means the job, as modelled,
    never makes progress.
    """
    require_positive("job_mtbf_s", job_mtbf_s)
    lost = lost_work_per_failure_s(interval_s, save_s, restart_s, save_lost_fraction)
    save_overhead = save_s / interval_s
    failure_overhead = lost / job_mtbf_s
    goodput = max(0.0, 1.0 - save_overhead - failure_overhead)
    return Goodput(goodput, save_overhead, failure_overhead, lost, 86_400.0 / job_mtbf_s)


def expected_wall_time_s(compute_s: float, goodput: float) -> float:
    """Return the expected wall time in seconds for ``compute_s`` of failure-free work: compute / goodput.

    Returns ``math.inf`` for a goodput of 0 (the job never finishes). Source: definition of goodput
    (useful work / wall time) in the first-order model of Daly 2006.
    """
    require_positive("compute_s", compute_s)
    return _wall_time(compute_s, goodput)


def expected_wall_days(compute_days: float, goodput: float) -> float:
    """Return the expected wall time in days for ``compute_days`` of failure-free work: compute / goodput.

    As :func:`expected_wall_time_s`, in days (``math.inf`` for a goodput of 0).
    """
    require_positive("compute_days", compute_days)
    return _wall_time(compute_days, goodput)


def _wall_time(compute: float, goodput: float) -> float:
    require_unit_interval("goodput", goodput)
    if goodput == 0:
        return math.inf
    return compute / goodput

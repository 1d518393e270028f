"""Scaling efficiency of a data-parallel job: modelled from one step's compute and communication, or measured.

Model (first order, stated in :func:`scaling_efficiency` because papers vary): a step is its compute time
plus whatever communication cannot hide behind compute.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rules.errors import InconsistentInput
from rules.estimates._args import (
    require_fraction,
    require_non_negative,
    require_positive,
    require_positive_int,
    require_unit_interval,
)
from rules.estimates.communication.collectives import StepCommunication, communication_time_s
from rules.estimates.communication.interconnect import Bandwidth
from rules.estimates.model.batch import tokens_per_step
from rules.estimates.training_time.compute import tokens_time_s


@dataclass(frozen=True)
class StepScaling:
    """A modelled step: compute, communication and how much of it stays exposed."""

    efficiency: float  # compute / (compute + exposed communication), in (0, 1]
    compute_s: float
    communication_s: float
    exposed_communication_s: float  # max(0, communication − overlap × compute)
    step_s: float  # compute + exposed communication


def scaling_efficiency(compute_s: float, comm_s: float, overlap_fraction: float) -> StepScaling:
    """Return the modelled scaling efficiency: compute / (compute + exposed communication).

    Model (first order, stated here because papers vary): a step is its compute time plus whatever
    communication cannot hide behind compute. ``overlap_fraction`` in [0, 1] is the share of compute
    time during which communication can run concurrently (0: none, as with a blocking all-reduce after
    backward; PyTorch DDP buckets and FSDP prefetch overlap most of backward). Exposed communication =
    max(0, comm − overlap × compute). Efficiency is relative to the same per-GPU compute with no
    communication, i.e. the weak-scaling efficiency at fixed per-GPU batch. Sources: the overlap of
    gradient buckets with backward is described in Li et al. 2020, "PyTorch Distributed" (VLDB,
    arXiv 2006.15704) §3.2; the nccl-tests time formulas give comm_s.
    """
    require_positive("compute_s", compute_s)
    require_non_negative("comm_s", comm_s)
    require_unit_interval("overlap_fraction", overlap_fraction)
    exposed = max(0.0, comm_s - overlap_fraction * compute_s)
    step = compute_s + exposed
    return StepScaling(compute_s / step, compute_s, comm_s, exposed, step)


@dataclass(frozen=True)
class ScalingPoint:
    """One scaling measurement and its efficiency against the smallest measured GPU count."""

    gpus: int
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    efficiency: float  # (tokens/s per GPU here) / (tokens/s per GPU at the base)
    base_gpus: int


def measured_scaling_efficiency(points: Iterable[tuple[int, float]]) -> list[ScalingPoint]:
    """Return each (gpus, tokens/s) measurement with its efficiency against the smallest GPU count.

    Efficiency = (tps_n / n) / (tps_base / base), base the smallest measured GPU count (efficiency 1
    there). Source: the acceptance plan's "Size interconnect from scaling efficiency"
    ("run scaling tests at two or more device counts and record
    efficiency"); the definition is the usual weak-scaling efficiency (e.g. Narayanan et al. 2021,
    arXiv 2104.04473, §5.1 reports per-GPU throughput across scales). Results are sorted by GPU
    count; a GPU count measured twice raises ValueError (average the runs first).
    """
    measured = sorted(points, key=lambda p: p[0])
    if not measured:
        raise InconsistentInput("at least one (gpus, tokens_per_s) measurement is needed")
    seen: set[int] = set()
    for gpus, tps in measured:
        require_positive_int("gpus", gpus)
        require_positive("tokens_per_s", tps)
        if gpus in seen:
            raise InconsistentInput(f"two measurements at {gpus} GPUs; give one (e.g. their mean)")
        seen.add(gpus)
    base_gpus, base_tps = measured[0]
    base_per_gpu = base_tps / base_gpus
    return [
        ScalingPoint(gpus, tps, tps / gpus, (tps / gpus) / base_per_gpu, base_gpus) for gpus, tps in measured
    ]



@dataclass(frozen=True)
class ModelledStep:
    """One modelled optimizer step of the job: the tokens it trains on and how its time splits."""

    tokens: int
    scaling: StepScaling


def modelled_step(global_batch: int, sequence_length: int, tokens_per_s_per_gpu: float, gpus: int,
                  step: StepCommunication, links: Bandwidth, overlap_fraction: float) -> ModelledStep:
    """Returns one optimizer step's compute, communication and scaling efficiency on the job's links.

    Compute: the step's tokens (global batch × sequence length) at the per-GPU rate of one model replica
    (:func:`rules.estimates.training_time.compute.tokens_time_s`); communication: the step's collectives at the node and
    cluster busbw (:func:`rules.estimates.communication.collectives.communication_time_s`); efficiency as
    :func:`scaling_efficiency`.
    """
    tokens = tokens_per_step(global_batch, sequence_length)
    compute_s = tokens_time_s(tokens, tokens_per_s_per_gpu, gpus)
    communication_s = communication_time_s(step, links.node_busbw_gbs, links.cluster_busbw_gbs)
    return ModelledStep(tokens, scaling_efficiency(compute_s, communication_s, overlap_fraction))


def measured_scaling(points: list[tuple[int, float]]) -> tuple[list[ScalingPoint] | None, str]:
    """Returns the measured efficiencies when two or more GPU counts were measured, else None and why not.

    Efficiency needs a base to compare with (:func:`measured_scaling_efficiency`), so one point says nothing;
    points it refuses (one GPU count twice) are not used either, and the reason says so.
    """
    if len(points) < 2:
        return None, ("one measurements.scaling point; two or more GPU counts are needed" if points else "")
    try:
        return measured_scaling_efficiency(points), ""
    except InconsistentInput as error:
        return None, f"measurements.scaling not used: {error}"


def extrapolated_efficiency(at_quoted: float, at_measured: float) -> float:
    """Returns the efficiency that carries a per-GPU rate measured at one scale to another: E(quoted) / E(measured).

    Both efficiencies are relative to the same communication-free per-GPU rate r₀ (the weak-scaling efficiency
    of :func:`scaling_efficiency`, or :func:`measured_scaling_efficiency` against one base), so a rate measured
    at m GPUs is r_m = r₀·E(m) and at n GPUs r_n = r₀·E(n) = r_m·E(n)/E(m): the measured rate already carries
    the communication of its own scale, which the ratio replaces by that of the quoted scale rather than adding
    the quoted scale's on top. Above 1 when the rate was measured on more GPUs than quoted (less communication
    at the smaller scale); exactly 1 at the same scale. Source: the weak-scaling efficiency, per-GPU throughput
    at n over that of the base (Narayanan et al. 2021, arXiv 2104.04473, §5.1), and the identity above.
    """
    require_fraction("at_quoted", at_quoted)
    require_fraction("at_measured", at_measured)
    return at_quoted / at_measured


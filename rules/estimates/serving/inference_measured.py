"""Serving from measured latencies: the capacity they give a replica, and how they compare with the physical floors.

Pure arithmetic: no I/O, no configuration. ``_ms`` milliseconds, ``_s`` seconds.

A measured point is what a serving benchmark reports for the model on the quoted GPUs at one concurrency:
vLLM ``benchmarks/benchmark_serving.py`` (``vllm bench serve --max-concurrency B --percentile-metrics
ttft,tpot --metric-percentiles 95``) keeps at most B requests in flight and reports per-request TTFT and TPOT
(time per output token after the first: (latency − TTFT) / (output tokens − 1)) at the given percentiles;
TensorRT-LLM's benchmarks report the same figures at a concurrency.

Sources:
- Little 1961, "A proof for the queuing formula L = λW": requests/s per replica, with the same estimator
  (:func:`rules.estimates.serving.inference.requests_per_s_per_replica`) as the modelled plan, so the two compare.
- The capacity-planning guide, "GPU Capacity Planning for AI Training & Serving", steps 6 and 7.
- The floors of rules/estimates/serving/inference_latency.py (Williams et al. 2009; Pope et al. 2022; Kaplan et al.
2020).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from rules.estimates._args import require_positive, require_positive_int
from rules.estimates.model.hardware import GpuSpec
from rules.estimates.serving.inference import ReplicaCount, Slo, Traffic, replicas_needed, requests_per_s_per_replica
from rules.estimates.serving.inference_latency import (
    DecodeFloor,
    PrefillFloor,
    ServedModel,
    decode_floor,
    prefill_floor,
)
from rules.units import MS_PER_SECOND


@dataclass(frozen=True)
class MeasuredPoint:
    """One measured load point of a replica, defaults applied: its concurrency and the p95 latencies at it."""

    batch: int  # concurrent sequences (requests in flight)
    ttft_ms: float  # p95 time to first token
    tpot_ms: float  # p95 time per output token
    prompt_tokens: int  # prompt length of the benchmark's requests
    context_tokens: int  # KV-cache tokens each sequence holds at least while it decodes
    model: ServedModel  # the replica measured: its tensor parallelism and KV bytes per token per GPU
    index: int = 0  # position in the submission's list

    @property
    def tensor_parallel(self) -> int:
        return self.model.tensor_parallel

    def meets(self, slo: Slo) -> bool:
        """Returns whether both p95 latencies are within the SLOs."""
        return self.ttft_ms <= slo.ttft_ms_p95 and self.tpot_ms <= slo.tpot_ms_p95


@dataclass(frozen=True)
class FloorComparison:
    """A measured point against its floors: the decode step and the first token at 100 % of the datasheet."""

    point: MeasuredPoint
    decode: DecodeFloor  # at the point's batch and context
    prefill: PrefillFloor  # for one of the point's prompts
    tpot_to_floor: float  # measured TPOT / decode floor
    ttft_to_floor: float  # measured TTFT / prefill floor

    @property
    def figure(self) -> str:
        """Returns the figure closer to (or further below) its floor: "TPOT" or "TTFT"."""
        return "TPOT" if self.tpot_to_floor <= self.ttft_to_floor else "TTFT"

    @property
    def to_floor(self) -> float:
        """Returns the lower of the two measured-to-floor ratios (below 1: faster than the hardware allows)."""
        return min(self.tpot_to_floor, self.ttft_to_floor)

    @property
    def below_floor(self) -> bool:
        """Returns whether a measured figure is faster than its floor."""
        return self.to_floor < 1

    @property
    def floor_ms(self) -> float:
        """Returns the floor of :attr:`figure`, in ms."""
        seconds = self.decode.step_time_s if self.figure == "TPOT" else self.prefill.time_s
        return seconds * MS_PER_SECOND

    @property
    def measured_ms(self) -> float:
        """Returns the measured p95 of :attr:`figure`, in ms."""
        return self.point.tpot_ms if self.figure == "TPOT" else self.point.ttft_ms


def floor_comparison(point: MeasuredPoint, gpu: GpuSpec, peak_tflops: float) -> FloorComparison:
    """Returns the point's measured TPOT and TTFT over their floors on ``gpu``.

    Decode floor: :func:`decode_floor` at the point's batch, each sequence holding ``context_tokens`` of KV cache
    (each step reads the weight shard and the batch's KV cache at the datasheet HBM bandwidth). Prefill floor:
    :func:`prefill_floor` of one prompt at ``peak_tflops`` (the fastest dense rate for the weights). A p95 is at
    least the median, so neither may lie below its floor.
    """
    require_positive("ttft_ms", point.ttft_ms)
    require_positive("tpot_ms", point.tpot_ms)
    decode = decode_floor(point.model, gpu, point.batch, point.context_tokens)
    prefill = prefill_floor(point.model, gpu, point.prompt_tokens, peak_tflops)
    return FloorComparison(point=point, decode=decode, prefill=prefill,
                           tpot_to_floor=point.tpot_ms / (decode.step_time_s * MS_PER_SECOND),
                           ttft_to_floor=point.ttft_ms / (prefill.time_s * MS_PER_SECOND))


def furthest_below_floor(comparisons: Sequence[FloorComparison]) -> FloorComparison | None:
    """Returns the comparison with the lowest measured-to-floor ratio (the first among equals); None for none."""
    return min(comparisons, key=lambda c: c.to_floor, default=None)


def representative_points(points: Sequence[MeasuredPoint], tensor_parallel: int,
                          prompt_tokens: int) -> tuple[MeasuredPoint, ...]:
    """Returns the points that measure the planned replica: its tensor parallelism, prompts at least as long.

    A point at another tensor parallelism measures another replica; one with shorter prompts than the workload's
    understates its prefill (TTFT grows with the prompt), so neither sizes the plan.
    """
    return tuple(p for p in points if p.tensor_parallel == tensor_parallel and p.prompt_tokens >= prompt_tokens)


@dataclass(frozen=True)
class MeasuredCapacity:
    """The largest measured batch within the SLOs, the requests/s per replica it gives, and the replicas needed."""

    feasible: bool  # some measured batch meets both SLOs
    point: MeasuredPoint | None  # the measured point that sizes the plan; None when none meets the SLOs
    rps_per_replica: float  # 0 when none
    replicas: ReplicaCount | None
    replicas_needed: int | None
    gpus_needed: int | None  # replicas × tp
    reason: str  # one sentence on what limits the batch

    @property
    def batch(self) -> int:
        return self.point.batch if self.point is not None else 0


def measured_capacity(points: Sequence[MeasuredPoint], output_tokens: int, traffic: Traffic,
                      slo: Slo) -> MeasuredCapacity:
    """Returns the serving capacity the measured points give one replica (seed 004, steps 6 and 7).

    The largest measured batch whose p95 TTFT and TPOT are within the SLOs decides (a batch measured more than
    once meets them only if every point at it does, and its slowest point counts); requests/s per replica =
    batch / (TTFT + output_tokens × TPOT) by Little's law, the estimator the modelled plan uses
    (:func:`requests_per_s_per_replica`); replicas = ceil(rps × peak × (1 + headroom) / rps per replica)
    (:func:`replicas_needed`); GPUs = replicas × the points' tensor parallelism. ``points`` measure one replica
    shape (:func:`representative_points`) and are not empty.
    """
    require_positive_int("output_tokens", output_tokens)
    if not points:
        raise ValueError("measured_capacity needs at least one measured point")
    by_batch: dict[int, list[MeasuredPoint]] = defaultdict(list)
    for point in points:
        by_batch[point.batch].append(point)
    meeting = [batch for batch, at in by_batch.items() if all(p.meets(slo) for p in at)]
    if not meeting:
        smallest = min(by_batch)
        first = max(by_batch[smallest], key=lambda p: (p.ttft_ms, p.tpot_ms))
        reason = (f"no measured batch meets both SLOs: the smallest measured, batch {smallest}, has p95 TTFT "
                  f"{first.ttft_ms:g} ms (SLO {slo.ttft_ms_p95:g} ms) and TPOT {first.tpot_ms:g} ms "
                  f"(SLO {slo.tpot_ms_p95:g} ms)")
        return MeasuredCapacity(False, None, 0.0, None, None, None, reason)

    best = max(meeting)

    def rps(point: MeasuredPoint) -> float:
        return requests_per_s_per_replica(best, point.ttft_ms / MS_PER_SECOND, output_tokens,
                                          point.tpot_ms / MS_PER_SECOND)

    chosen = min(by_batch[best], key=rps)
    larger = sorted(batch for batch in by_batch if batch > best)
    if not larger:
        reason = f"the largest batch measured ({best})"
    else:
        following = by_batch[larger[0]]
        missed = [name for name, late in (("TTFT", any(p.ttft_ms > slo.ttft_ms_p95 for p in following)),
                                          ("TPOT", any(p.tpot_ms > slo.tpot_ms_p95 for p in following))) if late]
        reason = f"the next measured batch, {larger[0]}, misses the {' and '.join(missed)} SLO"
    per_replica = rps(chosen)
    count = replicas_needed(traffic.rps, traffic.peak_factor, traffic.headroom, per_replica)
    return MeasuredCapacity(True, chosen, per_replica, count, count.total_replicas,
                            count.total_replicas * chosen.tensor_parallel, reason)

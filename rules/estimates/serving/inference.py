"""Serving capacity: the largest batch a replica runs within the latency SLOs, and the replicas peak traffic needs.

Pure arithmetic: no I/O, no configuration. Efficiencies, reserves and hardware figures are inputs, so the
caller (a check, with thresholds from the policy file) decides what to assume. ``rps`` requests per second,
``_ms`` milliseconds.

Sources:
- Little 1961, "A proof for the queuing formula L = λW", Operations Research 9(3): 383–387.
- The capacity-planning guide, "GPU Capacity Planning for AI Training & Serving", steps 4 to 7.
- The roofline latency model of rules/estimates/serving/inference_latency.py and the KV-cache budget of
  rules/estimates/serving/inference_memory.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rules.estimates._args import (
    require_fraction,
    require_non_negative,
    require_non_negative_int,
    require_positive,
    require_positive_int,
)
from rules.estimates.model.hardware import GpuSpec
from rules.estimates.ratios import spare_fraction
from rules.estimates.serving.inference_latency import Roofline, ServedModel, decode_step, prefill_time_s
from rules.estimates.serving.inference_memory import ConcurrencyBudget, ServingEngine, max_concurrent_sequences
from rules.units import TB, TFLOPS

# Relative slack so that float noise (100 × 3 × 1.2 / 15 = 24.000000000000004) does not add a replica.
_CEIL_SLACK = 1e-9


def _ceil(value: float) -> int:
    """Return ceil(value), ignoring float noise just above an integer."""
    return math.ceil(value - _CEIL_SLACK * max(1.0, abs(value)))


@dataclass(frozen=True)
class Requests:
    """The requests a replica serves: prompt and output lengths, and the context each reserves."""

    prompt_tokens: int
    output_tokens: int
    context_tokens: int | None = None  # KV cache reserved per sequence; None: prompt + output


@dataclass(frozen=True)
class Traffic:
    """The traffic to carry: average requests/s, the peak over the average, and the headroom on top."""

    rps: float
    peak_factor: float
    headroom: float


@dataclass(frozen=True)
class Slo:
    """The latency objectives, at the 95th percentile."""

    ttft_ms_p95: float  # time to first token
    tpot_ms_p95: float  # time per output token


def requests_per_s_per_replica(batch: int, ttft_s: float, output_tokens: int, tpot_s: float) -> float:
    """Return the requests/s a replica completes with ``batch`` in flight (Little's law, Little 1961).

    L = λW, so λ = L / W with L = ``batch`` requests in flight and W = TTFT + output_tokens × TPOT the
    time each spends in the system. Batch 0 gives 0.
    """
    require_non_negative_int("batch", batch)
    require_non_negative("ttft_s", ttft_s)
    require_positive_int("output_tokens", output_tokens)
    require_non_negative("tpot_s", tpot_s)
    if batch == 0:
        return 0.0
    residence_s = ttft_s + output_tokens * tpot_s
    require_positive("ttft_s + output_tokens × tpot_s", residence_s)
    return batch / residence_s


@dataclass(frozen=True)
class ReplicaCount:
    """Replicas needed for peak traffic, split into those the peak needs and the spares the headroom adds."""

    peak_rps: float  # average rps × peak factor
    peak_replicas: int  # ceil(peak rps / rps per replica)
    spare_replicas: int  # total − peak
    total_replicas: int  # ceil(peak rps × (1 + headroom) / rps per replica)


def _require_demand(rps: float, peak_factor: float, headroom: float) -> None:
    """Raise ValueError unless rps >= 0, peak_factor > 0 and headroom >= 0 (all finite)."""
    require_non_negative("rps", rps)
    require_positive("peak_factor", peak_factor)
    require_non_negative("headroom", headroom)


def replicas_needed(rps: float, peak_factor: float, headroom: float, rps_per_replica: float) -> ReplicaCount:
    """Return the replicas needed to carry ``rps`` at peak with headroom (seed 004, step 7).

    total = ceil(rps × peak_factor × (1 + headroom) / rps_per_replica). The seed's example: 100 RPS
    average, peak 300 (factor 3), 15 RPS per GPU, 20 % headroom → 20 for the peak + 4 spare = 24.
    """
    _require_demand(rps, peak_factor, headroom)
    require_positive("rps_per_replica", rps_per_replica)
    peak_rps = rps * peak_factor
    peak_replicas = _ceil(peak_rps / rps_per_replica)
    total = max(peak_replicas, _ceil(peak_rps * (1.0 + headroom) / rps_per_replica))
    return ReplicaCount(
        peak_rps=peak_rps,
        peak_replicas=peak_replicas,
        spare_replicas=total - peak_replicas,
        total_replicas=total,
    )


@dataclass(frozen=True)
class BatchPoint:
    """Latency and throughput of one replica running ``batch`` sequences at once."""

    batch: int
    ttft_ms: float  # prefill of the batch's prompts (see serving_plan)
    tpot_ms: float  # decode step at the batch's average context
    rps_per_replica: float  # Little's law
    memory_bound: bool  # whether the decode step is bandwidth-bound
    meets_slo: bool  # ttft_ms <= ttft SLO and tpot_ms <= tpot SLO


@dataclass(frozen=True)
class ServingPlan:
    """The largest batch a replica can run within the latency SLOs, and the replicas and GPUs it implies."""

    concurrency: ConcurrencyBudget  # per GPU of a replica
    points: tuple[BatchPoint, ...]  # batch 1 .. min(max_sequences, max_num_seqs)
    feasible: bool  # some batch meets both SLOs
    batch: int  # largest batch meeting both SLOs; 0 when none does
    ttft_ms: float  # at ``batch``; 0 when none
    tpot_ms: float  # at ``batch``; 0 when none
    rps_per_replica: float  # at ``batch``; 0 when none
    replicas: ReplicaCount | None  # None when no batch meets the SLOs
    replicas_needed: int | None  # None when no batch meets the SLOs (never 0 for "cannot be served")
    gpus_needed: int | None  # replicas_needed × tp; None when no batch meets the SLOs
    tensor_parallel: int
    reason: str  # one sentence on what limits the batch

    @property
    def chosen_point(self) -> BatchPoint | None:
        """Returns the point of the chosen batch; None when no batch meets the SLOs."""
        return self.points[self.batch - 1] if self.feasible else None



@dataclass(frozen=True)
class ModelledLatency:
    """The roofline's TTFT and TPOT of one replica running ``batch`` sequences (see :func:`serving_plan`)."""

    batch: int
    ttft_s: float  # prefill of the batch's prompts, at least one weight read
    tpot_s: float  # decode step at the batch's average context
    memory_bound: bool  # whether the decode step is bandwidth-bound


def modelled_latency(model: ServedModel, gpu: GpuSpec, requests: Requests, roofline: Roofline,
                     batch: int) -> ModelledLatency:
    """Returns the roofline's TTFT and TPOT at ``batch`` (steps 2 and 3 of :func:`serving_plan`).

    TTFT = max(:func:`prefill_time_s` of ``batch`` prompts, the weights read once at the roofline's HBM share);
    TPOT = :func:`decode_step` at the average context prompt + output // 2. A mixture of experts (``model.experts``)
    prefills at 2·N_active per token, reads the weights the batch's prompt tokens touch, and adds the expert-parallel
    all-to-all of those tokens to the TTFT (rules/estimates/serving/experts.py).
    """
    tp = model.tensor_parallel
    prompt_tokens = requests.prompt_tokens * batch
    weight_read_s = model.weight_bytes_read(prompt_tokens) / tp / (gpu.hbm_tbs * TB * roofline.hbm_efficiency)
    prefill_s = prefill_time_s(model.flops_parameters, requests.prompt_tokens, batch, tp, gpu.bf16_tflops,
                               roofline.prefill_efficiency)
    step = decode_step(model, gpu, roofline, batch, requests.prompt_tokens + requests.output_tokens // 2)
    ttft_s = max(prefill_s, weight_read_s)
    if model.experts is not None:
        ttft_s += model.expert_comm_s(prompt_tokens)
    return ModelledLatency(batch=batch, ttft_s=ttft_s, tpot_s=step.step_time_s, memory_bound=step.memory_bound)


def _batch_points(model: ServedModel, gpu: GpuSpec, requests: Requests, roofline: Roofline, slo: Slo,
                  largest: int) -> list[BatchPoint]:
    """Returns the points of batches 1 .. ``largest``: :func:`modelled_latency` and
    :func:`requests_per_s_per_replica` at each, with the same arithmetic in the same order.

    The arguments are validated once, at batch 1, rather than at every batch; the terms that do not depend
    on the batch are computed once. A batch whose figures are not finite and positive (inputs of absurd
    magnitude) goes through the validating functions, which refuse it as they always did.
    """
    if largest < 1:
        return []
    if model.experts is not None:  # the weights read vary with the batch: each point from modelled_latency itself
        return [_point(model, gpu, requests, roofline, slo, batch) for batch in range(1, largest + 1)]
    modelled_latency(model, gpu, requests, roofline, 1)  # raises for arguments any batch would refuse
    tp, output_tokens = model.tensor_parallel, requests.output_tokens
    hbm_bytes_per_s = gpu.hbm_tbs * TB * roofline.hbm_efficiency
    weights_per_gpu = model.weight_bytes / tp
    weight_read_s = weights_per_gpu / hbm_bytes_per_s
    prefill_flops_per_batch = 2.0 * model.parameters * requests.prompt_tokens
    prefill_flops_per_s = tp * gpu.bf16_tflops * TFLOPS * roofline.prefill_efficiency
    decode_flops_per_batch = 2.0 * model.parameters
    decode_flops_per_s = tp * gpu.bf16_tflops * TFLOPS * roofline.flops_efficiency
    context_tokens = requests.prompt_tokens + requests.output_tokens // 2
    kv_bytes_per_token = model.kv_bytes_per_token_per_gpu
    ttft_slo_ms, tpot_slo_ms = slo.ttft_ms_p95, slo.tpot_ms_p95
    new_point = object.__new__
    points = []
    for batch in range(1, largest + 1):
        memory_s = (weights_per_gpu + batch * context_tokens * kv_bytes_per_token) / hbm_bytes_per_s
        compute_s = decode_flops_per_batch * batch / decode_flops_per_s
        prefill_s = prefill_flops_per_batch * batch / prefill_flops_per_s
        # max(a, b) without the call, as max answers it: b only when b > a (a tie, or a NaN, gives a).
        ttft_s = weight_read_s if weight_read_s > prefill_s else prefill_s
        tpot_s = compute_s if compute_s > memory_s else memory_s
        residence_s = ttft_s + output_tokens * tpot_s
        if not 0 < residence_s < math.inf:
            latency = modelled_latency(model, gpu, requests, roofline, batch)
            rps = requests_per_s_per_replica(batch, latency.ttft_s, output_tokens, latency.tpot_s)
        else:
            rps = batch / residence_s
        ttft_ms, tpot_ms = ttft_s * 1e3, tpot_s * 1e3
        # The frozen dataclass's __init__ sets its six fields one object.__setattr__ at a time, which costs
        # more than the arithmetic of the point: its fields are put in its __dict__ at once instead.
        point = new_point(BatchPoint)
        point.__dict__.update(batch=batch, ttft_ms=ttft_ms, tpot_ms=tpot_ms, rps_per_replica=rps,
                              memory_bound=memory_s >= compute_s,
                              meets_slo=ttft_ms <= ttft_slo_ms and tpot_ms <= tpot_slo_ms)
        points.append(point)
    return points


def _point(model: ServedModel, gpu: GpuSpec, requests: Requests, roofline: Roofline, slo: Slo,
           batch: int) -> BatchPoint:
    """Returns the point of ``batch``: :func:`modelled_latency` and :func:`requests_per_s_per_replica` at it."""
    latency = modelled_latency(model, gpu, requests, roofline, batch)
    ttft_ms, tpot_ms = latency.ttft_s * 1e3, latency.tpot_s * 1e3
    return BatchPoint(batch=batch, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                      rps_per_replica=requests_per_s_per_replica(batch, latency.ttft_s, requests.output_tokens,
                                                                 latency.tpot_s),
                      memory_bound=latency.memory_bound,
                      meets_slo=ttft_ms <= slo.ttft_ms_p95 and tpot_ms <= slo.tpot_ms_p95)


def serving_plan(model: ServedModel, gpu: GpuSpec, engine: ServingEngine, requests: Requests, traffic: Traffic,
                 slo: Slo, roofline: Roofline) -> ServingPlan:
    """Return the serving plan of one model on replicas of tp GPUs: best batch, rps, replicas, GPUs.

    Steps (seed 004, steps 4–7, with the roofline of the reference README, Serving):

    1. Concurrency per GPU from :func:`max_concurrent_sequences` with each sequence reserving
       ``context_tokens`` of KV cache (default prompt + output; pass vLLM's ``max_model_len`` for its
       worst case). Batches 1 .. min(that, ``max_num_seqs``) are scanned; ``max_num_seqs`` is vLLM's
       scheduler cap (default 256).
    2. TTFT model (deliberately pessimistic, no queueing theory): a request's first token comes out of
       the prefill forward pass, and we assume it is prefilled together with the prompts of the whole
       batch (a burst that refills the batch, as at peak), so TTFT(b) = max(prefill of b prompts,
       one weight read) — the prefill from :func:`prefill_time_s`, floored at the memory time of
       streaming the weights once (a forward pass cannot be faster). Waiting for a free slot is not
       modelled: replicas are sized so that slots are free, and the headroom covers bursts.
    3. TPOT(b) = :func:`decode_step_time_s` at batch b with the average context
       prompt + output / 2.
    4. The largest b with TTFT ≤ ``ttft_ms_p95`` and TPOT ≤ ``tpot_ms_p95``; both grow with b.
    5. rps per replica = b / (TTFT + output × TPOT) (Little's law), replicas =
       ceil(rps × peak_factor × (1 + headroom) / rps per replica) (:func:`replicas_needed`), GPUs =
       replicas × tp.

    ``roofline.flops_efficiency`` applies to the decode step's compute time and, unless
    ``roofline.prefill_flops_efficiency`` is given, to the prefill as well (prefill runs large matrix products
    and usually reaches a higher share of peak than decode does).

    When no batch meets the SLOs (or not even one sequence fits) the plan says so: ``feasible`` False,
    batch 0, rps 0, replicas and GPUs None, and ``reason`` explains.
    """
    ttft_ms_p95, tpot_ms_p95 = slo.ttft_ms_p95, slo.tpot_ms_p95
    prompt_tokens, output_tokens = requests.prompt_tokens, requests.output_tokens
    tp, max_num_seqs = model.tensor_parallel, engine.max_num_seqs
    require_positive("ttft_ms_p95", ttft_ms_p95)
    require_positive("tpot_ms_p95", tpot_ms_p95)
    require_positive_int("prompt_tokens", prompt_tokens)
    require_positive_int("output_tokens", output_tokens)
    require_positive_int("tp", tp)
    require_positive_int("max_num_seqs", max_num_seqs)
    require_positive("weight_bytes", model.weight_bytes)
    context_tokens = requests.context_tokens
    if context_tokens is None:
        context_tokens = prompt_tokens + output_tokens
    prefill_flops_efficiency = roofline.prefill_efficiency
    require_fraction("prefill_flops_efficiency", prefill_flops_efficiency)
    # Validate the demand side up front, so an infeasible plan still rejects bad inputs.
    _require_demand(traffic.rps, traffic.peak_factor, traffic.headroom)

    concurrency = max_concurrent_sequences(
        gpu.capacity_bytes,
        engine.gpu_memory_utilization,
        model.weight_bytes / tp,
        engine.reserve_bytes,
        model.kv_bytes_per_token_per_gpu,
        context_tokens,
        block_size_tokens=engine.block_size_tokens,
    )
    points = _batch_points(model, gpu, requests, roofline, slo, min(concurrency.max_sequences, max_num_seqs))

    meeting = [p for p in points if p.meets_slo]
    if not meeting:
        if concurrency.max_sequences == 0:
            reason = (
                "no sequence of the context fits: weights and reserve leave "
                f"{concurrency.kv_budget_bytes:.0f} bytes of KV budget per GPU, one sequence needs "
                f"{concurrency.kv_bytes_per_sequence:.0f}"
            )
        else:
            first = points[0]
            reason = (
                f"even batch 1 misses the SLOs: TTFT {first.ttft_ms:.1f} ms "
                f"(SLO {ttft_ms_p95} ms), TPOT {first.tpot_ms:.2f} ms (SLO {tpot_ms_p95} ms)"
            )
        return ServingPlan(
            concurrency=concurrency,
            points=tuple(points),
            feasible=False,
            batch=0,
            ttft_ms=0.0,
            tpot_ms=0.0,
            rps_per_replica=0.0,
            replicas=None,
            replicas_needed=None,
            gpus_needed=None,
            tensor_parallel=tp,
            reason=reason,
        )

    best = max(meeting, key=lambda p: p.batch)
    if best.batch == points[-1].batch:
        if best.batch == max_num_seqs and concurrency.max_sequences > max_num_seqs:
            reason = f"batch capped by max_num_seqs ({max_num_seqs})"
        else:
            reason = f"batch limited by KV-cache memory ({concurrency.max_sequences} sequences per GPU)"
    else:
        following = points[best.batch]  # the point for batch best.batch + 1
        missed = [
            name
            for name, value, slo in (
                ("TTFT", following.ttft_ms, ttft_ms_p95),
                ("TPOT", following.tpot_ms, tpot_ms_p95),
            )
            if value > slo
        ]
        reason = f"batch limited by the {' and '.join(missed)} SLO"
    count = replicas_needed(traffic.rps, traffic.peak_factor, traffic.headroom, best.rps_per_replica)
    return ServingPlan(
        concurrency=concurrency,
        points=tuple(points),
        feasible=True,
        batch=best.batch,
        ttft_ms=best.ttft_ms,
        tpot_ms=best.tpot_ms,
        rps_per_replica=best.rps_per_replica,
        replicas=count,
        replicas_needed=count.total_replicas,
        gpus_needed=count.total_replicas * tp,
        tensor_parallel=tp,
        reason=reason,
    )



@dataclass(frozen=True)
class QuotedCapacity:
    """How the GPUs a plan needs compare with the GPUs quoted."""

    shortfall_gpus: int  # needed beyond the quote, 0 when it suffices
    spare_fraction: float  # of the quoted GPUs beyond the plan, 0 when short


def quoted_capacity(gpus_needed: int, gpus_quoted: int) -> QuotedCapacity:
    """Returns the shortfall max(0, needed − quoted) and the spare share max(0, 1 − needed / quoted).

    The capacity-planning guide, step 7: the GPUs for the peak plus the spares of the headroom (its example,
    20 + 4 = 24), set against what the quote has: 24 needed of 32 quoted leave 25 % beyond the plan.
    """
    return QuotedCapacity(max(0, gpus_needed - gpus_quoted), max(0.0, spare_fraction(gpus_needed, gpus_quoted)))

"""Serving estimates: weight and KV-cache memory, concurrency, latency and replica count.

Pure arithmetic: no I/O, no configuration. Efficiencies, reserves and hardware figures are parameters,
so the caller (a check, with thresholds from the policy file) decides what to assume.

Units live in names: ``_bytes`` bytes, ``_s`` seconds, ``_ms`` milliseconds, ``_tbs`` TB/s (10^12 B/s),
``_tflops`` 10^12 FLOP/s, ``rps`` requests per second. Decimal units throughout (GB = 10^9 bytes),
as on datasheets.

Sources:
- vLLM ``vllm/worker/cache_engine.py`` ``CacheEngine.get_cache_block_size`` (KV bytes per token) and
  ``ModelConfig.get_num_kv_heads`` (``max(1, total_num_kv_heads // tensor_parallel_size)``);
  ``vllm/worker/worker.py`` ``Worker.determine_num_available_blocks`` (KV budget =
  total memory × ``gpu_memory_utilization`` − peak non-KV memory).
- AutoGPTQ ``nn_modules/qlinear``: ``scales`` fp16 and ``qzeros`` packed at ``bits`` per value, one row
  per ``group_size`` input features (``BaseQuantizeConfig(bits=4, group_size=128)`` in its README);
  AutoAWQ README ``quant_config = {"zero_point": True, "q_group_size": 128, "w_bit": 4}``.
- Kaplan et al. 2020, "Scaling Laws for Neural Language Models", Table 1: forward pass ≈ 2N FLOPs per
  token (the attention term 2·n_layer·n_ctx·d_attn is left out).
- Williams, Waterman and Patterson 2009, "Roofline: an insightful visual performance model", CACM 52(4).
- Little 1961, "A proof for the queuing formula L = λW", Operations Research 9(3): 383–387.
- The capacity-planning guide, "GPU Capacity Planning for AI Training & Serving", steps 4 and 7.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rules.estimates._args import (
    require_choice,
    require_fraction,
    require_non_negative,
    require_non_negative_int,
    require_positive,
    require_positive_int,
)

__all__ = [
    "KV_PRECISION_BYTES",
    "WEIGHT_PRECISIONS",
    "BatchPoint",
    "ConcurrencyBudget",
    "DecodeStep",
    "KvCacheBytesPerToken",
    "ReplicaCount",
    "ServingPlan",
    "decode_step",
    "decode_step_time_s",
    "kv_cache_bytes_per_token",
    "max_concurrent_sequences",
    "prefill_time_s",
    "replicas_needed",
    "requests_per_s_per_replica",
    "serving_plan",
    "weight_bytes",
]

# Bytes per weight before any quantisation metadata.
_WEIGHT_ELEMENT_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}
WEIGHT_PRECISIONS: tuple[str, ...] = tuple(_WEIGHT_ELEMENT_BYTES)

# Bytes per KV-cache element (vLLM ``kv_cache_dtype``: auto = model dtype, or fp8).
KV_PRECISION_BYTES: dict[str, int] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
}

_FP16_SCALE_BYTES = 2.0  # GPTQ/AWQ store group scales as fp16
_FP32_SCALE_BYTES = 4.0  # per-channel int8 scales (SmoothQuant / vLLM W8A8) are fp32
_TERA = 1e12
# Relative slack so that float noise (100 × 3 × 1.2 / 15 = 24.000000000000004) does not add a replica.
_CEIL_SLACK = 1e-9


# --------------------------------------------------------------------------------------------------
# Helpers. Every public function rejects NaN, infinities and out-of-range inputs (rules.estimates._args),
# so that valid inputs can never produce NaN or negative outputs.


def _ceil(value: float) -> int:
    """Return ceil(value), ignoring float noise just above an integer."""
    return math.ceil(value - _CEIL_SLACK * max(1.0, abs(value)))


# --------------------------------------------------------------------------------------------------
# Memory


def weight_bytes(
    parameters: float,
    precision: str,
    group_size: int = 128,
    *,
    zero_point: bool = True,
    int8_channel_size: int = 4096,
) -> float:
    """Return the bytes that ``parameters`` weights occupy at ``precision``, quantisation metadata included.

    Per weight: fp32 4 B, bf16/fp16 2 B, fp8 1 B (one per-tensor scale per matrix: negligible, not
    counted), int8 1 B, int4 0.5 B.

    int4 (GPTQ/AWQ convention, AutoGPTQ ``qlinear`` buffers and AutoAWQ ``quant_config``): each group
    of ``group_size`` weights along the input dimension stores one fp16 scale (2 B) and, when
    ``zero_point`` (asymmetric; AWQ's default, and GPTQ checkpoints always store ``qzeros``), one
    zero point packed at 4 bits (0.5 B). Group size 128 with zero points: 0.5 + 2.5/128 ≈ 0.5195 B.

    int8 (per-channel, SmoothQuant / vLLM W8A8): one fp32 scale per output channel, i.e. per
    ``int8_channel_size`` weights (the layer's input features). The default 4096 is the hidden size of
    a 7B model, so for larger models this over-counts slightly (≤ 0.1 %).
    """
    require_positive("parameters", parameters)
    require_positive_int("group_size", group_size)
    require_positive_int("int8_channel_size", int8_channel_size)
    key = require_choice("weight precision", precision, _WEIGHT_ELEMENT_BYTES, ignore_case=True)
    per_weight = _WEIGHT_ELEMENT_BYTES[key]
    if key == "int4":
        group_metadata = _FP16_SCALE_BYTES + (0.5 if zero_point else 0.0)
        per_weight += group_metadata / group_size
    elif key == "int8":
        per_weight += _FP32_SCALE_BYTES / int8_channel_size
    return parameters * per_weight


@dataclass(frozen=True)
class KvCacheBytesPerToken:
    """KV-cache bytes one token occupies, for the whole model and on each tensor-parallel GPU."""

    whole_model_bytes: int  # 2 × layers × kv_heads × head_dim × bytes
    per_gpu_bytes: int  # same with the KV heads one GPU holds
    kv_heads_per_gpu: int  # max(1, kv_heads // tp): replicated once tp exceeds kv_heads
    tensor_parallel: int


def kv_cache_bytes_per_token(
    layers: int,
    kv_heads: int,
    head_dim: int,
    kv_precision: str,
    tensor_parallel: int = 1,
) -> KvCacheBytesPerToken:
    """Return KV-cache bytes per token, whole model and per GPU (vLLM ``CacheEngine.get_cache_block_size``).

    2 (K and V) × layers × kv_heads × head_dim × bytes per element, as vLLM sizes a cache block
    (divided by its block size). Under tensor parallelism each GPU holds
    ``max(1, kv_heads // tp)`` heads (vLLM ``ModelConfig.get_num_kv_heads``): once tp exceeds the KV
    heads they are replicated, so the per-GPU figure stops shrinking. vLLM itself refuses a tp that
    neither divides nor is a multiple of the KV heads; this function does not check that.
    """
    require_positive_int("layers", layers)
    require_positive_int("kv_heads", kv_heads)
    require_positive_int("head_dim", head_dim)
    require_positive_int("tensor_parallel", tensor_parallel)
    key = require_choice("KV-cache precision", kv_precision, KV_PRECISION_BYTES, ignore_case=True)
    element_bytes = KV_PRECISION_BYTES[key]
    heads_per_gpu = max(1, kv_heads // tensor_parallel)
    return KvCacheBytesPerToken(
        whole_model_bytes=2 * layers * kv_heads * head_dim * element_bytes,
        per_gpu_bytes=2 * layers * heads_per_gpu * head_dim * element_bytes,
        kv_heads_per_gpu=heads_per_gpu,
        tensor_parallel=tensor_parallel,
    )


@dataclass(frozen=True)
class ConcurrencyBudget:
    """How many full-context sequences one GPU's KV cache holds, and the memory split behind it."""

    usable_bytes: float  # capacity × gpu_memory_utilization
    kv_budget_bytes: float  # usable − weights − reserve, floored at 0
    shortfall_bytes: float  # how far weights + reserve exceed usable memory; 0 when they fit
    kv_bytes_per_sequence: float  # per GPU, context rounded up to whole blocks
    kv_blocks: int  # whole KV blocks the budget holds
    max_sequences: int  # floor, >= 0


def max_concurrent_sequences(
    capacity_bytes: float,
    gpu_memory_utilization: float,
    weight_bytes_per_gpu: float,
    reserve_bytes: float,
    kv_bytes_per_token_per_gpu: float,
    context_tokens: int,
    *,
    block_size_tokens: int = 16,
) -> ConcurrencyBudget:
    """Return the KV budget and the number of ``context_tokens``-long sequences it holds (vLLM semantics).

    vLLM ``Worker.determine_num_available_blocks``: usable = capacity × ``gpu_memory_utilization``;
    KV budget = usable − weights − activation/workspace reserve (vLLM measures the latter with a
    profiling forward pass; here it is the caller's ``reserve_bytes``). The budget is cut into blocks of
    ``block_size_tokens`` tokens (vLLM default 16) and each sequence takes ceil(context / block) blocks,
    as vLLM's "maximum concurrency" report does. ``block_size_tokens=1`` gives the plain
    floor(budget / (bytes per token × context)).
    """
    require_positive("capacity_bytes", capacity_bytes)
    require_fraction("gpu_memory_utilization", gpu_memory_utilization)
    require_non_negative("weight_bytes_per_gpu", weight_bytes_per_gpu)
    require_non_negative("reserve_bytes", reserve_bytes)
    require_positive("kv_bytes_per_token_per_gpu", kv_bytes_per_token_per_gpu)
    require_positive_int("context_tokens", context_tokens)
    require_positive_int("block_size_tokens", block_size_tokens)

    usable = capacity_bytes * gpu_memory_utilization
    remaining = usable - weight_bytes_per_gpu - reserve_bytes
    kv_budget = max(0.0, remaining)
    block_bytes = kv_bytes_per_token_per_gpu * block_size_tokens
    blocks = int(kv_budget // block_bytes)
    blocks_per_sequence = -(-context_tokens // block_size_tokens)
    return ConcurrencyBudget(
        usable_bytes=usable,
        kv_budget_bytes=kv_budget,
        shortfall_bytes=max(0.0, -remaining),
        kv_bytes_per_sequence=blocks_per_sequence * block_bytes,
        kv_blocks=blocks,
        max_sequences=blocks // blocks_per_sequence,
    )


# --------------------------------------------------------------------------------------------------
# Latency (one replica = tp GPUs)


def prefill_time_s(
    parameters: float,
    prompt_tokens: int,
    batch: int,
    tp: int,
    bf16_tflops: float,
    efficiency: float,
) -> float:
    """Return the seconds one replica needs to prefill ``batch`` prompts (compute-bound, Kaplan et al. 2020).

    2·N·prompt_tokens·batch / (tp × peak FLOP/s × efficiency): forward pass ≈ 2N FLOPs per token
    (Kaplan et al. 2020, Table 1), the attention term neglected (it matters only when the context is
    comparable to 12 × hidden). ``bf16_tflops`` is the dense datasheet peak of one GPU; tensor
    parallelism is assumed to scale perfectly, the all-reduces being folded into ``efficiency``.
    """
    require_positive("parameters", parameters)
    require_positive_int("prompt_tokens", prompt_tokens)
    require_positive_int("batch", batch)
    require_positive_int("tp", tp)
    require_positive("bf16_tflops", bf16_tflops)
    require_fraction("efficiency", efficiency)
    flops = 2.0 * parameters * prompt_tokens * batch
    return flops / (tp * bf16_tflops * _TERA * efficiency)


@dataclass(frozen=True)
class DecodeStep:
    """One decode step of a replica on the roofline: the memory and compute times and which one binds."""

    memory_time_s: float  # bytes read per GPU / (HBM bandwidth × efficiency)
    compute_time_s: float  # 2·N·batch / (tp × peak × efficiency)
    step_time_s: float  # the larger of the two
    bytes_read_per_gpu: float  # weights / tp + the batch's KV cache
    memory_bound: bool


def decode_step(
    weight_bytes: float,
    kv_bytes_per_token_per_gpu: float,
    batch: int,
    context_tokens: int,
    tp: int,
    hbm_tbs: float,
    hbm_efficiency: float,
    parameters: float,
    bf16_tflops: float,
    flops_efficiency: float,
) -> DecodeStep:
    """Return the roofline breakdown of one decode step (Williams et al. 2009; reference README, Serving).

    Each step generates one token for each of ``batch`` sequences. Every GPU streams its shard of the
    weights (``weight_bytes`` / tp) and the KV cache of the batch
    (batch × context_tokens × ``kv_bytes_per_token_per_gpu``) from HBM, and performs 2·N·batch / tp
    FLOPs (Kaplan et al. 2020). The step takes at least the larger of the memory time and the compute
    time. ``weight_bytes`` is the whole model; ``hbm_tbs`` and ``bf16_tflops`` are one GPU's datasheet
    figures.
    """
    require_positive("weight_bytes", weight_bytes)
    require_non_negative("kv_bytes_per_token_per_gpu", kv_bytes_per_token_per_gpu)
    require_positive_int("batch", batch)
    require_non_negative_int("context_tokens", context_tokens)
    require_positive_int("tp", tp)
    require_positive("hbm_tbs", hbm_tbs)
    require_fraction("hbm_efficiency", hbm_efficiency)
    require_positive("parameters", parameters)
    require_positive("bf16_tflops", bf16_tflops)
    require_fraction("flops_efficiency", flops_efficiency)

    bytes_read = weight_bytes / tp + batch * context_tokens * kv_bytes_per_token_per_gpu
    memory_time = bytes_read / (hbm_tbs * _TERA * hbm_efficiency)
    compute_time = 2.0 * parameters * batch / (tp * bf16_tflops * _TERA * flops_efficiency)
    return DecodeStep(
        memory_time_s=memory_time,
        compute_time_s=compute_time,
        step_time_s=max(memory_time, compute_time),
        bytes_read_per_gpu=bytes_read,
        memory_bound=memory_time >= compute_time,
    )


def decode_step_time_s(
    weight_bytes: float,
    kv_bytes_per_token_per_gpu: float,
    batch: int,
    context_tokens: int,
    tp: int,
    hbm_tbs: float,
    hbm_efficiency: float,
    parameters: float,
    bf16_tflops: float,
    flops_efficiency: float,
) -> float:
    """Return the seconds of one decode step on the roofline (Williams et al. 2009; reference README).

    max((weight_bytes / tp + batch × context × KV bytes per token per GPU) / (HBM × efficiency),
    2·N·batch / (tp × peak × efficiency)). See :func:`decode_step` for the breakdown.
    """
    return decode_step(
        weight_bytes,
        kv_bytes_per_token_per_gpu,
        batch,
        context_tokens,
        tp,
        hbm_tbs,
        hbm_efficiency,
        parameters,
        bf16_tflops,
        flops_efficiency,
    ).step_time_s


# --------------------------------------------------------------------------------------------------
# Throughput and replicas


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


def serving_plan(
    *,
    parameters: float,
    weight_bytes: float,
    kv_bytes_per_token_per_gpu: float,
    tp: int,
    capacity_bytes: float,
    gpu_memory_utilization: float,
    reserve_bytes: float,
    prompt_tokens: int,
    output_tokens: int,
    hbm_tbs: float,
    bf16_tflops: float,
    hbm_efficiency: float,
    flops_efficiency: float,
    ttft_ms_p95: float,
    tpot_ms_p95: float,
    rps: float,
    peak_factor: float,
    headroom: float,
    context_tokens: int | None = None,
    block_size_tokens: int = 16,
    max_num_seqs: int = 256,
    prefill_flops_efficiency: float | None = None,
) -> ServingPlan:
    """Return the serving plan of one model on replicas of ``tp`` GPUs: best batch, rps, replicas, GPUs.

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

    ``flops_efficiency`` applies to the decode step's compute time and, unless
    ``prefill_flops_efficiency`` is given, to the prefill as well (prefill runs large matrix products and
    usually reaches a higher share of peak than decode does).

    When no batch meets the SLOs (or not even one sequence fits) the plan says so: ``feasible`` False,
    batch 0, rps 0, replicas and GPUs None, and ``reason`` explains.
    """
    require_positive("ttft_ms_p95", ttft_ms_p95)
    require_positive("tpot_ms_p95", tpot_ms_p95)
    require_positive_int("prompt_tokens", prompt_tokens)
    require_positive_int("output_tokens", output_tokens)
    require_positive_int("tp", tp)
    require_positive_int("max_num_seqs", max_num_seqs)
    require_positive("weight_bytes", weight_bytes)
    if context_tokens is None:
        context_tokens = prompt_tokens + output_tokens
    if prefill_flops_efficiency is None:
        prefill_flops_efficiency = flops_efficiency
    require_fraction("prefill_flops_efficiency", prefill_flops_efficiency)
    # Validate the demand side up front, so an infeasible plan still rejects bad inputs.
    _require_demand(rps, peak_factor, headroom)

    concurrency = max_concurrent_sequences(
        capacity_bytes,
        gpu_memory_utilization,
        weight_bytes / tp,
        reserve_bytes,
        kv_bytes_per_token_per_gpu,
        context_tokens,
        block_size_tokens=block_size_tokens,
    )
    weight_read_s = weight_bytes / tp / (hbm_tbs * _TERA * hbm_efficiency)
    average_context = prompt_tokens + output_tokens // 2

    points: list[BatchPoint] = []
    for batch in range(1, min(concurrency.max_sequences, max_num_seqs) + 1):
        prefill_s = prefill_time_s(parameters, prompt_tokens, batch, tp, bf16_tflops, prefill_flops_efficiency)
        ttft_s = max(prefill_s, weight_read_s)
        step = decode_step(
            weight_bytes,
            kv_bytes_per_token_per_gpu,
            batch,
            average_context,
            tp,
            hbm_tbs,
            hbm_efficiency,
            parameters,
            bf16_tflops,
            flops_efficiency,
        )
        ttft_ms = ttft_s * 1e3
        tpot_ms = step.step_time_s * 1e3
        points.append(
            BatchPoint(
                batch=batch,
                ttft_ms=ttft_ms,
                tpot_ms=tpot_ms,
                rps_per_replica=requests_per_s_per_replica(batch, ttft_s, output_tokens, step.step_time_s),
                memory_bound=step.memory_bound,
                meets_slo=ttft_ms <= ttft_ms_p95 and tpot_ms <= tpot_ms_p95,
            )
        )

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
    count = replicas_needed(rps, peak_factor, headroom, best.rps_per_replica)
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

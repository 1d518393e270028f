"""Serving latency on the roofline: prefill is compute-bound, a decode step reads the weights and the KV cache.

Pure arithmetic: no I/O, no configuration. Efficiencies and hardware figures are inputs, so the caller (a
check, with settings from the policy file) decides what to assume. ``_s`` seconds, ``_tbs`` TB/s (10^12 B/s),
``_tflops`` 10^12 FLOP/s.

Sources:
- Kaplan et al. 2020, "Scaling Laws for Neural Language Models", Table 1: forward pass ≈ 2N FLOPs per
  token (the attention term 2·n_layer·n_ctx·d_attn is left out).
- Williams, Waterman and Patterson 2009, "Roofline: an insightful visual performance model", CACM 52(4).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rules.estimates._args import (
    require_fraction,
    require_non_negative,
    require_non_negative_int,
    require_positive,
    require_positive_int,
)

_TERA = 1e12


@dataclass(frozen=True)
class ServedModel:
    """The model one replica of ``tensor_parallel`` GPUs serves, as its memory plan sized it."""

    parameters: float
    weight_bytes: float  # whole model, quantisation metadata included
    kv_bytes_per_token_per_gpu: float
    tensor_parallel: int


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's datasheet figures."""

    capacity_bytes: float
    hbm_tbs: float  # HBM bandwidth
    bf16_tflops: float  # dense BF16 peak


@dataclass(frozen=True)
class Roofline:
    """The shares of the datasheet figures serving achieves (policy inference.*_efficiency)."""

    hbm_efficiency: float  # of HBM bandwidth, decode
    flops_efficiency: float  # of peak FLOP/s, decode (and prefill unless given)
    prefill_flops_efficiency: float | None = None  # of peak FLOP/s, prefill

    @property
    def prefill_efficiency(self) -> float:
        return self.flops_efficiency if self.prefill_flops_efficiency is None else self.prefill_flops_efficiency


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


def decode_step(model: ServedModel, gpu: GpuSpec, roofline: Roofline, batch: int, context_tokens: int) -> DecodeStep:
    """Return the roofline breakdown of one decode step (Williams et al. 2009; reference README, Serving).

    Each step generates one token for each of ``batch`` sequences. Every GPU streams its shard of the
    weights (``weight_bytes`` / tp) and the KV cache of the batch
    (batch × context_tokens × ``kv_bytes_per_token_per_gpu``) from HBM, and performs 2·N·batch / tp
    FLOPs (Kaplan et al. 2020). The step takes at least the larger of the memory time and the compute
    time. ``weight_bytes`` is the whole model; ``hbm_tbs`` and ``bf16_tflops`` are one GPU's datasheet
    figures.
    """
    require_positive("weight_bytes", model.weight_bytes)
    require_non_negative("kv_bytes_per_token_per_gpu", model.kv_bytes_per_token_per_gpu)
    require_positive_int("batch", batch)
    require_non_negative_int("context_tokens", context_tokens)
    require_positive_int("tp", model.tensor_parallel)
    require_positive("hbm_tbs", gpu.hbm_tbs)
    require_fraction("hbm_efficiency", roofline.hbm_efficiency)
    require_positive("parameters", model.parameters)
    require_positive("bf16_tflops", gpu.bf16_tflops)
    require_fraction("flops_efficiency", roofline.flops_efficiency)

    tp = model.tensor_parallel
    bytes_read = model.weight_bytes / tp + batch * context_tokens * model.kv_bytes_per_token_per_gpu
    memory_time = bytes_read / (gpu.hbm_tbs * _TERA * roofline.hbm_efficiency)
    compute_time = 2.0 * model.parameters * batch / (tp * gpu.bf16_tflops * _TERA * roofline.flops_efficiency)
    return DecodeStep(
        memory_time_s=memory_time,
        compute_time_s=compute_time,
        step_time_s=max(memory_time, compute_time),
        bytes_read_per_gpu=bytes_read,
        memory_bound=memory_time >= compute_time,
    )


def decode_step_time_s(model: ServedModel, gpu: GpuSpec, roofline: Roofline, batch: int, context_tokens: int) -> float:
    """Return the seconds of one decode step on the roofline (Williams et al. 2009; reference README).

    max((weight_bytes / tp + batch × context × KV bytes per token per GPU) / (HBM × efficiency),
    2·N·batch / (tp × peak × efficiency)). See :func:`decode_step` for the breakdown.
    """
    return decode_step(model, gpu, roofline, batch, context_tokens).step_time_s


def decode_floor_s(model: ServedModel, gpu: GpuSpec) -> float:
    """Returns the bandwidth floor of one decode step: the weights streamed once at the full datasheet rate.

    :func:`decode_step` at batch 1, no KV cache and efficiencies of 1 (Williams et al. 2009): no decode step of
    this replica can be faster, whatever the batch.
    """
    return decode_step_time_s(replace(model, kv_bytes_per_token_per_gpu=0), gpu, Roofline(1.0, 1.0), 1, 0)

"""Serving latency on the roofline: prefill is compute-bound, a decode step reads the weights and the KV cache.

Pure arithmetic: no I/O, no configuration. Efficiencies and hardware figures are inputs, so the caller (a
check, with settings from the policy file) decides what to assume. ``_s`` seconds, ``_tbs`` TB/s (10^12 B/s),
``_tflops`` 10^12 FLOP/s.

Sources:
- Kaplan et al. 2020, "Scaling Laws for Neural Language Models", Table 1: forward pass ≈ 2N FLOPs per
  token (the attention term 2·n_layer·n_ctx·d_attn is left out).
- Williams, Waterman and Patterson 2009, "Roofline: an insightful visual performance model", CACM 52(4).
- Pope et al. 2022, "Efficiently Scaling Transformer Inference" (arXiv 2211.05102), section 2 (inference
  cost trade-offs): at small batch a decode step is bound by loading the weights and the KV cache from HBM,
  so its time is at least the bytes read over the memory bandwidth.
- Dense tensor-core peaks by operand width: NVIDIA A100 Tensor Core GPU Architecture whitepaper (BF16 312,
  INT8 624, INT4 1,248 dense TOPS); NVIDIA H100 Tensor Core GPU datasheet, H100 SXM (BF16 989, FP8 1,979,
  INT8 1,979 dense); NVIDIA DGX B200 datasheet, 8 GPUs (FP8 72 PFLOPS and FP4 144 PFLOPS with sparsity:
  4.5 and 9 PFLOPS dense per GPU against BF16 2.25).
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.estimates._args import (
    require_choice,
    require_fraction,
    require_non_negative,
    require_non_negative_int,
    require_positive,
    require_positive_int,
)
from rules.estimates.model.hardware import GpuSpec
from rules.estimates.serving.experts import ServedExperts
from rules.units import TB, TFLOPS


@dataclass(frozen=True)
class ServedModel:
    """The model one replica of ``tensor_parallel`` GPUs serves, as its memory plan sized it."""

    parameters: float
    weight_bytes: float  # whole model, quantisation metadata included
    kv_bytes_per_token_per_gpu: float
    tensor_parallel: int
    experts: ServedExperts | None = None  # a mixture of experts (rules/estimates/serving/experts.py); None: dense

    @property
    def flops_parameters(self) -> float:
        """Returns N of the 2·N FLOPs per token: a mixture of experts' active parameters, else all of them."""
        return self.parameters if self.experts is None else self.experts.active_parameters

    def weight_bytes_read(self, tokens: float) -> float:
        """Returns the whole model's weight bytes a forward pass over ``tokens`` tokens reads: all of them, of a
        mixture of experts those it touches (:meth:`ServedExperts.touched_weight_bytes`)."""
        if self.experts is None:
            return self.weight_bytes
        return self.experts.touched_weight_bytes(self.weight_bytes, tokens)

    def expert_comm_s(self, tokens: float) -> float:
        """Returns the expert-parallel all-to-all seconds of a forward pass over ``tokens`` tokens (0: none)."""
        return 0.0 if self.experts is None else self.experts.all_to_all_s(tokens, self.tensor_parallel)


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
    return flops / (tp * bf16_tflops * TFLOPS * efficiency)



@dataclass(frozen=True)
class DecodeStep:
    """One decode step of a replica on the roofline: the memory and compute times and which one binds."""

    memory_time_s: float  # bytes read per GPU / (HBM bandwidth × efficiency)
    compute_time_s: float  # 2·N·batch / (tp × peak × efficiency)
    step_time_s: float  # the larger of the two, plus the expert all-to-all
    bytes_read_per_gpu: float  # weights (of a mixture of experts, those the batch touches) / tp + the batch's KV cache
    memory_bound: bool
    all_to_all_s: float = 0.0  # a mixture of experts' expert-parallel dispatch and combine


def decode_step(model: ServedModel, gpu: GpuSpec, roofline: Roofline, batch: int, context_tokens: int) -> DecodeStep:
    """Return the roofline breakdown of one decode step (Williams et al. 2009; reference README, Serving).

    Each step generates one token for each of ``batch`` sequences. Every GPU streams its shard of the
    weights (``weight_bytes`` / tp) and the KV cache of the batch
    (batch × context_tokens × ``kv_bytes_per_token_per_gpu``) from HBM, and performs 2·N·batch / tp
    FLOPs (Kaplan et al. 2020). The step takes at least the larger of the memory time and the compute
    time. ``weight_bytes`` is the whole model; ``hbm_tbs`` and ``bf16_tflops`` are one GPU's datasheet
    figures. A mixture of experts (rules/estimates/serving/experts.py) reads the weights the batch's tokens touch,
    computes 2·N_active·batch, and adds its expert-parallel all-to-all (not overlapped).
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
    bytes_read = model.weight_bytes_read(batch) / tp + batch * context_tokens * model.kv_bytes_per_token_per_gpu
    memory_time = bytes_read / (gpu.hbm_tbs * TB * roofline.hbm_efficiency)
    compute_time = 2.0 * model.flops_parameters * batch / (tp * gpu.bf16_tflops * TFLOPS * roofline.flops_efficiency)
    comm = model.expert_comm_s(batch)
    step = max(memory_time, compute_time)
    return DecodeStep(
        memory_time_s=memory_time,
        compute_time_s=compute_time,
        step_time_s=step + comm if comm else step,
        bytes_read_per_gpu=bytes_read,
        memory_bound=memory_time >= compute_time,
        all_to_all_s=comm,
    )


def decode_step_time_s(model: ServedModel, gpu: GpuSpec, roofline: Roofline, batch: int, context_tokens: int) -> float:
    """Return the seconds of one decode step on the roofline (Williams et al. 2009; reference README).

    max((weight_bytes / tp + batch × context × KV bytes per token per GPU) / (HBM × efficiency),
    2·N·batch / (tp × peak × efficiency)). See :func:`decode_step` for the breakdown.
    """
    return decode_step(model, gpu, roofline, batch, context_tokens).step_time_s


# The fastest dense tensor-core rate a GEMM on weights of each precision can run at, over the dense BF16 rate:
# 8-bit operands run at 2× (A100 INT8 624 / 312; H100 FP8 and INT8 1,979 / 989), 4-bit at 4× (A100 INT4
# 1,248 / 312; B200 FP4 9 / 2.25 PFLOPS). 16- and 32-bit weights run at most at the BF16 rate.
DENSE_PEAK_OVER_BF16: dict[str, float] = {"fp32": 1.0, "bf16": 1.0, "fp16": 1.0, "fp8": 2.0, "int8": 2.0,
                                          "int4": 4.0}


def floor_peak_tflops(bf16_tflops: float, weight_precision: str) -> float:
    """Returns the fastest dense rate one GPU could run GEMMs on weights of ``weight_precision`` at, TFLOP/s.

    The dense BF16 peak times :data:`DENSE_PEAK_OVER_BF16` (the datasheets in the module docstring): a floor on
    prefill time must allow the lowest-precision arithmetic the weights permit (fp8 weights on an H100 can run
    FP8 GEMMs at twice the BF16 rate), or an honest measurement of a quantised model would beat it.
    """
    require_positive("bf16_tflops", bf16_tflops)
    key = require_choice("weight precision", weight_precision, DENSE_PEAK_OVER_BF16, ignore_case=True)
    return bf16_tflops * DENSE_PEAK_OVER_BF16[key]


@dataclass(frozen=True)
class DecodeFloor:
    """The least one decode step of a replica can take: the bytes each GPU must read at its full HBM bandwidth."""

    weight_bytes_per_gpu: float  # the GPU's shard of the weights: weight_bytes / tp
    kv_bytes_per_gpu: float  # the batch's KV cache on the GPU: batch × context × KV bytes per token per GPU
    bytes_read_per_gpu: float  # the two together
    step_time_s: float  # bytes read / datasheet HBM bandwidth


def decode_floor(model: ServedModel, gpu: GpuSpec, batch: int = 1, context_tokens: int = 0) -> DecodeFloor:
    """Returns the bandwidth floor of a decode step of ``batch`` sequences holding ``context_tokens`` each.

    Each step produces one token per sequence, and to do so every GPU of the replica reads its shard of the
    weights (``weight_bytes`` / tp) and the KV cache of every sequence of the batch (batch × context × KV
    bytes per token per GPU) from HBM (Pope et al. 2022, section 2); at the datasheet bandwidth and 100 %
    efficiency that takes (weight_bytes / tp + batch × context × kv) / hbm (Williams et al. 2009, the memory
    roof: :func:`decode_step` with efficiencies of 1, memory term only). No decode step of this replica is
    faster, so a measured time per output token below it is not physical (unless a step yields several
    tokens, as with speculative decoding); a mixture of experts' reads the weights the batch touches and leaves its
    all-to-all out. Llama-2-70B in bf16 (140 GB) at tp 8 on H100 SXM (3.35 TB/s):
    17.5 GB / 3.35e12 B/s = 5.2 ms at batch 1 before any KV cache.
    """
    step = decode_step(model, gpu, Roofline(1.0, 1.0), batch, context_tokens)
    return DecodeFloor(weight_bytes_per_gpu=model.weight_bytes_read(batch) / model.tensor_parallel,
                       kv_bytes_per_gpu=batch * context_tokens * model.kv_bytes_per_token_per_gpu,
                       bytes_read_per_gpu=step.bytes_read_per_gpu, step_time_s=step.memory_time_s)


def decode_floor_s(model: ServedModel, gpu: GpuSpec, batch: int = 1, context_tokens: int = 0) -> float:
    """Returns the seconds of :func:`decode_floor`: by default batch 1 and no KV cache, the weights read once.

    No decode step of this replica can be faster, whatever the batch (Williams et al. 2009).
    """
    return decode_floor(model, gpu, batch, context_tokens).step_time_s


@dataclass(frozen=True)
class PrefillFloor:
    """The least time to first token of one request: its prompt's FLOPs at full peak, and one read of the weights."""

    compute_s: float  # 2·N·prompt_tokens / (tp × peak)
    weight_read_s: float  # weight_bytes / tp / HBM bandwidth
    time_s: float  # the larger of the two
    compute_bound: bool


def prefill_floor(model: ServedModel, gpu: GpuSpec, prompt_tokens: int, peak_tflops: float) -> PrefillFloor:
    """Returns the floor of a request's time to first token: its prefill at 100 % of peak, at least one weight read.

    The first token comes out of the forward pass over the prompt, which performs 2·N·prompt_tokens FLOPs
    (Kaplan et al. 2020, Table 1) and reads every GPU's weight shard once; at the full dense peak and the full
    HBM bandwidth (Williams et al. 2009: both roofs at efficiency 1) it takes at least the larger of
    2·N·prompt_tokens / (tp × peak) (:func:`prefill_time_s`, one prompt, efficiency 1) and :func:`decode_floor_s`.
    ``peak_tflops`` is one GPU's fastest dense rate for the weights (:func:`floor_peak_tflops`). A time to first
    token below it is not physical (unless part of the prompt came from a prefix cache and was not recomputed).
    Llama-2-70B (N = 70e9), 1,024 tokens on 8 H100 SXM at 989 TFLOP/s: 1.43e14 / 7.91e15 = 18.1 ms of compute,
    above the 5.2 ms weight read. A mixture of experts: 2·N_active·prompt_tokens, and the weights the prompt's
    tokens touch.
    """
    compute_s = prefill_time_s(model.flops_parameters, prompt_tokens, 1, model.tensor_parallel, peak_tflops, 1.0)
    weight_read_s = decode_floor_s(model, gpu, prompt_tokens)
    return PrefillFloor(compute_s=compute_s, weight_read_s=weight_read_s, time_s=max(compute_s, weight_read_s),
                        compute_bound=compute_s >= weight_read_s)

"""The training job's throughput: the stated rate (tokens/s, MFU or hardware TFLOP/s per GPU), else the modelled one.

A stated rate is read as published: ``tokens_per_s_per_gpu`` as achieved, ``mfu`` over the peak it was divided
by (``mfu_peak_tflops``, default the quoted GPU's dense bf16 peak), ``hardware_tflops_per_gpu`` with recompute
counted as Megatron-LM reports it, and ``measured_at_gpus`` the scale the rate was measured at (which already
includes data-parallel communication at that scale). Without a stated rate the step-time model of the
submitted layout on the quoted GPU gives it (rules/checks/facts/step_model.py); with one, both are reported. The
FLOPs per token of a stated MFU or hardware rate count a mixture of experts' active parameters
(rules/checks/facts/model.py ``flops_parameters``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rules.checks.base import Context
from rules.checks.facts.layout import layout, training_group
from rules.checks.facts.model import flops_parameters
from rules.checks.facts.step_model import modelled_step
from rules.estimates.communication import data_feed
from rules.estimates.ratios import fraction_of
from rules.estimates.training_time import compute
from rules.estimates.training_time.step_time import StepTime
from rules.job.cluster import QuotedGpu

# Where a rate came from, as time-to-result and data-feed report it in ``throughput_from``.
MODELLED = "modelled"


@dataclass(frozen=True)
class Throughput:
    """Training tokens/s of the job, where the figure came from, and the modelled step beside it."""

    tokens_per_s_per_gpu: float
    cluster_tokens_per_s: float
    source: str  # tokens_per_s_per_gpu, mfu, hardware_tflops_per_gpu (stated) or modelled
    mfu: float | None = None
    model_flops_per_token: float | None = None
    peak_tflops: float | None = None  # the peak a stated MFU was divided by
    implied_hardware_tflops: float | None = None  # hardware TFLOP/s per GPU the rate implies (recompute counted)
    gpu_peak_tflops: float | None = None  # the quoted GPU's dense peak at the training precision
    measured_at_gpus: int | None = None  # the scale a stated rate was measured at
    modelled: StepTime | None = None

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
                               "cluster_tokens_per_s": self.cluster_tokens_per_s, "throughput_from": self.source}
        if self.mfu is not None:
            out.update(mfu=self.mfu, model_flops_per_token=self.model_flops_per_token,
                       peak_bf16_tflops=self.peak_tflops)
        if self.implied_hardware_tflops is not None:
            out.update(implied_hardware_tflops_per_gpu=self.implied_hardware_tflops,
                       gpu_peak_tflops=self.gpu_peak_tflops)
        if self.measured_at_gpus is not None:
            out["measured_at_gpus"] = self.measured_at_gpus
        if self.modelled is not None:
            out.update(modelled_step_s=self.modelled.step_s,
                       modelled_tokens_per_s_per_gpu=self.modelled.tokens_per_s_per_gpu,
                       modelled_tokens_per_s_per_gpu_range=list(self.modelled.tokens_per_s_per_gpu_range),
                       modelled_mfu=self.modelled.mfu, modelled_mfu_peak_tflops=self.modelled.mfu_peak_tflops,
                       modelled_mfu_precision=self.modelled.mfu_precision, modelled_hfu=self.modelled.hfu,
                       modelled_kernels=self.modelled.kernels,
                       claim_over_model=fraction_of(self.tokens_per_s_per_gpu,
                                                    self.modelled.tokens_per_s_per_gpu))
            if self.modelled.fp8_recipe is not None:
                out["modelled_fp8_recipe"] = self.modelled.fp8_recipe
        return out


def throughput_facts(ctx: Context) -> Throughput | None:
    """Returns the job's tokens/s per GPU: stated (tokens/s, MFU or hardware TFLOP/s), else modelled."""
    return ctx.memo(_throughput)


def _throughput(ctx: Context) -> Throughput | None:
    plan = layout(ctx)
    if plan is None:
        return None
    modelled = modelled_step(ctx)
    training = ctx.job.training
    stated_rate, gpu = training.throughput, training_group(ctx).gpu
    per_gpu = ctx.value(stated_rate.tokens_per_s_per_gpu)
    mfu = ctx.value(stated_rate.mfu)
    hardware_tflops = ctx.value(stated_rate.hardware_tflops_per_gpu)
    measured_at = ctx.value(stated_rate.measured_at_gpus)
    measured_at_gpus = int(measured_at) if measured_at is not None else None
    peak_tflops = ctx.value(gpu.bf16_tflops)
    gpu_peak = _precision_peak_tflops(ctx, gpu, peak_tflops)
    if per_gpu is None and mfu is None and hardware_tflops is None:
        if modelled is None:
            # Either a stated rate or the inputs of the step-time model will do: name the object to fill.
            if stated_rate.pointer not in ctx.missing:
                ctx.missing.append(stated_rate.pointer)
            return None
        return Throughput(modelled.tokens_per_s_per_gpu,
                          data_feed.cluster_tokens_per_s(modelled.tokens_per_s_per_gpu, plan.gpus), MODELLED,
                          modelled=modelled)
    parameters = flops_parameters(ctx, needed=per_gpu is None)
    span = attention_span(ctx)
    recompute = ctx.value(training.activation_checkpointing)
    hardware_flops = (compute.training_flops_per_token(parameters, recompute, *span)
                      if parameters is not None else None)
    source, model_flops, mfu_peak = "tokens_per_s_per_gpu", None, None
    if per_gpu is None and mfu is not None:
        mfu_peak = ctx.value(stated_rate.mfu_peak_tflops)
        mfu_peak = peak_tflops if mfu_peak is None else mfu_peak
        if parameters is None or mfu_peak is None:
            if mfu_peak is None:
                ctx.needed(gpu.bf16_tflops)
            return None
        # MFU counts model FLOPs; the attention term joins when the shape is known (PaLM App. B).
        rate = compute.throughput_from_mfu(mfu, mfu_peak, parameters, *span)
        per_gpu, source, model_flops = rate.tokens_per_s_per_gpu, "mfu", rate.model_flops_per_token
    elif per_gpu is None:
        if hardware_flops is None:
            return None
        per_gpu = compute.tokens_per_s_from_hardware_tflops(hardware_tflops, hardware_flops)
        source = "hardware_tflops_per_gpu"
    implied = compute.hardware_tflops_per_gpu(per_gpu, hardware_flops) if hardware_flops is not None else None
    return Throughput(per_gpu, data_feed.cluster_tokens_per_s(per_gpu, plan.gpus), source, mfu, model_flops,
                      mfu_peak, implied, gpu_peak if implied is not None else None, measured_at_gpus, modelled)


def _precision_peak_tflops(ctx: Context, gpu: QuotedGpu, bf16_tflops: float | None) -> float | None:
    """Returns the dense peak the job's GEMMs run against: the FP8 peak for fp8-mixed, else the bf16 peak."""
    if ctx.value(ctx.job.training.precision) == "fp8-mixed":
        spec = ctx.inputs.catalogue.gpu(ctx.value(gpu.model)) or {}
        return spec.get("fp8_tflops") or bf16_tflops
    return bf16_tflops


def attention_span(ctx: Context) -> tuple[int, int, int] | tuple[None, None, None]:
    """Returns (layers, sequence length, hidden) for the attention FLOPs, or three Nones when one is missing."""
    training = ctx.job.training
    layers = ctx.value(training.model.architecture.layers)
    hidden = ctx.value(training.model.architecture.hidden)
    sequence_length = ctx.value(training.sequence_length)
    if layers and hidden and sequence_length:
        return int(layers), int(sequence_length), int(hidden)
    return None, None, None

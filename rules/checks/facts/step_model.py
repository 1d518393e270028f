"""The modelled training step of the submitted layout on the quoted GPUs (rules/estimates/training_time/step_time.py).

Reads the model's architecture, the layout (tensor, pipeline, virtual stages, context, sequence parallelism,
activation checkpointing, flash attention, sharding, precision and its fp8 recipe, kernels, batch) and the quoted
node group's GPU and NICs, and hands them to the step-time model with the efficiencies of the catalogue and the
policy. The model needs the full architecture including the vocabulary, and a sequence length and global batch.

A mixture-of-experts model's expert layers are timed with their router, grouped expert GEMMs and expert-parallel
all-to-all (rules/estimates/training_time/expert_step.py), its routed tokens at the policy's ``memory.moe`` load factor
(the one the memory estimate reads). An expert tensor-parallel degree above 1 is not modelled: such a job gets no
modelled step (:func:`modelled_step` None) and the checks that need one say why (:data:`EXPERTS_NOT_MODELLED`) unless
the submission states a measured rate.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rules.checks.base import Context
from rules.checks.facts.layout import layout, nics, training_group
from rules.checks.facts.memory import memory_settings
from rules.checks.facts.model import architecture
from rules.errors import InconsistentInput
from rules.estimates.model.hardware import GpuSpec, NodeSpec
from rules.estimates.model.layout import Layout
from rules.estimates.training_time.compute import adapter_fraction
from rules.estimates.training_time.step_time import StepTime, StepTimeModel
from rules.estimates.training_time.step_time_figures import Measured, efficiencies_from_data, mxfp8_tensor_cores
from rules.job.cluster import QuotedNodeGroup

# Precisions the step-time model runs (others, e.g. fp32, are not modelled: the figure stays stated-only).
MODELLED_PRECISIONS = ("bf16-mixed", "fp16-mixed", "fp8-mixed")
# The precision a job that states none is modelled at (the step model only; the memory checks need it stated).
ASSUMED_PRECISION = "bf16-mixed"


# The architecture the model needs beyond what the memory estimate reads.
_MODEL_SHAPE = ("layers", "hidden", "heads", "vocab")
# Why a mixture-of-experts job has no modelled step, and what decides its checks instead.
EXPERTS_NOT_MODELLED = ("the step-time model does not model expert tensor parallelism (parallelism.expert_tensor > 1) "
                        "yet; state a measured throughput "
                        "(throughput.tokens_per_s_per_gpu with measured_at_gpus, the GPUs it was measured on) or "
                        "measurements.scaling at two or more GPU counts")


@dataclass(frozen=True)
class StepInputs:
    """The step-time model of the quoted GPU and the submitted layout it runs (the layout search's start)."""

    model: StepTimeModel
    layout: Layout  # the submitted layout with its batch, recompute and precision
    step: StepTime  # the submitted layout's modelled step


def modelled_step(ctx: Context) -> StepTime | None:
    """Returns the modelled step of the submitted layout, or None when the inputs do not determine one.

    A submission without the full architecture gets None without any input being named missing: the model
    is what a stated throughput is held against, never a requirement of its own. So does a mixture of experts over
    expert tensor parallelism (:func:`not_modelled_reason`).
    """
    inputs = step_inputs(ctx)
    return inputs.step if inputs is not None else None


def not_modelled_reason(ctx: Context) -> str | None:
    """Returns why the job's step is not modelled whatever its inputs (a mixture of experts split over expert tensor
    parallelism), else None."""
    expert_tensor = ctx.job.training.parallelism.expert_tensor
    if ctx.job.training.model.architecture.experts.count.value is not None and (ctx.value(expert_tensor) or 1) > 1:
        return EXPERTS_NOT_MODELLED
    return None


def step_inputs(ctx: Context) -> StepInputs | None:
    """Returns the model, the submitted layout and its modelled step, or None (see ``modelled_step``)."""
    stated = ctx.job.training.model.architecture
    if any(getattr(stated, name).value is None for name in _MODEL_SHAPE) or not_modelled_reason(ctx) is not None:
        return None
    return ctx.memo(_modelled_step)


def _modelled_step(ctx: Context) -> StepInputs | None:
    plan, group = layout(ctx), training_group(ctx)
    shape = architecture(ctx)
    training = ctx.job.training
    parallelism = training.parallelism
    sequence_length = ctx.value(training.sequence_length)
    global_batch = ctx.value(training.global_batch)
    precision = ctx.value(training.precision) or ASSUMED_PRECISION
    if plan is None or shape is None or not sequence_length or not global_batch or precision not in MODELLED_PRECISIONS:
        return None
    hardware = _hardware(ctx, plan, group)
    gpu_model = ctx.value(group.gpu.model)
    if hardware is None or ctx.inputs.catalogue.gpu(gpu_model) is None:
        return None
    efficiencies = efficiencies_from_data(ctx.inputs.catalogue.document, ctx.policy.document, gpu_model)
    submitted = replace(
        plan, micro_batch=int(ctx.value(training.micro_batch) or 1), global_batch=int(global_batch),
        virtual_stages=int(ctx.value(parallelism.virtual_stages)) if plan.pipeline > 1 else 1,
        recompute=ctx.value(training.activation_checkpointing),
        sequence_parallel=bool(ctx.value(parallelism.sequence_parallel)),
        flash_attention=bool(ctx.value(training.flash_attention)), precision=precision,
        tensor_comm_overlap=bool(ctx.value(parallelism.tensor_comm_overlap)), kernels=ctx.value(training.kernels),
        fp8_recipe=ctx.value(training.fp8_recipe))
    try:
        model = StepTimeModel(shape, int(sequence_length), hardware, efficiencies, Measured(), _adapter_fraction(ctx),
                              memory_settings(ctx).routing.load_factor)
        return StepInputs(model, submitted, model.evaluate(submitted))
    except InconsistentInput:
        # The model cannot run this layout (a batch that does not divide, FP8 on a GPU without it): the
        # checks that own those inputs say so; here there is simply no modelled figure.
        return None


def _adapter_fraction(ctx: Context) -> float | None:
    """Returns trainable ÷ all parameters of an adapter fine-tune (its base weights frozen), else None."""
    if ctx.value(ctx.job.training.objective) != "adapter":
        return None
    model = ctx.job.training.model
    parameters, trainable = ctx.value(model.parameters), ctx.value(model.trainable_parameters)
    return adapter_fraction(parameters, trainable) if parameters and trainable else None


def _hardware(ctx: Context, plan: Layout, group: QuotedNodeGroup) -> NodeSpec | None:
    """Returns the quoted GPU's figures: the quote's (catalogue-filled) values, FP8 and PCIe from the catalogue."""
    quoted = group.gpu
    bf16_tflops = ctx.value(quoted.bf16_tflops)
    hbm_tbs = ctx.value(quoted.hbm_tbs)
    if bf16_tflops is None or hbm_tbs is None:
        return None
    model = ctx.value(quoted.model)
    spec = ctx.inputs.catalogue.gpu(model) or {}
    server = ctx.inputs.catalogue.server(ctx.value(group.server_model)) or {}
    compute = nics(ctx, group, "compute")
    if not compute.gbps_per_gpu:
        return None
    nvlink_gbs = ctx.value(quoted.nvlink_gbs)
    gpu = GpuSpec(model=model if model is not None else "GPU", bf16_tflops=bf16_tflops,
                  fp8_tflops=spec.get("fp8_tflops"), hbm_tbs=hbm_tbs,
                  nvlink_gbs=nvlink_gbs or 0, pcie_gen=spec.get("pcie_gen", 5),
                  mxfp8=mxfp8_tensor_cores(ctx.inputs.catalogue.document, model))
    return NodeSpec(gpu=gpu, gpus_per_node=plan.gpus_per_node,
                    nvlink_domain_gpus=int(server.get("nvlink_domain_gpus", plan.gpus_per_node)),
                    nic_gbps_per_gpu=compute.gbps_per_gpu, pointer=group.pointer)

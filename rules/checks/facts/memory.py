"""Per-GPU training memory: the inputs that size it, the estimate, its evidence, and what was measured."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rules.artifacts import TORCH_MEMORY
from rules.checks.base import Context
from rules.checks.facts.artifacts import read_artifact, source
from rules.checks.facts.gpu_context import training_cuda_context
from rules.checks.facts.layout import layout, training_group
from rules.checks.facts.model import (
    architecture,
    model_state_inputs,
    note_missing_formats,
    trainable_parameters,
)
from rules.estimates.memory.activations import ActivationSaving
from rules.estimates.memory.comm_buffers import CommunicationSettings
from rules.estimates.memory.expert_activations import ExpertRouting
from rules.estimates.memory.model_state import TrainedModel
from rules.estimates.memory.offload import NO_HOST_MODEL_STATE, HostModelState, ZeroSettings
from rules.estimates.memory.step_memory import (
    MemorySettings,
    StepMemoryModel,
    TrainingBatch,
    TrainingJob,
    TrainingMemory,
)
from rules.estimates.memory.training_state import TrainingModelState, host_holds_model_state, training_model_state
from rules.estimates.model.layout import Layout, resized
from rules.units import bytes_to_gb, bytes_to_gib

# The DeepSpeed ZeRO values of the policy (memory.deepspeed), named as DeepSpeed names them.
_ZERO = "memory.deepspeed"


@dataclass(frozen=True)
class MemoryInputs:
    """What sizes one training step's memory: the job, where it runs, and one GPU's memory."""

    layout: Layout  # the submitted layout on the training node group
    job: TrainingJob
    gpu_memory_gib: float


def memory_inputs(ctx: Context) -> MemoryInputs | None:
    """Returns the inputs that size training memory, or None (inputs noted missing) without model state.

    The job may still lack its activations (no architecture or batch shape): ``job.saving`` is then None.
    """
    return ctx.memo(_memory_inputs)


def _memory_inputs(ctx: Context) -> MemoryInputs | None:
    plan, group = layout(ctx), training_group(ctx)
    parameters, precision, optimizer = model_state_inputs(ctx)
    gpu_memory_gib = ctx.needed(group.gpu.memory_gib) if group is not None else None
    note_missing_formats(ctx, precision, optimizer)
    if plan is None or parameters is None or precision is None or optimizer is None or gpu_memory_gib is None:
        return None
    training = ctx.job.training
    parallelism = training.parallelism
    micro_batch = ctx.value(training.micro_batch)
    offload = ctx.value(parallelism.offload)
    if plan.pipeline != 1:
        architecture(ctx)  # the first stage's share of the parameters rests on the architecture
    trainable = trainable_parameters(ctx)
    shape = architecture(ctx)
    sequence_length = ctx.needed(training.sequence_length)
    if micro_batch is None:
        ctx.needed(training.micro_batch)
    global_batch, saving, virtual_stages = None, None, 1
    if shape is not None and sequence_length is not None and micro_batch is not None:
        global_batch = ctx.value(training.global_batch)
        sequence_parallel = bool(ctx.value(parallelism.sequence_parallel))
        recompute = ctx.value(training.activation_checkpointing)
        flash_attention = bool(ctx.value(training.flash_attention))
        saving = ActivationSaving(recompute, sequence_parallel, flash_attention)
        virtual_stages = int(ctx.value(parallelism.virtual_stages))
    batch = TrainingBatch(int(sequence_length) if sequence_length is not None else None,
                          int(micro_batch) if micro_batch is not None else None,
                          int(global_batch) if global_batch is not None else None)
    bucket_view = bool(ctx.value(parallelism.gradient_as_bucket_view))
    job = TrainingJob(TrainedModel(parameters, trainable, precision, optimizer), shape, batch, saving,
                      virtual_stages, offload, gradient_as_bucket_view=bucket_view)
    return MemoryInputs(plan, job, gpu_memory_gib)


def memory_settings(ctx: Context) -> MemorySettings:
    """Returns the policy's memory parameters, its model-state and activation conventions and the training GPU's
    CUDA context (memoised: every memory estimate of an evaluation uses them)."""
    return ctx.memo(_memory_settings)


def _memory_settings(ctx: Context) -> MemorySettings:
    return MemorySettings(convention=ctx.setting("conventions.model_state_bytes"),
                          cuda_context_gib=training_cuda_context(ctx, training_group(ctx)).gib,
                          fragmentation_fraction=ctx.setting("memory.allocator_fragmentation_fraction"),
                          headroom_fraction=ctx.setting("memory.headroom_fraction"),
                          gathered_layers=ctx.setting("memory.gathered_layers"),
                          activation_convention=ctx.setting("conventions.activations"),
                          communication=CommunicationSettings(nccl_channels=ctx.setting("memory.nccl_channels")),
                          zero=ZeroSettings(
                              additional_buffer_factor=ctx.setting(f"{_ZERO}.additional_buffer_factor"),
                              stage3_prefetch_bucket_size=ctx.setting(f"{_ZERO}.stage3_prefetch_bucket_size"),
                              stage3_max_live_parameters=ctx.setting(f"{_ZERO}.stage3_max_live_parameters"),
                              stage3_param_persistence_threshold=ctx.setting(
                                  f"{_ZERO}.stage3_param_persistence_threshold"),
                              zero_init=ctx.setting(f"{_ZERO}.zero_init")),
                          routing=ExpertRouting(capacity_factor=ctx.setting("memory.moe.capacity_factor"),
                                                dropless_load_factor=ctx.setting("memory.moe.dropless_load_factor")))


def memory_estimate(ctx: Context, sharding: str | None = None, micro_batch: int | None = None,
                    gpus: int | None = None) -> TrainingMemory | None:
    """Returns the per-GPU memory estimate for the submitted layout, or with another sharding / micro-batch / GPU count.

    None when the inputs that size model state are missing (they are noted missing on ``ctx``). The submitted
    layout's estimate is made once an evaluation (peak-memory and gradient-accumulation both read it).
    """
    if sharding is None and micro_batch is None and gpus is None:
        return ctx.memo(_submitted_estimate, reads_of_refusal=True)
    return _memory_estimate(ctx, sharding, micro_batch, gpus)


def _submitted_estimate(ctx: Context) -> TrainingMemory | None:
    return _memory_estimate(ctx, None, None, None)


def _memory_estimate(ctx: Context, sharding: str | None, micro_batch: int | None,
                     gpus: int | None) -> TrainingMemory | None:
    inputs = memory_inputs(ctx)
    if inputs is None:
        return None
    plan = inputs.layout if gpus is None else resized(inputs.layout, gpus)
    submitted = sharding is None and gpus is None
    model = step_memory_model(ctx)  # reads the settings before the model state, the order the record lists
    held = model_state_estimate(ctx) if submitted else None
    return model.estimate(plan, sharding=sharding, micro_batch=micro_batch, model_state=held)


def step_memory_model(ctx: Context) -> StepMemoryModel:
    """Returns the job's training memory on the training GPU, one model per evaluation, so that every estimate and
    search of the evaluation shares the terms that repeat (rules.estimates.memory.step_memory.StepMemoryModel).

    For callers that have the memory inputs (:func:`memory_inputs` is not None).
    """
    return ctx.memo(_step_memory_model)


def _step_memory_model(ctx: Context) -> StepMemoryModel:
    inputs = memory_inputs(ctx)
    assert inputs is not None, "step_memory_model needs the memory inputs"
    return StepMemoryModel(inputs.job, inputs.gpu_memory_gib, memory_settings(ctx))


def model_state_estimate(ctx: Context) -> TrainingModelState | None:
    """Returns the model state of the submitted layout on one GPU and on its host; None without its inputs.

    Memoised: peak-memory's estimate and host-ram's host figure are this one estimate. It reads only what sizes
    model state (the layout, the model's counts and formats, offload, and the architecture where given, where the
    pipeline's first stage rests on it or where it holds experts), so host-ram does not depend on the batch shape.
    """
    return ctx.memo(_model_state_estimate)


def _model_state_estimate(ctx: Context) -> TrainingModelState | None:
    plan = layout(ctx)
    parameters, precision, optimizer = model_state_inputs(ctx)
    note_missing_formats(ctx, precision, optimizer)
    if plan is None or parameters is None or precision is None or optimizer is None:
        return None
    stated = ctx.job.training.model.architecture
    given = all(ctx.value(dimension) is not None for dimension in (stated.layers, stated.hidden, stated.heads))
    # A mixture of experts' routed experts are sharded apart from the rest: its state rests on the architecture.
    experts = stated.experts.count.value is not None
    shape = architecture(ctx) if given or experts or plan.pipeline != 1 else None
    model = TrainedModel(parameters, trainable_parameters(ctx), precision, optimizer)
    return training_model_state(model, shape, ctx.value(ctx.job.training.parallelism.offload), plan,
                                memory_settings(ctx).state_settings)


def memory_evidence(estimate: TrainingMemory) -> dict[str, float | str | bool]:
    """Returns the stable evidence names of peak-memory (GiB per GPU) plus the model-state figures."""
    return {
        "weights_gib": bytes_to_gib(estimate.weights_bytes),
        "gradients_gib": bytes_to_gib(estimate.gradients_bytes),
        "optimizer_gib": bytes_to_gib(estimate.optimizer_bytes),
        "activations_gib": bytes_to_gib(estimate.activations_bytes or 0),
        "other_gib": bytes_to_gib(estimate.overhead_bytes),
        "gathered_parameters_gib": bytes_to_gib(estimate.gathered_bytes),
        "cuda_context_gib": bytes_to_gib(estimate.cuda_context_bytes),
        **_communication_evidence(estimate),
        "total_gib": bytes_to_gib(estimate.total_bytes),
        "usable_gib": bytes_to_gib(estimate.usable_bytes),
        "capacity_gib": bytes_to_gib(estimate.capacity_bytes),
        "host_offload_gib": bytes_to_gib(estimate.host_offload_bytes),
        "model_state_bytes_per_param": estimate.state.total_bytes_per_param,
        "model_state_gb_per_gpu": bytes_to_gb(estimate.model_state_bytes),
        "model_state_total_gb": bytes_to_gb(estimate.model_state_total_bytes),
        "activations_known": estimate.activations_bytes is not None,
        "first_stage_parameter_factor": estimate.first_stage_factor,
        "context_parallel": estimate.context_parallel,
        "spare_fraction": estimate.spare_fraction,
    }


def _communication_evidence(estimate: TrainingMemory) -> dict[str, float | str]:
    """Returns the communication buffers within other_gib: NCCL's, the framework's buckets, and their total."""
    buffers = estimate.communication
    if buffers is None:
        return {"communication_buffers_gib": 0.0}
    return {"communication_buffers_gib": bytes_to_gib(buffers.total_bytes),
            "nccl_buffers_gib": bytes_to_gib(buffers.nccl_bytes),
            "gradient_buckets_gib": bytes_to_gib(buffers.bucket_bytes),
            "nccl_communicators": buffers.communicators,
            "buffer_framework": buffers.framework}


@dataclass(frozen=True)
class MeasuredPeak:
    """A measured peak of GPU memory per GPU: the figure, which of PyTorch's peaks it is, and where it is from."""

    gib: float
    figure: str  # "reserved" (torch.cuda.max_memory_reserved) or "allocated" (max_memory_allocated)
    source: str


def measured_peak_gib(ctx: Context, micro_batch: int | None) -> float | None:
    """Returns the measured peak (reserved, else allocated) GiB per GPU at this micro-batch and the planned sequence.

    A run that names no micro-batch or sequence length matches any; peak-memory and gradient-accumulation
    both read measurements through :func:`measured_peak`.
    """
    found = measured_peak(ctx, micro_batch)
    return found.gib if found else None


def measured_peak(ctx: Context, micro_batch: int | None) -> MeasuredPeak | None:
    """Returns the measured peak of the first run at this micro-batch and the planned sequence; None if none.

    A run's ``torch_memory`` (PyTorch's own output, parsed by parsers.torch_memory) replaces its retyped
    ``reserved_gib`` / ``allocated_gib``; the reserved peak is taken where given (the caching allocator holds it),
    else the allocated one.
    """
    # Which run matches is looked up, not read: the planned sequence length is no input of the measured peak.
    sequence_length = ctx.job.training.sequence_length.value
    for run in ctx.job.measurements.peak_memory:
        if run.micro_batch.value in (None, micro_batch) and run.sequence_length.value in (None, sequence_length):
            pointer = run.torch_memory.pointer
            parsed = read_artifact(ctx, TORCH_MEMORY, pointer)
            if parsed is not None:
                where = source(TORCH_MEMORY, pointer)
                if parsed["max_reserved_gib"] is not None:
                    return MeasuredPeak(parsed["max_reserved_gib"], "reserved", f"max_memory_reserved, {where}")
                return MeasuredPeak(parsed["max_allocated_gib"], "allocated", f"max_memory_allocated, {where}")
            reserved = ctx.value(run.reserved_gib)
            if reserved:
                return MeasuredPeak(reserved, "reserved", run.reserved_gib.pointer)
            return MeasuredPeak(ctx.value(run.allocated_gib), "allocated", run.allocated_gib.pointer)
    return None


def largest_fitting_micro_batch(ctx: Context, limit: int) -> int | None:
    """Returns the largest micro-batch ≤ ``limit`` whose step fits usable memory: 0 if none, None if unknown."""
    inputs = memory_inputs(ctx)
    if inputs is None:
        return None
    return step_memory_model(ctx).largest_fitting_micro_batch(inputs.layout, limit)


def memory_min_gpus(ctx: Context) -> int | None:
    """Returns the fewest GPUs (whole nodes and model-parallel groups) on which one step fits, None if none does."""
    return _search(ctx, StepMemoryModel.memory_min_gpus)


def no_fit_reason(ctx: Context) -> str | None:
    """Returns why no GPU count fits one step in memory; None when one does or memory is unknown."""
    return _search(ctx, StepMemoryModel.no_fit_reason)


def _search(ctx: Context, search: Callable[[StepMemoryModel, Layout], Any]) -> Any:
    """Returns ``search`` over GPU counts for the submitted job; None when it runs nowhere or cannot be sized."""
    if layout(ctx) is None:
        return None
    inputs = memory_inputs(ctx)
    if inputs is None:
        return None
    return search(step_memory_model(ctx), inputs.layout)


def host_model_state(ctx: Context) -> HostModelState | None:
    """Returns the model state one node's host holds (offload, DeepSpeed's start-up estimate); None if unknown.

    The host half of :func:`model_state_estimate`, so that host-ram and peak-memory agree; nothing, without
    reading the model, when nothing is offloaded and the convention counts no host state.
    """
    if layout(ctx) is None:
        return None
    if not host_holds_model_state(ctx.setting("conventions.model_state_bytes"),
                                  ctx.value(ctx.job.training.parallelism.offload)):
        return NO_HOST_MODEL_STATE
    estimate = model_state_estimate(ctx)
    return estimate.host if estimate is not None else None

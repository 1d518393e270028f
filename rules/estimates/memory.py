"""One training step's memory on the most loaded GPU, and the searches built on it.

Sums the model state (rules/estimates/model_state.py), the activations of the first pipeline stage
(rules/estimates/activations.py, counted under the policy's activation convention:
rules/estimates/activation_conventions.py), the layers ZeRO-3/FSDP gathers, the communication buffers
(rules/estimates/comm_buffers.py), the CUDA context and the allocator's fragmentation, and compares them
with the GPU memory less a headroom. Pure: the policy's parameters come in
as ``MemorySettings``. Results are bytes; callers convert.

Sources (cited again where used): Rajbhandari et al., ZeRO, SC'20 (arXiv 1910.02054) §5; Korthikanti et
al. 2022 (arXiv 2205.05198) Table 2 and §4.2.3; DeepSpeed ``deepspeed/runtime/zero/stage3.py``; PyTorch
CUDA caching allocator notes ("Memory management": reserved exceeds allocated by fragmentation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rules.errors import InconsistentInput
from rules.estimates._args import require_non_negative_int, require_positive_int
from rules.estimates.activation_conventions import (
    ActivationCounting,
    activation_element_bytes,
    counted_activation_bytes,
)
from rules.estimates.activations import ActivationSaving, BatchShape, PipelineSchedule
from rules.estimates.comm_buffers import (
    BufferInputs,
    CommunicationBuffers,
    CommunicationSettings,
    communication_buffers,
)
from rules.estimates.layout import Layout, resized, with_sharding
from rules.estimates.model_state import ModelStatePerGpu, StateBytesPerParam, TrainedModel
from rules.estimates.offload import NO_HOST_MODEL_STATE, HostModelState, ZeroSettings
from rules.estimates.parameters import largest_layer_parameters
from rules.estimates.ratios import spare_fraction
from rules.estimates.shapes import ModelShape
from rules.estimates.training_state import StateSettings, TrainingModelState, training_model_state
from rules.units import GIB

# The searches over GPU counts stop here: no fit below this many GPUs means "not by adding GPUs".
MAX_SEARCH_GPUS = 131_072


@dataclass(frozen=True)
class MemorySettings:
    """The policy's memory parameters (rules/data/policy.default.json, memory.* and conventions.*)."""

    convention: str  # bytes per parameter of model state: a key of model_state.BYTE_CONVENTIONS
    cuda_context_gib: float  # CUDA context per GPU (the catalogue's figure for the GPU, else the policy's)
    fragmentation_fraction: float  # allocator overhead over the tensors it holds
    headroom_fraction: float  # share of GPU memory kept free
    gathered_layers: int  # decoder layers FSDP holds unsharded at once (the current one and those prefetched)
    activation_convention: str = "physical"  # a key of activation_conventions.ACTIVATION_CONVENTIONS
    # NCCL and framework buffers (comm_buffers.py); None: not counted, the bare arithmetic of the published tables
    communication: CommunicationSettings | None = None
    zero: ZeroSettings = field(default_factory=ZeroSettings)  # DeepSpeed's buffer factor and ZeRO-3 working set

    @property
    def state_settings(self) -> StateSettings:
        """Returns the part of the settings that sizes model state (rules/estimates/training_state.py)."""
        return StateSettings(self.convention, self.gathered_layers, self.zero)


@dataclass(frozen=True)
class TrainingBatch:
    """The batch of one optimizer step; any of it may be unknown."""

    sequence_length: int | None
    micro_batch: int | None  # sequences per GPU per forward pass
    global_batch: int | None  # sequences per optimizer step


@dataclass(frozen=True)
class TrainingJob:
    """What a training job trains and how, independent of the hardware it runs on."""

    model: TrainedModel
    shape: ModelShape | None  # None: the architecture is not known (activations cannot be estimated)
    batch: TrainingBatch
    saving: ActivationSaving
    virtual_stages: int
    offload: str  # one of model_state.OFFLOADS
    gradient_as_bucket_view: bool = False  # PyTorch DDP: gradients are views into its all-reduce buckets


@dataclass(frozen=True)
class TrainingMemory:
    """Per-GPU memory of one training step, in bytes, with the convention that sized the model state."""

    sharding: str
    micro_batch: int | None
    state: StateBytesPerParam
    convention: str
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float | None  # None: the architecture or batch shape is not known
    gathered_bytes: float
    other_bytes: float
    host_offload_bytes: float
    capacity_bytes: float
    usable_bytes: float
    parameters: float
    first_stage_factor: float = 1.0  # the most loaded pipeline stage's parameters over an even share
    context_parallel: int = 1  # the layout's context-parallel degree: activations are ÷ it, state sharded over d × c
    activation_counting: ActivationCounting = ActivationCounting()  # the convention and width that sized activations
    communication: CommunicationBuffers | None = None  # None: not counted (MemorySettings.communication)
    cuda_context_bytes: float = 0.0

    @property
    def communication_bytes(self) -> float:
        """Returns the NCCL buffers and framework buckets, which other_bytes includes; 0 when not counted."""
        return self.communication.total_bytes if self.communication else 0.0
    host: HostModelState = NO_HOST_MODEL_STATE  # the model state the node's host holds (host-ram's figure)

    @property
    def model_state_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @property
    def overhead_bytes(self) -> float:
        """Returns what is neither model state nor activations: gathered layers, communication buffers, CUDA
        context, fragmentation."""
        return self.gathered_bytes + self.other_bytes

    @property
    def model_state_total_bytes(self) -> float:
        """Returns the whole model's state, unsharded: parameters × bytes per parameter (ZeRO §3.1)."""
        return self.parameters * self.state.total_bytes_per_param

    @property
    def total_bytes(self) -> float:
        return self.model_state_bytes + (self.activations_bytes or 0) + self.gathered_bytes + self.other_bytes

    @property
    def spare_fraction(self) -> float:
        return spare_fraction(self.total_bytes, self.usable_bytes)

    @property
    def within_usable(self) -> bool:
        """Returns whether what was sized (model state alone when activations are unknown) fits usable memory."""
        return self.total_bytes <= self.usable_bytes

    @property
    def fits(self) -> bool | None:
        """Returns whether one step fits the usable memory; None when the activations cannot be estimated."""
        if self.activations_bytes is None:
            return None
        return self.within_usable


def training_memory(job: TrainingJob, layout: Layout, gpu_memory_gib: float, settings: MemorySettings, *,
                    sharding: str | None = None, micro_batch: int | None = None,
                    model_state: TrainingModelState | None = None) -> TrainingMemory:
    """Returns the per-GPU memory of one step of ``job`` on ``layout``, or under another sharding / micro-batch.

    Model state of the most loaded pipeline stage (ZeRO §5 with Megatron's first-stage share, sharded over the
    data × context ranks) + the first stage's activations (Korthikanti et al. Table 2, §4.2.3; ÷ the
    context-parallel degree) + under ZeRO-3/FSDP the unsharded layers (DeepSpeed's ZeRO-3 working set, FSDP's
    ``settings.gathered_layers`` wrapped decoder layers) + the communication buffers (NCCL's and the
    framework's buckets, :func:`rules.estimates.comm_buffers.communication_buffers`) + the CUDA context + the
    allocator's fragmentation over all tensors it holds (NCCL's buffers are not its); the model state (and
    what the host holds of it) is :func:`rules.estimates.training_state.training_model_state`, or
    ``model_state`` when the caller has it for this layout and sharding. Usable memory is the GPU's less
    ``settings.headroom_fraction``.
    """
    held = model_state or training_model_state(job.model, job.shape, job.offload, layout, settings.state_settings,
                                               sharding=sharding)
    layout = with_sharding(layout, held.sharding)
    return _step_memory(job, layout, gpu_memory_gib, settings, held, micro_batch or job.batch.micro_batch,
                        lambda: _buffers(job, layout, held.state, held.per_gpu, settings))


def _step_memory(job: TrainingJob, layout: Layout, gpu_memory_gib: float, settings: MemorySettings,
                 held: TrainingModelState, micro_batch: int | None,
                 buffers_of: Callable[[], CommunicationBuffers | None]) -> TrainingMemory:
    """Returns :func:`training_memory` from the model state of ``layout`` (already under the state's sharding)
    at ``micro_batch``, with the buffers ``buffers_of`` returns (asked after the activations are sized, so
    that of two refusals the same one comes first): what a search over micro-batches sizes at each one."""
    state, sharding, per_gpu, gathered = held.state, held.sharding, held.per_gpu, held.gathered_bytes
    stage_factor = held.first_stage_factor
    counting = ActivationCounting(settings.activation_convention, activation_element_bytes(job.model.precision))
    activations = _activations(job, layout, int(micro_batch) if micro_batch else None, counting)
    buffers = buffers_of()
    buckets = buffers.bucket_bytes if buffers else 0.0
    tensors = per_gpu.gpu_total_bytes + (activations or 0) + gathered + buckets
    context = settings.cuda_context_gib * GIB
    other = context + settings.fragmentation_fraction * tensors + (buffers.total_bytes if buffers else 0.0)
    capacity = gpu_memory_gib * GIB
    return TrainingMemory(
        sharding=sharding, micro_batch=int(micro_batch) if micro_batch else None, state=state,
        convention=settings.convention, weights_bytes=per_gpu.weights_bytes, gradients_bytes=per_gpu.gradients_bytes,
        optimizer_bytes=per_gpu.optimizer_bytes, activations_bytes=activations, gathered_bytes=gathered,
        other_bytes=other, host_offload_bytes=per_gpu.host_offload_bytes, capacity_bytes=capacity,
        usable_bytes=capacity * (1 - settings.headroom_fraction), parameters=job.model.parameters,
        first_stage_factor=stage_factor, context_parallel=layout.context, activation_counting=counting,
        communication=buffers, cuda_context_bytes=context, host=held.host)


def _buffers(job: TrainingJob, layout: Layout, state: StateBytesPerParam, per_gpu: ModelStatePerGpu,
             settings: MemorySettings) -> CommunicationBuffers | None:
    """Returns the rank's communication buffers, None when the settings do not count them.

    FSDP's unit is one wrapped decoder layer or the root (:func:`largest_layer_parameters`, ``block``), split
    over the tensor-parallel ranks; unknown without the architecture's vocabulary.
    """
    if settings.communication is None:
        return None
    unit = None
    if job.shape is not None and job.shape.vocab is not None:
        unit = largest_layer_parameters(job.shape, "block") / layout.tensor
    inputs = BufferInputs(layout=layout, convention=settings.convention, gradients_on_gpu_bytes=per_gpu.gradients_bytes,
                          working_bytes_per_param=state.weights_bytes_per_param, largest_unit_parameters=unit,
                          gradient_as_bucket_view=job.gradient_as_bucket_view)
    return communication_buffers(inputs, settings.communication)


def _activations(job: TrainingJob, layout: Layout, micro_batch: int | None,
                 counting: ActivationCounting) -> float | None:
    """Returns the first stage's activation bytes; None when the shape, sequence or micro-batch is unknown.

    Counted under ``counting`` (:func:`rules.estimates.activation_conventions.counted_activation_bytes`). A
    context-parallel rank holds sequence_length / context tokens of each activation (Megatron-LM context
    parallelism; :func:`rules.estimates.activations.activation_bytes_per_gpu`).
    """
    sequence_length = job.batch.sequence_length
    if job.shape is None or sequence_length is None or micro_batch is None:
        return None
    micro_batches = None
    if job.batch.global_batch:
        # Micro-batches per optimizer step on each data-parallel rank (the batch identity of rules/estimates/batch.py).
        micro_batches = max(1, int(job.batch.global_batch // (micro_batch * layout.data_parallel)))
    return counted_activation_bytes(counting, job.shape, BatchShape(int(sequence_length), micro_batch), job.saving,
                                    layout.tensor, PipelineSchedule(layout.pipeline, job.virtual_stages, micro_batches),
                                    context_parallel=layout.context)


def largest_fitting_micro_batch(job: TrainingJob, layout: Layout, gpu_memory_gib: float, settings: MemorySettings,
                                limit: int) -> int | None:
    """Returns the largest micro-batch ≤ ``limit`` whose step fits usable memory: 0 if none, None if unknown.

    Bisection over :func:`training_memory` at micro-batch m; activation memory grows with m (Korthikanti et
    al. 2022, Table 2), so the fitting micro-batches are 1..k. The model state and the communication buffers
    do not depend on the micro-batch: they are sized once, and each micro-batch tried adds its activations.
    """
    held = training_model_state(job.model, job.shape, job.offload, layout, settings.state_settings)
    sized = with_sharding(layout, held.sharding)
    buffers: list[CommunicationBuffers | None] = []

    def buffers_of() -> CommunicationBuffers | None:
        if not buffers:
            buffers.append(_buffers(job, sized, held.state, held.per_gpu, settings))
        return buffers[0]

    def fits(micro_batch: int) -> bool | None:
        return _step_memory(job, sized, gpu_memory_gib, settings, held, micro_batch, buffers_of).fits

    first = fits(1)
    if first is None:
        return None
    if not first:
        return 0
    low, high = 1, max(1, limit)
    if fits(high):
        return high
    while high - low > 1:  # invariant: low fits, high does not
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low


@dataclass(frozen=True)
class MeasuredPeak:
    """A measured peak memory per GPU at one micro-batch (PyTorch's peak reserved, else peak allocated)."""

    micro_batch: int
    peak_gib: float


@dataclass(frozen=True)
class FittingMicroBatch:
    """The largest micro-batch whose step fits usable memory, once a measurement has had its say."""

    largest: int  # 0 when not even micro-batch 1 fits
    measured_fits: bool | None  # whether the measured micro-batch fitted usable memory; None when none was measured


def largest_fitting_given_measurement(estimated_largest: int, usable_gib: float,
                                      measured: MeasuredPeak | None) -> FittingMicroBatch:
    """Returns the estimated largest fitting micro-batch corrected by a measured peak, where there is one.

    A measured peak within usable memory shows that its micro-batch fits, so the largest is at least that
    one; a peak above it shows that it does not, so the largest is below it. Activation memory grows with
    the micro-batch (Korthikanti et al. 2022, arXiv 2205.05198, Table 2), so the fitting micro-batches are
    1..k and one measurement moves k past, or back below, the measured micro-batch. The peak to compare is
    what the caching allocator reserved (PyTorch ``torch.cuda.max_memory_reserved``), as the acceptance
    plan's "Measure peak accelerator memory" asks.
    """
    require_non_negative_int("estimated_largest", estimated_largest)
    if measured is None:
        return FittingMicroBatch(estimated_largest, None)
    require_positive_int("measured micro_batch", measured.micro_batch)
    if measured.peak_gib <= usable_gib:
        return FittingMicroBatch(max(estimated_largest, measured.micro_batch), True)
    return FittingMicroBatch(min(estimated_largest, measured.micro_batch - 1), False)


def _search_limit_gpus(layout: Layout) -> int:
    """Returns the largest GPU count the searches try: MAX_SEARCH_GPUS in whole nodes and model replicas."""
    return max(1, MAX_SEARCH_GPUS // layout.whole_unit_gpus) * layout.whole_unit_gpus


def memory_min_gpus(job: TrainingJob, layout: Layout, gpu_memory_gib: float, settings: MemorySettings) -> int | None:
    """Returns the fewest GPUs (whole nodes and model-parallel groups) on which one step fits, None if none does.

    Bisection over :func:`training_memory` on n GPUs: more data-parallel ranks shard the state further (ZeRO
    §5), so the fitting counts are n..∞ (for ddp either every count fits or none does). A count on which the
    estimators refuse the layout (fsdp-hybrid on part of a node) does not fit.
    """
    unit = layout.whole_unit_gpus

    def fits_on(multiple: int) -> bool:
        try:
            return bool(training_memory(job, resized(layout, multiple * unit), gpu_memory_gib, settings).fits)
        except InconsistentInput:
            return False

    high = max(1, MAX_SEARCH_GPUS // unit)
    if not fits_on(high):
        return None
    low = 0  # invariant: low does not fit (0 GPUs), high does
    while high - low > 1:
        middle = (low + high) // 2
        if fits_on(middle):
            high = middle
        else:
            low = middle
    return high * unit


def no_fit_reason(job: TrainingJob, layout: Layout, gpu_memory_gib: float, settings: MemorySettings) -> str | None:
    """Returns why no GPU count up to MAX_SEARCH_GPUS fits one step in memory; None when one does or it is unknown.

    For when :func:`memory_min_gpus` found none: the reason quotes the per-GPU need at the largest count
    searched, where the state is sharded furthest, so it is the least any count needs.
    """
    gpus = _search_limit_gpus(layout)
    try:
        estimate = training_memory(job, resized(layout, gpus), gpu_memory_gib, settings)
    except InconsistentInput as error:
        return f"no GPU count fits this layout: {error}"
    if estimate.fits is None or estimate.fits:  # unknown, or memory_min_gpus would have found this count
        return None
    return (f"no GPU count fits memory: under {estimate.sharding} one training step needs "
            f"{estimate.total_bytes / GIB:,.1f} GiB per GPU even on {gpus:,} GPUs, more than the "
            f"{estimate.usable_bytes / GIB:,.1f} GiB usable")

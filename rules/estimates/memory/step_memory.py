"""One training step's memory on the most loaded GPU, and the searches built on it.

Sums the model state (rules/estimates/memory/model_state.py), the activations of the first pipeline stage
(rules/estimates/memory/activations.py, counted under the policy's activation convention:
rules/estimates/memory/activation_conventions.py), the layers ZeRO-3/FSDP gathers, the communication buffers
(rules/estimates/memory/comm_buffers.py), the CUDA context and the allocator's fragmentation, and compares them
with the GPU memory less a headroom. Pure: the policy's parameters come in as ``MemorySettings``. Bytes.

Sources (cited again where used): Rajbhandari et al., ZeRO, SC'20 (arXiv 1910.02054) §5; Korthikanti et
al. 2022 (arXiv 2205.05198) Table 2 and §4.2.3; DeepSpeed ``deepspeed/runtime/zero/stage3.py``; PyTorch
CUDA caching allocator notes ("Memory management": reserved exceeds allocated by fragmentation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from rules.errors import InconsistentInput
from rules.estimates.memory.activation_conventions import (
    ActivationCounting,
    activation_element_bytes,
    counted_activation_bytes,
)
from rules.estimates.memory.activations import (
    ActivationSaving,
    BatchShape,
    PipelineSchedule,
    activation_bytes_per_layer,
)
from rules.estimates.memory.comm_buffers import CommunicationBuffers, rank_buffers
from rules.estimates.memory.model_state import StateBytesPerParam, effective_sharding, model_state_bytes_per_param
from rules.estimates.memory.step_figures import StepTerms
from rules.estimates.memory.step_figures import TrainingMemory as TrainingMemory  # what it returns
from rules.estimates.memory.step_inputs import MemorySettings as MemorySettings  # what it reads, once defined here
from rules.estimates.memory.step_inputs import TrainingBatch as TrainingBatch
from rules.estimates.memory.step_inputs import TrainingJob as TrainingJob
from rules.estimates.memory.training_state import TrainingModelState, gathered_bytes, sharded_model_state
from rules.estimates.model.layout import Layout, resized, with_sharding
from rules.estimates.model.parameters import first_stage_parameter_factor
from rules.estimates.model.shapes import ModelShape
from rules.estimates.search.bisection import most_fitting
from rules.estimates.search.fitting_counts import fewest_fitting_gpus
from rules.units import GIB

Buffers = CommunicationBuffers | None  # None: not counted (MemorySettings.communication)
_UNKEPT = object()  # what StepMemoryModel._keep finds where nothing is kept
# The searches over GPU counts stop here: no fit below this many GPUs means "not by adding GPUs".
MAX_SEARCH_GPUS = 131_072


def training_memory(job: TrainingJob, layout: Layout, gpu_memory_gib: float, settings: MemorySettings, *,
                    sharding: str | None = None, micro_batch: int | None = None,
                    model_state: TrainingModelState | None = None) -> TrainingMemory:
    """Returns the per-GPU memory of one step of ``job`` on ``layout``, or under another sharding / micro-batch.

    Model state of the most loaded pipeline stage (ZeRO §5 with Megatron's first-stage share, sharded over the
    data × context ranks) + the first stage's activations (Korthikanti et al. Table 2, §4.2.3; ÷ the
    context-parallel degree) + under ZeRO-3/FSDP the unsharded layers (DeepSpeed's ZeRO-3 working set, FSDP's
    ``settings.gathered_layers`` wrapped decoder layers) + the communication buffers (NCCL's and the
    framework's buckets, :func:`rules.estimates.memory.comm_buffers.communication_buffers`) + the CUDA context + the
    allocator's fragmentation over all tensors it holds (NCCL's buffers are not its); the model state (and
    what the host holds of it) is :func:`rules.estimates.memory.training_state.training_model_state`, or
    ``model_state`` when the caller has it for this layout and sharding. Usable memory is the GPU's less
    ``settings.headroom_fraction``. One estimate of :class:`StepMemoryModel`.
    """
    return StepMemoryModel(job, gpu_memory_gib, settings).estimate(layout, sharding=sharding, micro_batch=micro_batch,
                                                                   model_state=model_state)


class StepMemoryModel:
    """:func:`training_memory` of one job on one GPU under one policy, with the terms that repeat kept.

    An evaluation sizes the same job many times: under each sharding strategy, on the submitted layout, at
    each micro-batch and GPU count its searches try. Most terms depend on few of the layout's degrees: the
    bytes per parameter and the gathered layers on the sharding, the first stage's share on the pipeline
    degree, the activations on the micro-batch, the tensor, pipeline and context degrees and the micro-batches
    per step (the only thing they read of the data-parallel degree), the state on a layout and its communication
    buffers on the layout (the layout search asks for each at every micro-batch, recompute and virtual-stage count
    it tries: rules/estimates/search/layout_search.py). Each is kept, under exactly the arguments
    its estimator reads, the first time an estimate asks for it, in the order :func:`training_memory` asks; a
    refusal is not kept, so an estimate raises what it raised before. The job, GPU and settings are fixed:
    build one per evaluation (rules/checks/facts/memory.py) or per search, never across jobs.
    """

    def __init__(self, job: TrainingJob, gpu_memory_gib: float, settings: MemorySettings) -> None:
        self.job, self.gpu_memory_gib, self.settings = job, gpu_memory_gib, settings
        self._state_settings = settings.state_settings
        self._kept: dict[tuple[object, ...], Any] = {}
        self._shared: dict[tuple[object, ...], Any] = {}  # kept under what they read of the precision: at_precision
        self._counted: dict[tuple[object, ...], Any] | None = None  # this job's activations (a dict in _shared)
        self._counting_kept: ActivationCounting | None = None
        self._usable = gpu_memory_gib * GIB * (1 - settings.headroom_fraction)  # as TrainingMemory.usable_bytes

    def varied(self, saving: ActivationSaving, virtual_stages: int, batch: TrainingBatch) -> StepMemoryModel:
        """Returns the model of the job with another activation saving, virtual-stage count and batch.

        It shares the terms kept so far: the model state, gathered layers and buffers do not read these, and the
        activations are kept under them. The layout search sizes each of its candidates' jobs so.
        """
        job = replace(self.job, saving=saving, virtual_stages=virtual_stages, batch=batch)
        sibling = StepMemoryModel(job, self.gpu_memory_gib, self.settings)
        sibling._kept, sibling._shared = self._kept, self._shared
        return sibling

    def at_precision(self, precision: str) -> StepMemoryModel:
        """Returns the model of the job trained at another precision (a training precision of the model state).

        It keeps its own model state and gathered layers, and shares the activations and buffers, which are kept
        under what they read of the precision (the counting; two figures of the state). The layout search uses it.
        """
        job = replace(self.job, model=replace(self.job.model, precision=precision))
        sibling = StepMemoryModel(job, self.gpu_memory_gib, self.settings)
        sibling._shared = self._shared
        return sibling

    def _keep(self, key: tuple[object, ...], compute: Callable[[], Any],
              kept: dict[tuple[object, ...], Any] | None = None) -> Any:
        kept = self._kept if kept is None else kept
        try:
            value = kept.get(key, _UNKEPT)
        except TypeError:  # an unhashable argument (never a valid one): computed, for the estimator to refuse
            return compute()
        if value is _UNKEPT:
            value = kept[key] = compute()  # a raise keeps nothing
        return value

    def sized(self, layout: Layout, sharding: str | None = None) -> tuple[Layout, TrainingModelState]:
        """Returns ``layout`` under the sharding its model state is sized with, and that state (kept per layout):
        :func:`rules.estimates.memory.training_state.training_model_state` of the job on ``layout``."""
        sharding = effective_sharding(sharding or layout.sharding, self._state_settings.convention)
        layout = with_sharding(layout, sharding)
        return layout, self._keep(("held", layout), lambda: self._held(layout))

    def _held(self, layout: Layout) -> TrainingModelState:
        """Returns the model state on ``layout``, already under the sharding it is sized with.

        Its figures read of the precision only the bytes per parameter (not their citation): they are kept under
        those bytes, shared with the :meth:`at_precision` siblings whose bytes are the same."""
        job, settings, sharding = self.job, self._state_settings, layout.sharding
        model, shape, pipeline, shards = job.model, job.shape, layout.pipeline, layout.expert_shards
        state, figures = self._state(sharding)
        held = self._keep(("held", layout, figures), lambda: sharded_model_state(
            model, shape, job.offload, layout, settings, state,
            self._keep(("stage", pipeline), lambda: first_stage_parameter_factor(shape, pipeline)),
            lambda: self._keep(("gathered", sharding, shards),
                               lambda: gathered_bytes(shape, sharding, state, settings, shards))),
            self._shared)
        return held if held.state == state else TrainingModelState(
            sharding, state, held.per_gpu, held.gathered_bytes, held.host, held.first_stage_factor)

    def _state(self, sharding: str) -> tuple[StateBytesPerParam, StateBytesPerParam]:
        """Returns the bytes per parameter of the state under ``sharding`` (as sized), and their figures (kept)."""
        model, convention = self.job.model, self._state_settings.convention
        return self._keep(("state", sharding), lambda: (bytes_per_param := model_state_bytes_per_param(
            model.precision, model.optimizer, convention, sharding), replace(bytes_per_param, citation="")))

    def precision_figures(self, sharding: str) -> tuple[ActivationCounting, StateBytesPerParam]:
        """Returns all the estimates under ``sharding`` read of the precision: the activations' counting and the state's
        bytes per parameter, uncited. :meth:`at_precision` siblings alike in these size every step alike."""
        return self._counting(), self._state(effective_sharding(sharding, self._state_settings.convention))[1]

    def estimate(self, layout: Layout, *, sharding: str | None = None, micro_batch: int | None = None,
                 model_state: TrainingModelState | None = None) -> TrainingMemory:
        """Returns :func:`training_memory` of the job on ``layout`` (the same arguments, the same result)."""
        if model_state is None:
            layout, held = self.sized(layout, sharding)
        else:
            layout, held = with_sharding(layout, model_state.sharding), model_state
        job, settings = self.job, self.settings
        micro_batch = micro_batch or job.batch.micro_batch
        activations, buffers, terms = self._step(layout, held, micro_batch,
                                                 lambda: self._layout_buffers(layout, held, model_state is None))
        other = terms.other_bytes(activations)
        per_gpu, counting = held.per_gpu, self._counting()
        capacity = self.gpu_memory_gib * GIB
        return TrainingMemory(
            sharding=held.sharding, micro_batch=int(micro_batch) if micro_batch else None, state=held.state,
            convention=settings.convention, weights_bytes=per_gpu.weights_bytes,
            gradients_bytes=per_gpu.gradients_bytes, optimizer_bytes=per_gpu.optimizer_bytes,
            activations_bytes=activations, gathered_bytes=held.gathered_bytes, other_bytes=other,
            host_offload_bytes=per_gpu.host_offload_bytes, capacity_bytes=capacity,
            usable_bytes=capacity * (1 - settings.headroom_fraction), parameters=job.model.parameters,
            first_stage_factor=held.first_stage_factor, context_parallel=layout.context,
            activation_counting=counting, communication=buffers,
            cuda_context_bytes=settings.cuda_context_gib * GIB, host=held.host)

    def activations(self, sized: tuple[Layout, TrainingModelState], micro_batch: int) -> float | None:
        """Returns the activations :meth:`estimate` counts at ``micro_batch`` on a layout :meth:`sized` (kept)."""
        return self._activations(sized[0], micro_batch)

    def terms(self, sized: tuple[Layout, TrainingModelState]) -> StepTerms:
        """Returns the terms of :meth:`estimate` on a layout :meth:`sized` (of this model or one :meth:`varied` from
        it) that do not depend on the activations, its buffers kept per layout: ``terms(sized).fitting_bytes(
        activations(sized, micro_batch))`` is the estimate's total when it fits, without building it."""
        layout, held = sized
        return self._terms(held, self._layout_buffers(layout, held, True))

    def _terms(self, held: TrainingModelState, buffers: Buffers) -> StepTerms:
        settings = self.settings
        return StepTerms(held.per_gpu.gpu_total_bytes, held.gathered_bytes, buffers.bucket_bytes if buffers else 0.0,
                         buffers.total_bytes if buffers else 0.0, settings.cuda_context_gib * GIB,
                         settings.fragmentation_fraction, self._usable)

    def _layout_buffers(self, layout: Layout, held: TrainingModelState, sized_here: bool) -> Buffers:
        """Returns the buffers of ``layout`` holding ``held``, kept when ``held`` is what this model sized on it
        (under the layout and the two figures of the state :func:`rank_buffers` reads)."""
        job, settings = self.job, self.settings
        gradients, working = held.per_gpu.gradients_bytes, held.state.weights_bytes_per_param

        def compute() -> Buffers:
            return rank_buffers(job.shape, layout, settings.convention, gradients, working,
                                job.gradient_as_bucket_view, settings.communication)
        return self._keep((layout, gradients, working), compute, self._shared) if sized_here else compute()

    def _counting(self) -> ActivationCounting:
        counting = self._counting_kept
        if counting is None:  # a raise keeps nothing
            settings, precision = self.settings, self.job.model.precision
            counting = self._counting_kept = ActivationCounting(settings.activation_convention,
                                                                activation_element_bytes(precision))
        return counting

    def _step(self, layout: Layout, held: TrainingModelState, micro_batch: int | None,
              buffers_of: Callable[[], Buffers]) -> tuple[float | None, Buffers, StepTerms]:
        """Returns the activations, the buffers and the other terms of one step on ``layout`` (already under the
        state's sharding) at ``micro_batch``, the buffers being ``buffers_of()``, asked after the activations
        are sized (so that of two refusals the same one comes first)."""
        activations = self._activations(layout, int(micro_batch) if micro_batch else None)
        buffers = buffers_of()
        return activations, buffers, self._terms(held, buffers)

    def _fits(self, layout: Layout, held: TrainingModelState, micro_batch: int | None,
              buffers_of: Callable[[], Buffers]) -> bool | None:
        """Returns :attr:`TrainingMemory.fits` of that step, without building the estimate."""
        activations, _, terms = self._step(layout, held, micro_batch, buffers_of)
        return None if activations is None else terms.fitting_bytes(activations) is not None

    def _activations(self, layout: Layout, micro_batch: int | None) -> float | None:
        """Returns the first stage's activation bytes; None when the shape, sequence or micro-batch is unknown.

        Counted under the job's counting and kept under it
        (:func:`rules.estimates.memory.activation_conventions.counted_activation_bytes`). A context-parallel rank
        holds sequence_length / context tokens of each activation (Megatron-LM context parallelism;
        :func:`rules.estimates.memory.activations.activation_bytes_per_gpu`).
        """
        job, kept = self.job, self._counted
        counting = self._counting() if kept is None else self._counting_kept  # kept once counted
        sequence_length = job.batch.sequence_length
        if job.shape is None or sequence_length is None or micro_batch is None:
            return None
        micro_batches = None
        if job.batch.global_batch:
            # Micro-batches per optimizer step on each data-parallel rank (the batch identity of estimates/batch.py).
            micro_batches = max(1, int(job.batch.global_batch // (micro_batch * layout.data_parallel)))
        tensor, pipeline, context = layout.tensor, layout.pipeline, layout.context
        if kept is None:  # this job's activations, kept by those of all precisions that count them alike
            kept = self._counted = self._shared.setdefault((counting, job.saving, job.virtual_stages, sequence_length),
                                                           {})
        key = (micro_batch, tensor, pipeline, context, micro_batches, layout.expert_tensor)
        counted = kept.get(key)
        if counted is None:  # a raise keeps nothing; the batch and schedule, immutable, are kept (with their types)
            shared, virtual_stages = self._shared, job.virtual_stages
            batch = self._keep(("batch", int(sequence_length), type(micro_batch), micro_batch),
                               lambda: BatchShape(int(sequence_length), micro_batch), shared)
            schedule = self._keep(("schedule", type(pipeline), pipeline, type(virtual_stages), virtual_stages,
                                   micro_batches), lambda: PipelineSchedule(pipeline, virtual_stages, micro_batches),
                                  shared)
            counted = kept[key] = counted_activation_bytes(
                counting, job.shape, batch, job.saving, tensor, schedule, context_parallel=context,
                layer_bytes=self._layer_bytes, expert_tensor=layout.expert_tensor,
                load_factor=self.settings.routing.load_factor)
        return counted

    def _layer_bytes(self, shape: ModelShape, batch: BatchShape, saving: ActivationSaving, tensor_parallel: int = 1, *,
                     element_bytes: float = 2, **routing: float) -> float:
        """Returns :func:`rules.estimates.memory.activations.activation_bytes_per_layer` of the arguments, kept for the
        job's shape (one layer reads neither the pipeline, the context degree nor the micro-batches per step), under
        the fields of the batch and saving (their dataclasses compare and hash as these) and a mixture of experts'
        ``routing`` (expert_tensor, load_factor)."""
        if shape is not self.job.shape:
            return activation_bytes_per_layer(shape, batch, saving, tensor_parallel, element_bytes=element_bytes,
                                              **routing)  # type: ignore[arg-type]
        key = ("layer", batch.sequence_length, batch.micro_batch, saving.recompute, saving.sequence_parallel,
               saving.flash_attention, tensor_parallel, element_bytes, *sorted(routing.items()))
        counted = self._shared.get(key)
        if counted is None:  # a raise keeps nothing
            counted = self._shared[key] = activation_bytes_per_layer(shape, batch, saving, tensor_parallel,
                                                                     element_bytes=element_bytes,
                                                                     **routing)  # type: ignore[arg-type]
        return counted

    def largest_fitting_micro_batch(self, layout: Layout, limit: int) -> int | None:
        """Returns :func:`largest_fitting_micro_batch` of the job on ``layout``."""
        sized, held = self.sized(layout)
        # The buffers do not depend on the micro-batch: kept at the first one asked (a raise is not kept).
        return most_fitting(lambda micro_batch: self._fits(sized, held, micro_batch,
                                                           lambda: self._layout_buffers(sized, held, True)), limit)

    def memory_min_gpus(self, layout: Layout) -> int | None:
        """Returns :func:`memory_min_gpus` of the job from ``layout``."""
        plain, job, settings = layout, self.job, self.settings

        def fits_on(gpus: int) -> bool:
            try:
                sized, held = self.sized(resized(plain, gpus))
                return bool(self._fits(sized, held, job.batch.micro_batch,
                                       lambda: self._layout_buffers(sized, held, True)))
            except InconsistentInput:  # the estimators refuse the layout on this many GPUs
                return False

        sharding = effective_sharding(plain.sharding, settings.convention)  # what each count is sized under
        return self._keep(("fewest", plain, job.batch, job.saving, job.virtual_stages),
                          lambda: fewest_fitting_gpus(plain, sharding, fits_on, MAX_SEARCH_GPUS))

    def no_fit_reason(self, layout: Layout) -> str | None:
        """Returns :func:`no_fit_reason` of the job from ``layout``."""
        if self.memory_min_gpus(layout) is not None:
            return None
        gpus = max(1, MAX_SEARCH_GPUS // (unit := layout.whole_unit_gpus)) * unit  # the largest count searched
        try:
            estimate = self.estimate(resized(layout, gpus))
        except InconsistentInput as error:
            return f"no GPU count fits this layout: {error}"
        if estimate.fits is None or estimate.fits:  # unknown (on every count), or found by memory_min_gpus
            return None
        return (f"no GPU count fits memory: under {estimate.sharding} one training step needs "
                f"{estimate.total_bytes / GIB:,.1f} GiB per GPU even on {gpus:,} GPUs, more than the "
                f"{estimate.usable_bytes / GIB:,.1f} GiB usable")


def largest_fitting_micro_batch(job: TrainingJob, layout: Layout, gpu_memory_gib: float, settings: MemorySettings,
                                limit: int) -> int | None:
    """Returns the largest micro-batch ≤ ``limit`` whose step fits usable memory: 0 if none, None if unknown.

    Bisection over :func:`training_memory` at micro-batch m; activation memory grows with m (Korthikanti et
    al. 2022, Table 2), so the fitting micro-batches are 1..k. The model state and the communication buffers
    do not depend on the micro-batch: they are sized once, and each micro-batch tried adds its activations.
    """
    return StepMemoryModel(job, gpu_memory_gib, settings).largest_fitting_micro_batch(layout, limit)


def memory_min_gpus(job: TrainingJob, layout: Layout, gpu_memory_gib: float, settings: MemorySettings) -> int | None:
    """Returns the fewest GPUs (whole nodes and model-parallel groups) on which one step fits, None if none does.

    :func:`training_memory` on n ≤ MAX_SEARCH_GPUS GPUs. More ranks shard the state further (ZeRO §5), but
    the step is not monotone in n: a second replica adds NCCL communicators, and fsdp-hybrid's shard group
    follows n's divisors. Among counts with the same shard group and communicators it does not grow with n:
    each such class is bisected, and the least answer is the fewest (rules/estimates/search/fitting_counts.py). A
    count on which the estimators refuse the layout does not fit; unknown activations fit nowhere.
    """
    return StepMemoryModel(job, gpu_memory_gib, settings).memory_min_gpus(layout)


def no_fit_reason(job: TrainingJob, layout: Layout, gpu_memory_gib: float, settings: MemorySettings) -> str | None:
    """Returns why no GPU count up to MAX_SEARCH_GPUS fits one step in memory; None when one does or it is unknown.

    None whenever :func:`memory_min_gpus` finds a count; else it quotes the need (or the estimators' refusal)
    at the largest count searched, where the state is sharded furthest."""
    return StepMemoryModel(job, gpu_memory_gib, settings).no_fit_reason(layout)

"""The fastest parallel layouts for a GPU count: enumerate, keep those that fit memory, rank by step time.

For a node group's GPU count the search enumerates tensor (inside the NVLink domain) × pipeline (× virtual
stages) × context × data parallel degrees, micro-batch, activation recompute, sharding and, where the GPU
has FP8 Tensor Cores, FP8 GEMMs; keeps the layouts whose most loaded GPU fits the memory budget (the
training-memory estimator, ``rules.estimates.memory.step_memory``); and ranks them by the modelled step time
(``rules.estimates.training_time.step_time``). Sequence parallelism is on whenever tensor parallelism is (it only
removes
work and memory in both models); context parallelism needs FlashAttention (ring attention runs on it).

It stays fast by pruning before it models: degrees that do not divide the GPUs, heads, layers or batch are
never built; a layout's memory is summed from pieces memoised on the few degrees each depends on, looked up
once per degree combination (model state per sharding and precision, activations per recompute and width,
buffers only when the rest fits), with the space, shape and convention refused at the search's entry, before
any layout is built; the step time is modelled only for layouts
that fit, with the per-layer work memoised by ``StepTimeModel``, each (recompute, precision) stage of a
combination modelled once, and only when the layout's steady state alone (m micro-batches on its slowest
stage, a lower bound of its step) is faster than the slowest of the best found so far.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from rules.estimates._args import require_bool, require_choice, require_positive, require_positive_int
from rules.estimates.memory.activation_conventions import (
    ActivationCounting,
    activation_element_bytes,
    counted_activation_bytes,
)
from rules.estimates.memory.activations import (
    FP32_LOGITS_BYTES,
    ActivationSaving,
    BatchShape,
    PipelineSchedule,
    logits_bytes,
)
from rules.estimates.memory.comm_buffers import (
    BufferInputs,
    CommunicationSettings,
    communication_buffers,
    nccl_communicator_bytes,
)
from rules.estimates.memory.model_state import (
    gathered_parameters_bytes,
    model_state_bytes_per_param,
    model_state_per_gpu_bytes,
)
from rules.estimates.model import shapes
from rules.estimates.model.layout import Layout as TrainingLayout
from rules.estimates.training_time.step_time import Layout, StageTime, StepTime, StepTimeModel
from rules.estimates.training_time.transformer_work import RECOMPUTE_MODES, LayerSlice, ModelShape

GIB: Final = 2**30
_PARAMETER_SHARDED: Final = ("zero3", "fsdp-full")


@dataclass(frozen=True)
class SearchSpace:
    """The degrees and choices the search may combine (each filtered by what the model and GPUs allow)."""

    tensor: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    pipeline: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    virtual_stages: tuple[int, ...] = (1, 2, 4)
    context: tuple[int, ...] = (1, 2, 4, 8)
    micro_batch: tuple[int, ...] = (1, 2, 4, 8)
    recompute: tuple[str, ...] = RECOMPUTE_MODES
    sharding: tuple[str, ...] = ("ddp", "zero1", "zero2", "zero3")
    precisions: tuple[str, ...] = ("bf16-mixed", "fp8-mixed")  # fp8-mixed only where the GPU has FP8
    flash_attention: bool = True


@dataclass(frozen=True)
class MemoryConvention:
    """How the memory estimator counts model state (``rules.estimates.memory.step_memory``; the policy names them)."""

    optimizer: str = "adamw"
    convention: str = "zero-paper"  # policy conventions.model_state_bytes
    gathered_layers: int = 2  # policy memory.gathered_layers: layers held unsharded under ZeRO-3
    activations: str = "physical"  # policy conventions.activations: how activation memory is counted
    communication: CommunicationSettings | None = None  # policy memory.nccl_channels; None: buffers not counted


@dataclass(frozen=True)
class RankedLayout:
    """A layout that fits, its modelled step and the estimated bytes on its most loaded GPU."""

    layout: Layout
    step: StepTime
    memory_bytes: float


@dataclass(frozen=True)
class LayoutSearch:
    """What the search looked at and what it found, fastest first."""

    searched: int  # layouts enumerated (valid degree combinations)
    fitting: int  # of those, layouts whose most loaded GPU fits the memory budget
    top: tuple[RankedLayout, ...]  # the fastest, at most top_n

    @property
    def best(self) -> RankedLayout | None:
        return self.top[0] if self.top else None


def memory_budget_bytes(memory_gib: float, memory_policy: Mapping[str, Any],
                        cuda_context_gib: float | None = None) -> float:
    """Return the bytes of estimated tensors a GPU may hold under the policy's ``memory`` section.

    A layout fits when tensors × (1 + allocator fragmentation) + CUDA context ≤ capacity × (1 − headroom),
    the same reading of ``headroom_fraction``, ``cuda_context_gib`` and ``allocator_fragmentation_fraction``
    as the peak-memory check's (schemas/policy.schema.json describes each key). ``cuda_context_gib``: the
    context the peak-memory check uses for this GPU (rules/estimates/memory/gpu_context.py); None: the policy's.
    """
    require_positive("memory_gib", memory_gib)
    context_gib = memory_policy["cuda_context_gib"] if cuda_context_gib is None else cuda_context_gib
    usable = memory_gib * (1 - memory_policy["headroom_fraction"]) - context_gib
    return max(0.0, usable) * GIB / (1 + memory_policy["allocator_fragmentation_fraction"])


def _divides(whole: int, part: int) -> bool:
    return whole % part == 0


def _degrees(model: StepTimeModel, gpus: int, global_batch: int,
             space: SearchSpace) -> Iterator[tuple[int, int, int, int, int, int]]:
    """Yield (tensor, pipeline, virtual, context, data, micro_batch) combinations the model can run."""
    shape, domain = model.shape, model.hardware.nvlink_domain_gpus
    groups = shape.groups
    for t in space.tensor:
        if t > domain or not _divides(gpus, t) or not _divides(shape.heads, t) or not _divides(groups, min(t, groups)):
            continue
        for p in space.pipeline:
            if not _divides(gpus // t, p) or p > shape.layers:
                continue
            for c in space.context:
                if not _divides(gpus // (t * p), c) or not _divides(shape.sequence_length, c):
                    continue
                if c > 1 and not space.flash_attention:
                    continue
                d = gpus // (t * p * c)
                for b in space.micro_batch:
                    if not _divides(global_batch, b * d):
                        continue
                    m = global_batch // (b * d)
                    for v in space.virtual_stages:
                        if (v > 1 and (p == 1 or not _divides(m, p))) or not _divides(shape.layers, p * v):
                            continue
                        yield t, p, v, c, d, b


def search_layouts(model: StepTimeModel, gpus: int, global_batch: int, memory_budget: float,
                   space: SearchSpace | None = None, memory: MemoryConvention | None = None,
                   top_n: int = 10) -> LayoutSearch:
    """Return the layouts of ``gpus`` GPUs that fit ``memory_budget`` bytes per GPU, fastest first.

    ``global_batch`` is in sequences. Interleaving (v > 1) needs p > 1 and m divisible by p, as
    Megatron-LM's interleaved schedule does; layers must split evenly over p·v chunks. Steps equal to the
    microsecond are ties, won by the layout enumerated first: lower degrees, smaller micro-batch, less
    recompute, less aggressive sharding, bf16 before fp8, so that of equally fast layouts the simplest wins.
    """
    require_positive_int("gpus", gpus)
    require_positive_int("global_batch", global_batch)
    require_positive_int("top_n", top_n)
    space = space or SearchSpace()
    memory = memory or MemoryConvention()
    _check_space(space)
    precisions = [q for q in space.precisions if q != "fp8-mixed" or model.hardware.fp8_tflops is not None]
    memory_of = _MemoryModel(model.shape, memory, space.flash_attention)
    # Per precision: the precision its model state is sized as, and its activations' element width.
    widths = [(q, _state_precision(q), activation_element_bytes(q)) for q in precisions]
    searched = fitting = 0
    heap: list[tuple[float, int, RankedLayout]] = []  # min-heap of (−step, −order): its root is the slowest kept
    slowest = math.inf  # once top_n are kept, the slowest kept step (to the µs), which a new layout must not exceed
    for t, p, v, c, d, b in _degrees(model, gpus, global_batch, space):
        part = LayerSlice(micro_batch=b, tensor=t, context=c, sequence_parallel=t > 1,
                          flash_attention=space.flash_attention)
        m = global_batch // (b * d)
        in_flight = min(p, m)
        # What does not depend on recompute (model state by sharding) or on sharding (activations).
        held = [[memory_of.state(t, p, d * c, sharding, state_q) for _, state_q, _ in widths]
                for sharding in space.sharding]
        for recompute in space.recompute:
            stored = [memory_of.activations(t, p, v, c, b, in_flight, recompute, width) for _, _, width in widths]
            stages: list[StageTime | None] = [None] * len(widths)  # per precision, modelled when first needed
            bounds = [0.0] * len(widths)  # the m steady-state stages alone, to the µs: a lower bound of the step
            for sharding, held_of in zip(space.sharding, held, strict=True):
                for k, (precision, state_q, _) in enumerate(widths):
                    searched += 1
                    used = held_of[k] + stored[k]
                    if used > memory_budget:  # buffers are ≥ 0: adding them cannot bring it back under
                        continue
                    used += memory_of.buffers(t, p, c, d, sharding, state_q)
                    if used > memory_budget:
                        continue
                    fitting += 1
                    stage = stages[k]
                    if stage is None:
                        stage = stages[k] = model.stage(part, recompute, precision, p, v)
                        bounds[k] = _rounded(m * stage.total_s)
                    if bounds[k] > slowest:  # it cannot enter the top
                        continue
                    layout = Layout(micro_batch=b, global_batch=global_batch, tensor=t, pipeline=p,
                                    virtual_stages=v, context=c, data=d, recompute=recompute,
                                    sequence_parallel=t > 1, flash_attention=space.flash_attention,
                                    sharding=sharding, precision=precision)
                    step = model.evaluate(layout, stage)
                    entry = (-_rounded(step.step_s), -searched, RankedLayout(layout, step, used))
                    if len(heap) < top_n:
                        heapq.heappush(heap, entry)
                    elif entry[:2] > heap[0][:2]:
                        heapq.heapreplace(heap, entry)
                    if len(heap) == top_n:
                        slowest = -heap[0][0]
    top = tuple(entry[2] for entry in sorted(heap, key=lambda e: e[:2], reverse=True))
    return LayoutSearch(searched=searched, fitting=fitting, top=top)


def _check_space(space: SearchSpace) -> None:
    """Raise InconsistentInput unless every degree is a positive integer and every recompute mode is known."""
    for name in ("tensor", "pipeline", "virtual_stages", "context", "micro_batch"):
        for degree in getattr(space, name):
            require_positive_int(name, degree)
    for recompute in space.recompute:
        require_choice("recompute", recompute, RECOMPUTE_MODES)
    require_bool("flash_attention", space.flash_attention)


def _rounded(step_s: float) -> float:
    """Return a step time to the microsecond, below which two modelled layouts are equally fast."""
    return round(step_s, 6)


def _state_precision(precision: str) -> str:
    """Return the precision a layout's model state is sized as: FP8 GEMMs keep bf16-mixed's state."""
    return "bf16-mixed" if precision == "fp8-mixed" else precision


class _MemoryModel:
    """The bytes on a layout's most loaded GPU, in three pieces memoised on the few degrees each depends on.

    The only place this module calls the memory estimator; a layout's bytes are state + activations +
    buffers, summed in that order. Model state (ZeRO §5 by sharding over the d·c replicas), activations on
    the first pipeline stage (Korthikanti et al. 2022 §4, with the tokens s/c of a context-parallel rank), the
    fp32 logits of the last stage when it is another stage (counted on top, which overstates a little), under
    ZeRO-3 the gathered layers, and the communication buffers (rules/estimates/memory/comm_buffers.py; NCCL's are
    counted as tensors, so the budget's fragmentation share overstates them by that share). Activations are
    counted under the policy's activation convention at the precision's width
    (``rules.estimates.memory.activation_conventions``). FP8 GEMMs keep 16-bit activations and fp32 master state,
    so they are sized as bf16-mixed (``_state_precision``). Built per search: nothing outlives it.
    """

    def __init__(self, shape: ModelShape, memory: MemoryConvention, flash_attention: bool) -> None:
        self.shape, self.memory, self.flash_attention = shape, memory, flash_attention
        self.parameters = shape.parameters()
        self.memory_shape = shapes.ModelShape(
            layers=shape.layers, hidden=shape.hidden, heads=shape.heads, kv_heads=shape.kv_heads,
            ffn_hidden=shape.ffn_hidden, vocab=shape.vocab, mlp=shape.mlp, dropout=shape.dropout,
            tied_embeddings=shape.tied_embeddings)
        # The shape and convention refused here, before any layout is built, if the estimators cannot count them.
        counted_activation_bytes(ActivationCounting(memory.activations), self.memory_shape,
                                 BatchShape(sequence_length=shape.sequence_length, micro_batch=1),
                                 ActivationSaving(flash_attention=flash_attention), tensor_parallel=1,
                                 pipeline=PipelineSchedule())
        logits_bytes(shape.sequence_length, 1, shape.vocab, shape.hidden)
        if memory.communication is not None:
            nccl_communicator_bytes(memory.communication)
        # The estimators' small inputs, built once each.
        self.counting, self.batch = cache(ActivationCounting), cache(BatchShape)
        self.saving, self.schedule = cache(ActivationSaving), cache(PipelineSchedule)
        self.state = cache(self._state)
        self.buffers = cache(self._buffers)
        self.activations = cache(self._activations)

    def _state(self, t: int, p: int, replicas: int, sharding: str, precision: str) -> float:
        memory, parameters = self.memory, self.parameters
        per_param = model_state_bytes_per_param(precision, memory.optimizer, memory.convention, sharding)
        held = model_state_per_gpu_bytes(parameters, parameters, per_param, sharding, data_parallel=replicas,
                                         tensor_parallel=t, pipeline_parallel=p)
        gathered = 0.0
        if sharding in _PARAMETER_SHARDED:
            gathered = gathered_parameters_bytes(self.shape.layer_parameters() / t,
                                                 prefetch_layers=memory.gathered_layers - 1)
        return held.gpu_total_bytes + gathered

    def _buffers(self, t: int, p: int, c: int, d: int, sharding: str, precision: str) -> float:
        memory, parameters = self.memory, self.parameters
        if memory.communication is None:
            return 0.0
        per_param = model_state_bytes_per_param(precision, memory.optimizer, memory.convention)
        held = model_state_per_gpu_bytes(parameters, parameters, per_param, sharding, data_parallel=d * c,
                                         tensor_parallel=t, pipeline_parallel=p)
        gpus = t * p * c * d
        ranks = TrainingLayout(gpus=gpus, gpus_per_node=gpus, nodes=1, tensor=t, pipeline=p, data_parallel=d,
                               sharding=sharding, shard_group=None, context=c)
        inputs = BufferInputs(layout=ranks, convention=memory.convention, gradients_on_gpu_bytes=held.gradients_bytes,
                              working_bytes_per_param=per_param.weights_bytes_per_param, largest_unit_parameters=None)
        return communication_buffers(inputs, memory.communication).total_bytes

    def _activations(self, t: int, p: int, v: int, c: int, b: int, in_flight: int, recompute: str,
                     element_bytes: int) -> float:
        shape = self.shape
        tokens = shape.sequence_length // c
        total = counted_activation_bytes(
            self.counting(self.memory.activations, element_bytes), self.memory_shape, self.batch(tokens, b),
            self.saving(recompute, t > 1, self.flash_attention), t, self.schedule(p, v, in_flight))
        if p > 1:
            total += logits_bytes(tokens, b, shape.vocab, shape.hidden, t, t > 1, FP32_LOGITS_BYTES, element_bytes)
        return total

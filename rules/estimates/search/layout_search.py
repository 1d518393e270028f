"""The fastest parallel layouts for a GPU count: enumerate, keep those that fit memory, rank by step time.

For a node group's GPU count the search enumerates tensor (inside the NVLink domain) × pipeline (× virtual
stages) × context × data parallel degrees, micro-batch, activation recompute, sharding and, where the GPU
has FP8 Tensor Cores, FP8 GEMMs; keeps the layouts whose step fits the GPU's usable memory as the
peak-memory check sizes it (``rules.estimates.memory.step_memory.StepMemoryModel``, the very model the checks
call, on the submitted job with the candidate's micro-batch, activation saving, virtual stages and precision,
without offload); and ranks them by the modelled step time (``rules.estimates.training_time.step_time``, which
the checks call too). Sequence parallelism is on whenever tensor parallelism is (it only removes work and memory
in both models); context parallelism needs FlashAttention (ring attention runs on it).

A candidate the memory model refuses (a convention that cannot size that sharding on that layout) is skipped
and counted by reason, never raised. It stays fast by pruning before it models: degrees that do not divide the
GPUs, heads, layers or batch are never built; the memory models keep what repeats (the state on a layout, the
activations per micro-batch and degree); the step time is modelled only for layouts that fit, with the
per-layer work memoised by ``StepTimeModel``, each (recompute, precision) stage of a combination modelled once,
and only when the layout's steady state alone (m micro-batches on its slowest stage, a lower bound of its step)
is faster than the slowest of the best found so far.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from rules.errors import InconsistentInput
from rules.estimates._args import require_bool, require_choice, require_positive_int
from rules.estimates.memory.activations import ActivationSaving
from rules.estimates.memory.step_figures import StepTerms
from rules.estimates.memory.step_memory import (
    MemorySettings,
    StepMemoryModel,
    TrainingBatch,
    TrainingJob,
)
from rules.estimates.memory.training_state import TrainingModelState
from rules.estimates.model.layout import Layout as TrainingLayout
from rules.estimates.model.layout import training_layout
from rules.estimates.training_time.step_time import Layout, StageTime, StepTime, StepTimeModel
from rules.estimates.training_time.transformer_work import RECOMPUTE_MODES, LayerSlice


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
class SearchMemory:
    """What the peak-memory check sizes a layout with: the job, one GPU's memory and the policy's settings."""

    job: TrainingJob  # the submitted job (rules/checks/facts/memory.py); each candidate replaces its layout's part
    gpu_memory_gib: float
    gpus_per_node: int  # the quoted node's GPUs: the layout's nodes and its NCCL communicators follow them
    settings: MemorySettings


@dataclass(frozen=True)
class RankedLayout:
    """A layout that fits, its modelled step and the estimated bytes on its most loaded GPU."""

    layout: Layout
    step: StepTime
    memory_bytes: float  # the peak-memory check's total: state, activations, buffers, CUDA context, fragmentation


@dataclass(frozen=True)
class LayoutSearch:
    """What the search looked at and what it found, fastest first."""

    searched: int  # layouts enumerated (valid degree combinations)
    fitting: int  # of those, layouts whose most loaded GPU fits its usable memory
    top: tuple[RankedLayout, ...]  # the fastest, at most top_n
    skipped: dict[str, int] = field(default_factory=dict)  # of those, layouts the memory model refuses, by reason

    @property
    def skipped_count(self) -> int:
        """Returns the layouts searched that the memory model could not size (neither fitting nor not)."""
        return sum(self.skipped.values())

    @property
    def best(self) -> RankedLayout | None:
        return self.top[0] if self.top else None


def _divides(whole: int, part: int) -> bool:
    return whole % part == 0


def _degrees(model: StepTimeModel, gpus: int, global_batch: int,
             space: SearchSpace) -> Iterator[tuple[int, int, int, int, int, int]]:
    """Yield (tensor, pipeline, virtual, context, data, micro_batch) combinations the model can run."""
    shape, domain = model.shape, model.hardware.domain_gpus
    groups = shape.kv_head_count
    for t in space.tensor:
        if t > domain or not _divides(gpus, t) or not _divides(shape.heads, t) or not _divides(groups, min(t, groups)):
            continue
        for p in space.pipeline:
            if not _divides(gpus // t, p) or p > shape.layers:
                continue
            for c in space.context:
                if not _divides(gpus // (t * p), c) or not _divides(model.sequence_length, c):
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


def search_layouts(model: StepTimeModel, gpus: int, global_batch: int, memory: SearchMemory,
                   space: SearchSpace | None = None, top_n: int = 10) -> LayoutSearch:
    """Return the layouts of ``gpus`` GPUs whose step fits memory as the peak-memory check sizes it, fastest first.

    ``global_batch`` is in sequences. Interleaving (v > 1) needs p > 1 and m divisible by p, as
    Megatron-LM's interleaved schedule does; layers must split evenly over p·v chunks. Steps equal to the
    microsecond are ties, won by the layout enumerated first: lower degrees, smaller micro-batch, less
    recompute, less aggressive sharding, bf16 before fp8, so that of equally fast layouts the simplest wins.
    A layout the memory model refuses (InconsistentInput) is counted in ``skipped`` under its reason.
    """
    require_positive_int("gpus", gpus)
    require_positive_int("global_batch", global_batch)
    require_positive_int("top_n", top_n)
    space = space or SearchSpace()
    _check_space(space)
    precisions = [q for q in space.precisions if q != "fp8-mixed" or model.hardware.gpu.fp8_tflops is not None]
    memory_of = _CandidateMemory(memory, gpus, global_batch, space.flash_attention)
    searched = fitting = 0
    skipped: Counter[str] = Counter()
    heap: list[tuple[float, int, RankedLayout]] = []  # min-heap of (−step, −order): its root is the slowest kept
    slowest = math.inf  # once top_n are kept, the slowest kept step (to the µs), which a new layout must not exceed
    for t, p, v, c, d, b in _degrees(model, gpus, global_batch, space):
        part = LayerSlice(model.sequence_length, micro_batch=b, tensor=t, context=c, sequence_parallel=t > 1,
                          flash_attention=space.flash_attention)
        m = global_batch // (b * d)
        for recompute in space.recompute:
            steps = [memory_of.step(q, recompute, v, t, p, c, b) for q in precisions]
            stages: list[StageTime | None] = [None] * len(precisions)  # per precision, modelled when first needed
            bounds = [0.0] * len(precisions)  # the m steady-state stages alone, to the µs: a lower bound of the step
            for sharding in space.sharding:
                for k, precision in enumerate(precisions):
                    searched += 1
                    try:
                        used = steps[k].fitting_bytes(sharding)
                    except InconsistentInput as refusal:  # a convention that cannot size this layout
                        skipped[str(refusal)] += 1
                        continue
                    if used is None:
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
    return LayoutSearch(searched=searched, fitting=fitting, top=top, skipped=dict(skipped))


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


class _CandidateMemory:
    """The peak-memory check's estimate of each candidate: a StepMemoryModel per precision, varied per candidate.

    A candidate's job is the submitted one with the candidate's precision, activation saving (recompute,
    sequence parallelism, FlashAttention), virtual stages and batch, and no offload (the best layout's patch
    removes it: rules/best_layout.py); its layout is :func:`rules.estimates.model.layout.training_layout` of the
    degrees on the quoted nodes. The models of one precision share what they keep (the state on each layout, its
    buffers; :meth:`StepMemoryModel.varied`), and all share the activations (kept under their counting:
    :meth:`StepMemoryModel.at_precision`). Here each term is also kept under the degrees that determine its
    inputs, so that a candidate costs one sum (:meth:`StepTerms.fitting_bytes`): the sized state and the terms
    that do not depend on the activations under (precision, t, p, c) and the sharding, the activations under
    (precision, recompute, v, t, p, c, micro-batch), which the shardings of a candidate share. Built per search:
    nothing outlives it.
    """

    def __init__(self, memory: SearchMemory, gpus: int, global_batch: int, flash_attention: bool) -> None:
        self.memory, self.gpus, self.flash_attention = memory, gpus, flash_attention
        self.batch = TrainingBatch(memory.job.batch.sequence_length, None, global_batch)
        job = replace(memory.job, offload="none")
        self.submitted = StepMemoryModel(job, memory.gpu_memory_gib, memory.settings)
        self.by_precision: dict[str, StepMemoryModel] = {}
        self.models: dict[tuple[str, str, bool, int], StepMemoryModel] = {}
        self.layouts: dict[tuple[int, int, int, str], TrainingLayout] = {}
        self.sized: dict[tuple[str, int, int, int], dict[str, _Sized]] = {}  # per sharding

    def model(self, precision: str, recompute: str, sequence_parallel: bool, virtual_stages: int) -> StepMemoryModel:
        """Returns the memory model of the job at a precision, recompute, sequence parallelism and virtual stages."""
        key = (precision, recompute, sequence_parallel, virtual_stages)
        model = self.models.get(key)
        if model is None:
            base = self.by_precision.get(precision)
            if base is None:
                base = self.by_precision[precision] = self.submitted.at_precision(precision)
            saving = ActivationSaving(recompute, sequence_parallel, self.flash_attention)
            model = self.models[key] = base.varied(saving, virtual_stages, self.batch)
        return model

    def step(self, precision: str, recompute: str, v: int, t: int, p: int, c: int, b: int) -> _CandidateStep:
        """Returns the sizer of a candidate's step under each sharding."""
        sized = self.sized.get((precision, t, p, c))
        if sized is None:
            sized = self.sized[(precision, t, p, c)] = {}
        return _CandidateStep(self, self.model(precision, recompute, t > 1, v), precision, (t, p, c), b, sized)

    def size(self, precision: str, t: int, p: int, c: int, sharding: str) -> _Sized:
        """Returns :meth:`StepMemoryModel.sized` of the degrees at a precision and sharding (its other terms not yet
        asked); InconsistentInput where the model refuses it."""
        layout = self.layouts.get((t, p, c, sharding))
        if layout is None:
            layout = self.layouts[(t, p, c, sharding)] = training_layout(
                self.gpus, self.memory.gpus_per_node, 0, tensor=t, pipeline=p, sharding=sharding, context=c)
        return _Sized(self.by_precision[precision].sized(layout))


class _Sized:
    """A candidate layout's sized model state and, once asked, its other terms but the activations."""

    __slots__ = ("sized", "terms")

    def __init__(self, sized: tuple[TrainingLayout, TrainingModelState]) -> None:
        self.sized = sized
        self.terms: StepTerms | None = None


class _CandidateStep:
    """One candidate's memory under each sharding: :meth:`StepTerms.fitting_bytes` of its terms, asked in the order
    :meth:`StepMemoryModel.estimate` asks them (state, activations, buffers), so that a refusal is the same."""

    __slots__ = ("memory", "model", "precision", "degrees", "micro_batch", "sized", "known", "activations")

    def __init__(self, memory: _CandidateMemory, model: StepMemoryModel, precision: str, degrees: tuple[int, int, int],
                 micro_batch: int, sized: dict[str, _Sized]) -> None:
        self.memory, self.model, self.precision, self.degrees = memory, model, precision, degrees
        self.micro_batch, self.sized = micro_batch, sized
        self.known = False  # whether the activations were counted (they do not depend on the sharding)
        self.activations: float | None = None

    def fitting_bytes(self, sharding: str) -> float | None:
        """Returns the estimate's total bytes under ``sharding`` when the step fits, None when it does not or is
        unknown; InconsistentInput where the model refuses it (a refusal is kept nowhere: asked again next time)."""
        sized = self.sized.get(sharding)
        if sized is None:
            sized = self.sized[sharding] = self.memory.size(self.precision, *self.degrees, sharding)
        if not self.known:
            self.activations = self.model.activations(sized.sized, self.micro_batch)
            self.known = True
        terms = sized.terms
        if terms is None:
            terms = sized.terms = self.model.terms(sized.sized)
        return terms.fitting_bytes(self.activations)

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
and only when the layout's steady state and bubble alone ((m + (p − 1)/v) stages on its slowest,
``StepTimeModel.least_step_s``, a lower bound of its step) are faster than the slowest of the best found so far.
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
from rules.estimates.model.layout import Layout, training_layout, with_sharding
from rules.estimates.training_time.step_time import StageTime, StepTime, StepTimeModel
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

    A candidate's fit is :meth:`StepTerms.fitting_bytes` of its terms and activations, asked in the order
    :meth:`StepMemoryModel.estimate` asks them (state, activations, buffers), so that a refusal is the same one:
    the state's is kept per layout, the activations are counted once per precision for every sharding, and the
    other terms are kept per layout. Activations within :meth:`StepTerms.activation_bounds` decide the fit
    without the sum; the sum is asked of those between the bounds and of every layout ranked.
    """
    require_positive_int("gpus", gpus)
    require_positive_int("global_batch", global_batch)
    require_positive_int("top_n", top_n)
    space = space or SearchSpace()
    _check_space(space)
    precisions = [q for q in space.precisions if q != "fp8-mixed" or model.hardware.gpu.fp8_tflops is not None]
    memory_of = _CandidateMemory(memory, gpus, global_batch, space.flash_attention, precisions, space.sharding)
    searched = fitting = 0
    skipped: Counter[str] = Counter()
    heap: list[tuple[float, int, RankedLayout]] = []  # min-heap of (−step, −order): its root is the slowest kept
    slowest = math.inf  # once top_n are kept, the slowest kept step (to the µs), which a new layout must not exceed
    kinds, alikes = range(len(precisions)), memory_of.alike
    shardings = list(enumerate(space.sharding))
    flash_attention = space.flash_attention
    for t, p, v, c, d, b in _degrees(model, gpus, global_batch, space):
        part = LayerSlice(model.sequence_length, micro_batch=b, tensor=t, context=c, sequence_parallel=t > 1,
                          flash_attention=flash_attention)
        m = global_batch // (b * d)
        sized_of = memory_of.sized(t, p, c)
        for recompute in space.recompute:
            models = memory_of.models(recompute, t > 1, v)
            counted: list[float | None | _Unasked] = [_UNASKED] * len(precisions)  # activations, per precision
            stages: list[StageTime | None] = [None] * len(precisions)  # per precision, modelled when first needed
            bounds = [0.0] * len(precisions)  # a lower bound of the step, to the µs (StepTimeModel.least_step_s)
            for j, sharding in shardings:
                row = sized_of[j]
                for k in kinds:
                    searched += 1
                    sized = row[k]
                    if sized.reason is not None:  # the state's refusal (a convention that cannot size this layout)
                        skipped[sized.reason] += 1
                        continue
                    alike = alikes[k]  # the precision whose activations these are (counted alike)
                    activations = counted[alike]
                    if activations is _UNASKED or sized.terms is None:
                        try:
                            if activations is _UNASKED:
                                activations = counted[alike] = models[k].activations(sized.sized, b)
                            if sized.terms is None:
                                sized.size_terms(models[k])
                        except InconsistentInput as refusal:
                            skipped[str(refusal)] += 1
                            continue
                    if activations is None or activations > sized.no_fit:  # unknown, or it does not fit
                        continue
                    if activations > sized.fit and sized.terms.fitting_bytes(activations) is None:
                        continue
                    fitting += 1
                    stage = stages[k]
                    if stage is None:
                        precision = precisions[k]
                        stage = stages[k] = model.stage(part, recompute, precision, p, v)
                        bounds[k] = _rounded(model.least_step_s(stage, m, p, v))
                    if bounds[k] > slowest:  # it cannot enter the top
                        continue
                    used = sized.terms.fitting_bytes(activations)
                    split = memory_of.layout(t, p, c, sharding)
                    layout = Layout(split.gpus, split.gpus_per_node, split.nodes, t, p, split.data_parallel, sharding,
                                    split.shard_group, c, v, b, global_batch, recompute, t > 1, flash_attention,
                                    precisions[k])
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
    removes it: rules/advice/best_layout.py); its layout is :func:`rules.estimates.model.layout.training_layout` of the
    degrees on the quoted nodes. The models of one precision share what they keep (the state on each layout;
    :meth:`StepMemoryModel.varied`), and all share the activations and buffers (kept under what they read:
    :meth:`StepMemoryModel.at_precision`). Here each term is also kept under the degrees that determine its
    inputs, so that a candidate costs a comparison (:meth:`StepTerms.activation_bounds`) or one sum
    (:meth:`StepTerms.fitting_bytes`): the sized state and the terms that do not depend on the activations per
    (t, p, c), sharding and precision (:meth:`sized`); the activations per (recompute, v, t, p, c, micro-batch) and
    precision, which the shardings of a candidate share (:func:`search_layouts` keeps them). Built per search:
    nothing outlives it.
    """

    def __init__(self, memory: SearchMemory, gpus: int, global_batch: int, flash_attention: bool,
                 precisions: list[str], shardings: tuple[str, ...]) -> None:
        self.memory, self.gpus, self.flash_attention = memory, gpus, flash_attention
        self.shardings = shardings
        batch = TrainingBatch(memory.job.batch.sequence_length, None, global_batch)
        submitted = StepMemoryModel(replace(memory.job, offload="none"), memory.gpu_memory_gib, memory.settings)
        self.batch, self.by_precision = batch, [submitted.at_precision(q) for q in precisions]
        # Per precision, the first whose model sizes every sharding alike (itself if none): its candidates are sized
        # once, with the same state, terms and activations (StepMemoryModel.precision_figures).
        self.alike = [next((j for j in range(k) if self._alike(j, k)), k) for k in range(len(precisions))]
        # Per (recompute, sequence parallelism, virtual stages): the model of each precision, varied.
        self.models_kept: dict[tuple[str, bool, int], list[StepMemoryModel]] = {}
        self.sized_kept: dict[tuple[int, int, int], list[list[_Sized]]] = {}  # per sharding, per precision
        self.layouts: dict[tuple[int, int, int, str], Layout] = {}

    def _alike(self, first: int, second: int) -> bool:
        """Returns whether the models of two precisions size every step of every sharding searched alike."""
        models = self.by_precision
        try:
            return all(models[first].precision_figures(sharding) == models[second].precision_figures(sharding)
                       for sharding in self.shardings)
        except InconsistentInput:  # a precision or sharding the estimators refuse: each is sized (and refused) alone
            return False

    def sized(self, t: int, p: int, c: int) -> list[list[_Sized]]:
        """Returns the layout of the degrees sized under each sharding and precision (kept under the degrees): the
        degrees' layout, built once, under each sharding (:func:`with_sharding`, what training_layout builds)."""
        sized = self.sized_kept.get((t, p, c))
        if sized is None:
            try:
                plain = training_layout(self.gpus, self.memory.gpus_per_node, 0, tensor=t, pipeline=p, context=c)
                sized = [self._size(with_sharding(plain, sharding), (t, p, c, sharding)) for sharding in self.shardings]
            except InconsistentInput as refusal:  # the degrees do not divide the GPUs
                sized = [[_Sized(None, refusal) for _ in self.by_precision] for _ in self.shardings]
            self.sized_kept[(t, p, c)] = sized
        return sized

    def models(self, recompute: str, sequence_parallel: bool, v: int) -> list[StepMemoryModel]:
        """Returns the model of each precision with the recompute, sequence parallelism and virtual stages (kept)."""
        key = (recompute, sequence_parallel, v)
        models = self.models_kept.get(key)
        if models is None:
            saving = ActivationSaving(recompute, sequence_parallel, self.flash_attention)
            models = self.models_kept[key] = [base.varied(saving, v, self.batch) for base in self.by_precision]
        return models

    def layout(self, t: int, p: int, c: int, sharding: str) -> Layout:
        """Returns the layout of the degrees on the search's GPUs and the quoted nodes (kept under the degrees)."""
        key = (t, p, c, sharding)
        layout = self.layouts.get(key)
        if layout is None:
            layout = self.layouts[key] = training_layout(self.gpus, self.memory.gpus_per_node, 0, tensor=t,
                                                         pipeline=p, sharding=sharding, context=c)
        return layout

    def _size(self, layout: Layout, key: tuple[int, int, int, str]) -> list[_Sized]:
        """Returns :meth:`StepMemoryModel.sized` of the layout at each precision (once for precisions sized alike), or
        its refusal; keeps the layout."""
        self.layouts[key] = layout
        row: list[_Sized] = []
        for base, alike in zip(self.by_precision, self.alike, strict=True):
            if alike < len(row):  # sized as an earlier precision: the same sizing
                row.append(row[alike])
                continue
            try:
                row.append(_Sized(base.sized(layout), None))
            except InconsistentInput as refusal:
                row.append(_Sized(None, refusal))
        return row


class _Unasked:
    """The activations of a precision not yet asked for (None is an answer: unknown activations)."""


_UNASKED = _Unasked()


class _Sized:
    """A candidate layout's sized model state (or the reason the model refused it) and, once asked, its other terms
    but the activations, with their :meth:`StepTerms.activation_bounds`."""

    __slots__ = ("sized", "reason", "terms", "fit", "no_fit")

    def __init__(self, sized: tuple[Layout, TrainingModelState] | None, refusal: InconsistentInput | None):
        self.sized, self.reason = sized, None if refusal is None else str(refusal)
        self.terms: StepTerms | None = None
        self.fit = self.no_fit = 0.0

    def size_terms(self, model: StepMemoryModel) -> None:
        """Sizes the terms on the layout with ``model`` (raising its refusal, keeping nothing then)."""
        terms = model.terms(self.sized)  # type: ignore[arg-type]
        self.fit, self.no_fit = terms.activation_bounds()
        self.terms = terms

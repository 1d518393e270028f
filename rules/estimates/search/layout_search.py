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
from rules.estimates.training_time.fp8_casts import FP8_RECIPES
from rules.estimates.training_time.memory_bound import KERNEL_STYLES
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
    expert: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)  # of a mixture of experts: degrees that divide its experts
    recompute: tuple[str, ...] = RECOMPUTE_MODES
    sharding: tuple[str, ...] = ("ddp", "zero1", "zero2", "zero3")
    precisions: tuple[str, ...] = ("bf16-mixed", "fp8-mixed")  # fp8-mixed only where the GPU has FP8
    flash_attention: bool = True
    tensor_comm_overlap: bool = False  # as the job runs it: a framework setting, not a degree the search varies
    kernels: str = "fused"  # likewise: who writes the memory-bound kernels (fused, compiled, eager)
    fp8_recipe: str = "delayed"  # likewise: the scaling recipe of the fp8-mixed layouts


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


def _expert_degrees(model: StepTimeModel, gpus: int, pipeline: int, space: SearchSpace) -> tuple[int, ...]:
    """Returns the expert-parallel degrees of a mixture of experts on ``pipeline`` stages: those that divide its experts
    and whose expert grid (expert × pipeline, expert_tensor 1) divides the GPUs (Megatron-Core's validation,
    ``rules.estimates.model.layout.require_expert_grid``); (1,) for a dense model."""
    experts = model.shape.experts
    if experts is None:
        return (1,)
    return tuple(e for e in space.expert if _divides(experts.count, e) and _divides(gpus, e * pipeline))


def _degrees(model: StepTimeModel, gpus: int, global_batch: int,
             space: SearchSpace) -> Iterator[tuple[int, int, int, int, int, int, int]]:
    """Yield (tensor, pipeline, virtual, context, data, micro_batch, expert) combinations the model can run."""
    shape, domain = model.shape, model.hardware.domain_gpus
    groups = shape.kv_head_count
    for t in space.tensor:
        if t > domain or not _divides(gpus, t) or not _divides(shape.heads, t) or not _divides(groups, min(t, groups)):
            continue
        for p in space.pipeline:
            if not _divides(gpus // t, p) or p > shape.layers:
                continue
            experts = _expert_degrees(model, gpus, p, space)
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
                        for e in experts:
                            yield t, p, v, c, d, b, e


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
    gpu = model.hardware.gpu  # fp8 where the GPU has FP8 Tensor Cores (MXFP8 ones for the mxfp8 recipe)
    fp8 = gpu.fp8_tflops is not None and (space.fp8_recipe != "mxfp8" or gpu.mxfp8)
    precisions = [q for q in space.precisions if q != "fp8-mixed" or fp8]
    memory_of = _CandidateMemory(memory, gpus, global_batch, space.flash_attention, precisions, space.sharding)
    searched = fitting = 0
    skipped: Counter[str] = Counter()
    heap: list[tuple[float, int, RankedLayout]] = []  # min-heap of (−step, −order): its root is the slowest kept
    slowest = math.inf  # once top_n are kept, the slowest kept step (to the µs), which a new layout must not exceed
    flash_attention, width = space.flash_attention, len(space.sharding) * len(precisions)
    parts: dict[tuple[int, int, int], LayerSlice] = {}  # one per (micro-batch, t, c), whose work the model keeps
    experts = model.shape.experts.count if model.shape.experts is not None else None
    for t, p, v, c, d, b, e in _degrees(model, gpus, global_batch, space):
        part = parts.get((b, t, c))
        if part is None:
            part = parts[(b, t, c)] = LayerSlice(model.sequence_length, micro_batch=b, tensor=t, context=c,
                                                 sequence_parallel=t > 1, flash_attention=flash_attention,
                                                 tensor_comm_overlap=space.tensor_comm_overlap and t > 1,
                                                 kernels=space.kernels, fp8_recipe=space.fp8_recipe)
        m = global_batch // (b * d)
        group = memory_of.group(t, p, c, e, experts)
        for recompute in space.recompute:
            first, searched = searched, searched + width  # the candidates are first + 1, first + 2, … in order
            counted = group.activations(memory_of.models(recompute, t > 1, v), b, skipped)
            stages: list[StageTime | None] = [None] * len(precisions)  # per precision, modelled when first needed
            bounds = [0.0] * len(precisions)  # a lower bound of the step, to the µs (StepTimeModel.least_step_s)
            for position, k, sized, split in group.entries:
                activations = counted[k]
                if activations is None or activations > sized.no_fit:  # unknown or refused, or it does not fit
                    continue
                if activations > sized.fit and sized.terms.fitting_bytes(activations) is None:
                    continue
                fitting += 1
                stage = stages[k]
                if stage is None:
                    stage = stages[k] = model.stage(part, recompute, precisions[k], p, v, e)
                    bounds[k] = _rounded(model.least_step_s(stage, m, p, v))
                if bounds[k] > slowest:  # it cannot enter the top
                    continue
                used = sized.terms.fitting_bytes(activations)
                layout = Layout(split.gpus, split.gpus_per_node, split.nodes, t, p, split.data_parallel, split.sharding,
                                split.shard_group, c, v, b, global_batch, recompute, t > 1, flash_attention,
                                precisions[k], space.tensor_comm_overlap, space.kernels, space.fp8_recipe, e)
                step = model.evaluate(layout, stage)
                entry = (-_rounded(step.step_s), -(first + position), RankedLayout(layout, step, used))
                if len(heap) < top_n:
                    heapq.heappush(heap, entry)
                elif entry[:2] > heap[0][:2]:
                    heapq.heapreplace(heap, entry)
                if len(heap) == top_n:
                    slowest = -heap[0][0]
    top = tuple(entry[2] for entry in sorted(heap, key=lambda e: e[:2], reverse=True))
    return LayoutSearch(searched=searched, fitting=fitting, top=top, skipped=dict(skipped))


def _check_space(space: SearchSpace) -> None:
    """Raise InconsistentInput unless every degree is a positive integer and every recompute mode, the kernels and the
    fp8 recipe are known."""
    for name in ("tensor", "pipeline", "virtual_stages", "context", "micro_batch", "expert"):
        for degree in getattr(space, name):
            require_positive_int(name, degree)
    for recompute in space.recompute:
        require_choice("recompute", recompute, RECOMPUTE_MODES)
    require_bool("flash_attention", space.flash_attention)
    require_choice("kernels", space.kernels, KERNEL_STYLES)
    require_choice("fp8_recipe", space.fp8_recipe, FP8_RECIPES)


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
        self.groups: dict[tuple[int, int, int, int], _Group] = {}

    def _alike(self, first: int, second: int) -> bool:
        """Returns whether the models of two precisions size every step of every sharding searched alike."""
        models = self.by_precision
        try:
            return all(models[first].precision_figures(sharding) == models[second].precision_figures(sharding)
                       for sharding in self.shardings)
        except InconsistentInput:  # a precision or sharding the estimators refuse: each is sized (and refused) alone
            return False

    def group(self, t: int, p: int, c: int, e: int = 1, experts: int | None = None) -> _Group:
        """Returns the candidates of the degrees under each sharding and precision, sized (kept under the degrees):
        the degrees' layout, built once, under each sharding (:func:`with_sharding`, what training_layout builds); of a
        mixture of ``experts`` experts at expert degree ``e``."""
        group = self.groups.get((t, p, c, e))
        if group is None:
            try:
                plain = training_layout(self.gpus, self.memory.gpus_per_node, 0, tensor=t, pipeline=p, context=c,
                                        expert=e, experts=experts)
                layouts = [with_sharding(plain, sharding) for sharding in self.shardings]
                rows = [self._size(layout) for layout in layouts]
            except InconsistentInput as refusal:  # the degrees do not divide the GPUs
                layouts, rows = [], [[_Sized(None, refusal) for _ in self.by_precision] for _ in self.shardings]
            group = self.groups[(t, p, c, e)] = _Group(rows, layouts, self.alike)
        return group

    def models(self, recompute: str, sequence_parallel: bool, v: int) -> list[StepMemoryModel]:
        """Returns the model of each precision with the recompute, sequence parallelism and virtual stages (kept)."""
        key = (recompute, sequence_parallel, v)
        models = self.models_kept.get(key)
        if models is None:
            saving = ActivationSaving(recompute, sequence_parallel, self.flash_attention)
            models = self.models_kept[key] = [base.varied(saving, v, self.batch) for base in self.by_precision]
        return models

    def _size(self, layout: Layout) -> list[_Sized]:
        """Returns :meth:`StepMemoryModel.sized` of the layout at each precision (once for precisions sized alike) and
        the terms on it, or their refusals."""
        row: list[_Sized] = []
        for base, alike in zip(self.by_precision, self.alike, strict=True):
            if alike < len(row):  # sized as an earlier precision: the same sizing
                row.append(row[alike])
                continue
            try:
                sized = _Sized(base.sized(layout), None)
            except InconsistentInput as refusal:
                sized = _Sized(None, refusal)
            else:
                sized.size_terms(base)
            row.append(sized)
        return row


class _Sized:
    """A candidate layout's sized model state and its other terms but the activations, with their
    :meth:`StepTerms.activation_bounds`; or the reason the model refused the state, or the terms."""

    __slots__ = ("sized", "reason", "terms", "terms_reason", "fit", "no_fit")

    def __init__(self, sized: tuple[Layout, TrainingModelState] | None, refusal: InconsistentInput | None):
        self.sized, self.reason = sized, None if refusal is None else str(refusal)
        self.terms: StepTerms | None = None
        self.terms_reason: str | None = None
        self.fit = self.no_fit = 0.0

    def size_terms(self, model: StepMemoryModel) -> None:
        """Sizes the terms on the layout with ``model`` (any model varied from the one that sized the state: the
        terms do not read the activation saving, virtual stages or batch), or keeps the reason it refuses them."""
        try:
            terms = model.terms(self.sized)  # type: ignore[arg-type]
        except InconsistentInput as refusal:
            self.terms_reason = str(refusal)
            return
        self.fit, self.no_fit = terms.activation_bounds()
        self.terms = terms


class _Group:
    """The candidates of one (t, p, c) under each sharding and precision, as :meth:`StepMemoryModel.estimate` asks
    for their terms (state, activations, buffers), so that a candidate refused is refused for the same reason:
    under a state refused, that refusal; else under activations refused (at a micro-batch, recompute and virtual
    stages), that one; else under the other terms refused, theirs. ``entries`` are the candidates with state and
    terms sized: (their place among the group's candidates, counted from 1; precision; sizing; layout)."""

    __slots__ = ("entries", "refused", "asks", "precisions")

    def __init__(self, rows: list[list[_Sized]], layouts: list[Layout], alike: list[int]) -> None:
        self.precisions = len(alike)
        self.entries: list[tuple[int, int, _Sized, Layout]] = []
        refused: Counter[str] = Counter()
        first: list[_Sized | None] = [None] * len(alike)  # per precision, the first candidate whose state is sized
        sized_count, terms_refused = Counter[int](), [Counter[str]() for _ in alike]
        for j, row in enumerate(rows):
            for k, sized in enumerate(row):
                if sized.reason is not None:
                    refused[sized.reason] += 1
                    continue
                sized_count[k] += 1
                first[k] = first[k] or sized
                if sized.terms_reason is not None:
                    terms_refused[k][sized.terms_reason] += 1
                else:
                    self.entries.append((j * len(row) + k + 1, k, sized, layouts[j]))
        self.refused = list(refused.items())  # the state's refusals, each candidate's
        # Per precision whose activations are counted on their own (with its first candidate sized): the precisions
        # counted alike, their candidates sized, and of those the terms' refusals (StepMemoryModel.precision_figures).
        self.asks: list[tuple[int, tuple[Layout, TrainingModelState], list[int], int, list[tuple[str, int]]]] = []
        for k, sized in enumerate(first):
            if sized is not None and sized.sized is not None and alike[k] == k:
                counted_alike = [q for q in range(len(alike)) if alike[q] == k]
                refusals = sum((terms_refused[q] for q in counted_alike), Counter[str]())
                asking = sum(sized_count[q] for q in counted_alike)
                self.asks.append((k, sized.sized, counted_alike, asking, list(refusals.items())))

    def activations(self, models: list[StepMemoryModel], micro_batch: int, skipped: Counter[str]) -> list[float | None]:
        """Returns the activations of the group's candidates at each precision with ``models`` (None: unknown, or
        refused) and counts the candidates refused in ``skipped``."""
        for reason, count in self.refused:
            skipped[reason] += count
        counted: list[float | None] = [None] * self.precisions
        for k, sized, counted_alike, asking, terms_refused in self.asks:
            try:
                answer = models[k].activations(sized, micro_batch)
            except InconsistentInput as refusal:  # each candidate sized asks, and is refused alike
                skipped[str(refusal)] += asking
                continue
            for q in counted_alike:
                counted[q] = answer
            for reason, count in terms_refused:
                skipped[reason] += count
        return counted

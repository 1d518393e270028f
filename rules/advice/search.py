"""The layout search of a submission: the fastest layouts of its quoted GPUs that fit memory, and its own beside them.

Reads the submission as an evaluation does (the same inputs, catalogue fills and policy), builds the step-time
model of the quoted GPU (rules/checks/facts/step_model.py) and searches tensor × pipeline × virtual stages ×
context × data × micro-batch × recompute × sharding × precision (rules/estimates/search/layout_search.py). The space
is cut into chunks by tensor degree, so workers can search chunks side by side: ``search_chunk`` searches one,
``merge_chunks`` combines their results, and ``search_submission`` does both in one process. A chunk crosses
a task queue as ``chunk_document`` (its fields, JSON) and is read back with ``chunk_space``; ``search_key``
identifies a search, so that the same submission under the same engine and policy is searched once.

The result is the shape ``quotecheck search --format json`` prints and the search task returns:
``{"layouts_searched", "fitting", "layouts_skipped", "skipped": {reason: count}, "best": {layout…, "step_s",
"tokens_per_s_per_gpu", "mfu"}, "submitted": {same}, "top": [...], "submitted_vs_best"}``; a layout the memory
model refuses under the policy's conventions is skipped and counted under its reason, never raised.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

import rfc8785

from rules.checks.base import facts_context
from rules.checks.facts.memory import memory_inputs, memory_settings
from rules.checks.facts.step_model import StepInputs, not_modelled_reason, step_inputs
from rules.errors import InconsistentInput
from rules.estimates.model.layout import Layout
from rules.estimates.ratios import fraction_of
from rules.estimates.search.layout_search import (
    LayoutSearch,
    RankedLayout,
    SearchMemory,
    SearchSpace,
    search_layouts,
)
from rules.estimates.training_time.step_time import StepTime
from rules.evaluate import submission_digest
from rules.job.inputs import Inputs
from rules.policy import Policy, default_policy
from rules.units import bytes_to_gib

TOP_N = 10


class NothingToSearch(InconsistentInput):
    """The submission does not determine a layout search (no training workload, architecture or catalogued GPU)."""


def chunks_of(space: SearchSpace) -> list[SearchSpace]:
    """Returns the search space cut by tensor degree: one chunk per degree, searched independently."""
    return [replace(space, tensor=(tensor,)) for tensor in space.tensor]


def default_chunks() -> list[SearchSpace]:
    """Returns the chunks of the whole search space (``SearchSpace()``), in the order they are merged."""
    return chunks_of(SearchSpace())


def chunk_document(space: SearchSpace) -> dict[str, Any]:
    """Returns a search space (a chunk) as JSON: each field by name, tuples as arrays."""
    return {f.name: list(value) if isinstance(value := getattr(space, f.name), tuple) else value
            for f in fields(space)}


def chunk_space(document: dict[str, Any]) -> SearchSpace:
    """Returns the search space ``chunk_document`` wrote; TypeError for a field SearchSpace does not have."""
    return SearchSpace(**{name: tuple(value) if isinstance(value, list) else value for name, value in document.items()})


def search_key(submission: dict[str, Any], engine: str, policy_digest: str, top_n: int = TOP_N) -> str:
    """Returns ``sha256:<hex>`` identifying the search of ``submission``: its digest, the engine version, the
    policy digest, the space searched and how many layouts it keeps; the same inputs give the same result."""
    identity = {"search": "layouts", "submission": submission_digest(submission), "engine_version": engine,
                "policy_digest": policy_digest, "space": chunk_document(SearchSpace()), "top_n": top_n}
    return "sha256:" + hashlib.sha256(rfc8785.dumps(identity)).hexdigest()


def prepare(submission: dict[str, Any], policy: Policy | None = None) -> tuple[StepInputs, SearchMemory]:
    """Returns the step-time model and submitted layout, and what the peak-memory check sizes memory with.

    The memory is the checks' own: the job, GPU memory and settings of rules/checks/facts/memory.py. Raises
    NothingToSearch naming what the submission lacks.
    """
    policy = policy or default_policy()
    inputs = Inputs(submission, policy=policy)
    ctx = facts_context(inputs, policy)
    if not ctx.job.trains:
        raise NothingToSearch("the submission has no training workload to lay out")
    try:
        found = step_inputs(ctx)
    except InconsistentInput as error:  # a layout no framework runs (a GPU count t × p × c does not divide)
        raise NothingToSearch(f"the submitted layout cannot run: {error}") from None
    unmodelled = not_modelled_reason(ctx)
    if found is None and unmodelled is not None:  # a mixture of experts over expert tensor parallelism (not modelled)
        raise NothingToSearch(unmodelled)
    if found is None:
        raise NothingToSearch("the step-time model needs the architecture (layers, hidden, heads, vocab), the "
                              "sequence length, global batch, a catalogued GPU with compute NICs, and a batch "
                              "that divides over the submitted layout")
    sized = memory_inputs(ctx)
    if sized is None:
        raise NothingToSearch("the memory estimate needs the model's parameters, precision and optimizer and the "
                              "quoted GPU's memory_gib")
    memory = SearchMemory(sized.job, sized.gpu_memory_gib, sized.layout.gpus_per_node, memory_settings(ctx))
    return found, memory


def search_chunk(submission: dict[str, Any], space: SearchSpace, policy: Policy | None = None,
                 top_n: int = TOP_N) -> dict[str, Any]:
    """Returns one chunk's search as JSON: layouts searched, fitting, and its fastest ``top_n``."""
    return _search(prepare(submission, policy), space, top_n)


def merge_chunks(submission: dict[str, Any], parts: list[dict[str, Any]], top_n: int = TOP_N,
                 policy: Policy | None = None) -> dict[str, Any]:
    """Returns the whole search from its chunks: counts summed, the fastest ``top_n`` of all, the submitted layout."""
    found, _ = prepare(submission, policy)
    return _merge(found, parts, top_n)


def search_submission(submission: dict[str, Any], policy: Policy | None = None, top_n: int = TOP_N,
                      on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Returns the layout search of a validated ``submission``, searching its chunks one after another.

    The submission is read and its model built once, so the model's memoised per-layer work serves every chunk.
    """
    prepared = prepare(submission, policy)
    chunks = default_chunks()
    parts = []
    for done, chunk in enumerate(chunks, start=1):
        parts.append(_search(prepared, chunk, top_n))
        if on_progress is not None:
            on_progress(done, len(chunks))
    return _merge(prepared[0], parts, top_n)


def _search(prepared: tuple[StepInputs, SearchMemory], space: SearchSpace, top_n: int) -> dict[str, Any]:
    found, memory = prepared
    # The search changes only the layout: the precision, its fp8 recipe and the framework's overlap and kernels stay as
    # the job states them (a change of precision is a numerics decision, not a layout's).
    job = found.layout
    space = replace(space, tensor_comm_overlap=job.tensor_comm_overlap, precisions=(job.precision,),
                    kernels=job.kernels, fp8_recipe=job.fp8_recipe)
    result = search_layouts(found.model, found.layout.gpus, found.layout.global_batch, memory, space, top_n)
    return {"layouts_searched": result.searched, "fitting": result.fitting,
            "layouts_skipped": result.skipped_count, "skipped": result.skipped,
            "top": [_ranked(entry, found.model.shape.experts is not None) for entry in result.top]}


def _merge(found: StepInputs, parts: list[dict[str, Any]], top_n: int) -> dict[str, Any]:
    top = sorted((entry for part in parts for entry in part["top"]), key=lambda entry: entry["step_s"])[:top_n]
    submitted = _described(found.layout, found.step, found.model.shape.experts is not None)
    best = top[0] if top else None
    return {
        "layouts_searched": sum(part["layouts_searched"] for part in parts),
        "fitting": sum(part["fitting"] for part in parts),
        "layouts_skipped": sum(part.get("layouts_skipped", 0) for part in parts),
        "skipped": _skipped(parts),
        "best": best,
        "submitted": submitted,
        "top": top,
        "submitted_vs_best": _comparison(submitted, best),
    }


def _skipped(parts: list[dict[str, Any]]) -> dict[str, int]:
    """Returns the chunks' skipped layouts summed by reason, most frequent first (then by reason)."""
    counts: dict[str, int] = {}
    for part in parts:
        for reason, count in part.get("skipped", {}).items():
            counts[reason] = counts.get(reason, 0) + count
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _ranked(entry: RankedLayout, experts: bool) -> dict[str, Any]:
    return {**_described(entry.layout, entry.step, experts), "memory_gib_per_gpu": bytes_to_gib(entry.memory_bytes)}


def _described(layout: Layout, step: StepTime, experts: bool) -> dict[str, Any]:
    """Returns a layout as the search reports it (the members ``layout_patch`` of rules/advice/best_layout.py reads)
    with its modelled step; of a mixture of ``experts``, with its expert-parallel degree."""
    described = {"micro_batch": layout.micro_batch, "global_batch": layout.global_batch, "tensor": layout.tensor,
            "pipeline": layout.pipeline, "virtual_stages": layout.virtual_stages, "context": layout.context,
            "data": layout.data_parallel, "recompute": layout.recompute, "sequence_parallel": layout.sequence_parallel,
            "flash_attention": layout.flash_attention, "sharding": layout.sharding, "precision": layout.precision,
            "step_s": step.step_s, "tokens_per_s_per_gpu": step.tokens_per_s_per_gpu, "mfu": step.mfu,
            "mfu_peak_tflops": step.mfu_peak_tflops}
    return {**described, "expert": layout.expert} if experts else described


def _comparison(submitted: dict[str, Any], best: dict[str, Any] | None) -> str:
    if best is None:
        return "no layout of the quoted GPUs fits memory"
    slower = fraction_of(submitted["step_s"], best["step_s"])
    if slower <= 1:
        return "the submitted layout is as fast as the best that fits"
    return f"the submitted layout is {slower - 1:.0%} slower than the best that fits"


__all__ = ["LayoutSearch", "NothingToSearch", "chunk_document", "chunk_space", "chunks_of", "default_chunks",
           "merge_chunks", "search_chunk", "search_key", "search_submission"]

"""Facts about the training workload that several checks share: where it runs, what it keeps in memory,
how it communicates, how efficiently it scales and how long it takes.

Nothing here decides; it reads inputs through a check's Context (so every input read is recorded) and
calls the estimators in rules/estimates. The facts several checks use (bandwidths, scaling efficiency)
are memoised per evaluation with ``ctx.memo``, so interconnect-scaling and time-to-result agree.
Throughput, checkpoint and goodput facts live in rules/checks/cluster.py, which imports this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from rules.checks.base import Context
from rules.checks.facts.batch import accumulation
from rules.checks.facts.communication import bandwidth, communication
from rules.checks.facts.layout import layout
from rules.checks.facts.memory import (
    largest_fitting_micro_batch,
    measured_peak_gib,
    memory_estimate,
    memory_min_gpus,
    no_fit_reason,
)
from rules.checks.facts.pointers import ARCHITECTURE, TRAINING
from rules.errors import InconsistentInput
from rules.estimates import compute, cost
from rules.estimates.communication import communication_time_s
from rules.estimates.ratios import fraction_of, spare_fraction
from rules.units import GB, GIB, SECONDS_PER_DAY

# The names other check modules import from here.
__all__ = ["SHARDING_ORDER", "ShardingOption", "T", "accumulation", "fraction_of", "largest_fitting_micro_batch",
           "layout", "least_communication", "measured_peak_gib", "memory_estimate", "sharding_options"]
T = TRAINING  # the name sharding.py and gradient_accumulation.py import; new code imports TRAINING

# ==================================================================================================
# Sharding, gradient accumulation, interconnect scaling and time to result
# ==================================================================================================
# Least to most aggressive (what each strategy shards: ZeRO arXiv 1910.02054 §5; PyTorch FSDP's
# ShardingStrategy). Where two strategies communicate equally the less aggressive one is preferred.
SHARDING_ORDER: tuple[str, ...] = ("ddp", "zero1", "zero2", "fsdp-hybrid", "zero3", "fsdp-full")
# A job that never finishes (goodput 0) reports this many days: durable_rules accepts no infinity.
NEVER_DAYS = 1e9


# ---- sharding alternatives -------------------------------------------------------------------------
@dataclass(frozen=True)
class ShardingOption:
    """One sharding strategy on the quoted hardware: per-GPU memory and communication per optimizer step."""

    strategy: str
    total_gib: float | None  # None when the estimators refuse the layout (see note)
    usable_gib: float
    spare_fraction: float
    fits: bool
    comfortable: bool  # fits with sharding.comfortable_headroom_fraction of usable memory to spare
    comm_gb_per_step: float | None  # bus bytes each GPU moves per optimizer step, GB
    comm_s_per_step: float | None  # their bandwidth-bound time at the job's busbw
    note: str = ""

    def row(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "total_gib": self.total_gib, "spare_fraction": self.spare_fraction,
                "fits": self.fits, "comfortable": self.comfortable, "comm_gb_per_step": self.comm_gb_per_step,
                "comm_s_per_step": self.comm_s_per_step, "note": self.note}


def sharding_options(ctx: Context) -> list[ShardingOption] | None:
    """Returns every strategy of SHARDING_ORDER sized on the quoted hardware; None when inputs are missing.

    A strategy the estimators refuse (fsdp-hybrid over part of a node) is listed with the reason; when they
    refuse every strategy the inputs themselves contradict each other, and that InconsistentInput is raised.
    """
    links = bandwidth(ctx)
    comfortable = ctx.setting("sharding.comfortable_headroom_fraction")
    options: list[ShardingOption] = []
    refusals: list[InconsistentInput] = []
    usable_gib = 0.0
    for strategy in SHARDING_ORDER:
        try:
            estimate = memory_estimate(ctx, sharding=strategy)
            step = communication(ctx, sharding=strategy)
        except InconsistentInput as error:
            options.append(ShardingOption(strategy, None, usable_gib, -1.0, False, False, None, None, str(error)))
            refusals.append(error)
            continue
        if estimate is None or estimate.activations_bytes is None or step is None or links is None:
            if estimate is not None and estimate.activations_bytes is None:
                ctx.need(f"{TRAINING}/micro_batch")
            return None
        usable_gib = estimate.usable_bytes / GIB
        spare = spare_fraction(estimate.total_bytes, estimate.usable_bytes)
        fitting = estimate.total_bytes <= estimate.usable_bytes
        seconds = communication_time_s(step, links.node_busbw_gbs, links.cluster_busbw_gbs)
        options.append(ShardingOption(strategy, estimate.total_bytes / GIB, usable_gib, spare, fitting,
                                      fitting and spare >= comfortable, step.bus_bytes_per_gpu / GB, seconds))
    if len(refusals) == len(SHARDING_ORDER):
        raise refusals[0]
    return [replace(o, usable_gib=usable_gib) for o in options]


def least_communication(options: list[ShardingOption]) -> ShardingOption | None:
    """Returns the option with the least communication time, the less aggressive one on a tie; None if empty."""
    usable = [o for o in options if o.comm_s_per_step is not None]
    if not usable:
        return None
    return min(usable, key=lambda o: (round(o.comm_s_per_step or 0.0, 9), SHARDING_ORDER.index(o.strategy)))


# ---- time to result --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Schedule:
    """How long the run takes on the quoted hardware, and how many GPUs the window needs."""

    tokens: float
    compute_days: float  # no failures: tokens / (tokens/s per GPU × GPUs × scaling efficiency)
    days: float  # expected: compute days / goodput
    window_days: float
    window_fraction: float  # days / window
    gpus: int
    gpus_per_node: int
    memory_min_gpus: int | None
    throughput_min_gpus: int | None
    gpus_needed: int | None  # None when no GPU count fits memory (``gpus_needed_reason`` says why)
    gpus_needed_reason: str | None
    model_flops: float | None
    hardware_flops: float | None

    def evidence(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "compute_days": self.compute_days, "days": self.days,
                "window_days": self.window_days, "window_fraction": self.window_fraction, "gpus": self.gpus,
                "memory_min_gpus": self.memory_min_gpus, "throughput_min_gpus": self.throughput_min_gpus,
                "gpus_needed": self.gpus_needed, "gpus_needed_reason": self.gpus_needed_reason,
                "nodes_needed": (math.ceil(self.gpus_needed / self.gpus_per_node) if self.gpus_needed is not None
                                 else None),
                "model_flops": self.model_flops, "hardware_flops": self.hardware_flops}


def schedule(ctx: Context, efficiency: float, goodput: float, tokens_per_s_per_gpu: float) -> Schedule | None:
    """Returns the run's compute days, expected days and the GPU count its window needs.

    ``gpus_needed`` = max(memory need, throughput need) (compute.gpus_needed), in whole nodes; the
    throughput need keeps the per-GPU rate, scaling efficiency and goodput of the quoted size. When no GPU
    count fits one step in memory, ``gpus_needed`` is None and ``gpus_needed_reason`` says why: no count
    is advised that could not run.
    """
    plan = layout(ctx)
    dataset_tokens = ctx.need(f"{TRAINING}/dataset_tokens")
    epochs = ctx.num(f"{TRAINING}/epochs", 1)
    window_days = ctx.need(f"{TRAINING}/completion_window_days")
    if plan is None or dataset_tokens is None or window_days is None:
        return None
    tokens = dataset_tokens * epochs
    compute_days = compute.tokens_time_s(tokens, tokens_per_s_per_gpu, plan.gpus, efficiency) / SECONDS_PER_DAY
    days = compute_days / goodput if goodput > 0 else NEVER_DAYS
    throughput_need = None
    if goodput > 0:
        throughput_need = compute.throughput_min_gpus(
            window_days * SECONDS_PER_DAY, tokens=tokens, tokens_per_s_per_gpu=tokens_per_s_per_gpu,
            scaling_efficiency=efficiency, goodput=goodput)
    memory_need = memory_min_gpus(ctx)
    unit = plan.whole_unit_gpus
    reason = no_fit_reason(ctx) if memory_need is None else None
    needed = None if reason else compute.gpus_needed(memory_need or 1, throughput_need or 1, multiple_of=unit)
    model_flops, hardware_flops = _run_flops(ctx, tokens)
    return Schedule(tokens=tokens, compute_days=compute_days, days=min(days, NEVER_DAYS), window_days=window_days,
                    window_fraction=fraction_of(min(days, NEVER_DAYS), window_days), gpus=plan.gpus,
                    gpus_per_node=plan.gpus_per_node, memory_min_gpus=memory_need,
                    throughput_min_gpus=throughput_need, gpus_needed=needed, gpus_needed_reason=reason,
                    model_flops=model_flops,
                    hardware_flops=hardware_flops)


def _run_flops(ctx: Context, tokens: float) -> tuple[float | None, float | None]:
    """Returns the run's model FLOPs (6·N·D + attention) and hardware FLOPs (with the recompute it plans)."""
    parameters = ctx.num(f"{TRAINING}/model/parameters")
    layers, hidden = ctx.num(f"{ARCHITECTURE}/layers"), ctx.num(f"{ARCHITECTURE}/hidden")
    sequence_length = ctx.num(f"{TRAINING}/sequence_length")
    if parameters is None:
        return None, None
    shape = (int(layers), int(sequence_length), int(hidden)) if layers and hidden and sequence_length else (None,) * 3
    recompute = ctx.get(f"{TRAINING}/activation_checkpointing", "none")
    return (compute.training_flops(parameters, tokens, "none", *shape),
            compute.training_flops(parameters, tokens, recompute, *shape))


@dataclass(frozen=True)
class QuoteCost:
    """What the quote costs (capital only), from its priced line items or else its node groups."""

    total: float | None
    from_: str  # "line items", "node groups" or "no prices"
    training_nodes: float | None  # unit price × count of the training node group
    unpriced_line_items: int


def quote_cost(ctx: Context) -> QuoteCost:
    """Returns the quote total: Σ quantity × unit price of priced line items, else Σ count × unit price of groups."""
    plan = layout(ctx)
    priced, unpriced = [], 0
    for index, _item in enumerate(ctx.inputs.get("/quote/line_items") or []):
        quantity = ctx.num(f"/quote/line_items/{index}/quantity")
        price = ctx.num(f"/quote/line_items/{index}/unit_price")
        if quantity is not None and price is not None:
            priced.append((quantity, price))
        else:
            unpriced += 1
    groups = []
    for index, _group in enumerate(ctx.inputs.get("/quote/node_groups") or []):
        count, price = ctx.num(f"/quote/node_groups/{index}/count"), ctx.num(f"/quote/node_groups/{index}/unit_price")
        if count is not None and price is not None:
            groups.append((count, price))
    training = None
    if plan is not None:
        count, price = ctx.num(f"{plan.group}/count"), ctx.num(f"{plan.group}/unit_price")
        if count is not None and price is not None:
            training = cost.priced_total([(count, price)])
    if priced:
        return QuoteCost(cost.priced_total(priced), "line items", training, unpriced)
    if groups:
        return QuoteCost(cost.priced_total(groups), "node groups", training, unpriced)
    return QuoteCost(None, "no prices", training, unpriced)

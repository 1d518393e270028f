"""Time to result and what the quote costs: the facts of the time-to-result check."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rules.checks.base import Context
from rules.checks.facts.communication import applied_scaling
from rules.checks.facts.layout import layout, training_group
from rules.checks.facts.memory import memory_min_gpus, no_fit_reason
from rules.checks.facts.model import flops_parameters
from rules.checks.facts.reliability import goodput_facts
from rules.checks.facts.throughput import attention_span, throughput_facts
from rules.estimates.power_cost import cost, quote_lines
from rules.estimates.power_cost.quote_lines import GroupLine, QuoteLine, ServerLines
from rules.estimates.reliability.queue import SharedCluster
from rules.estimates.training_time import compute
from rules.estimates.training_time import schedule as schedules
from rules.estimates.training_time.schedule import RunRate, Schedule
from rules.job.cluster import Cluster
from rules.job.given import Given


@dataclass(frozen=True)
class RunPlan:
    """The run's schedule on the quoted hardware and the FLOPs it performs."""

    schedule: Schedule
    model_flops: float | None  # 6·N·D plus attention, recompute not counted (None without the parameter count)
    hardware_flops: float | None  # with the recompute the run plans
    queue_basis: str  # where the queue wait comes from: measured, M/M/1 from the utilisation, or not shared

    def evidence(self) -> dict[str, Any]:
        plan = self.schedule
        return {"tokens": plan.tokens, "compute_days": plan.compute_days, "days": plan.days,
                "window_days": plan.window_days, "window_fraction": plan.window_fraction, "gpus": plan.gpus,
                "memory_min_gpus": plan.memory_min_gpus, "throughput_min_gpus": plan.throughput_min_gpus,
                "gpus_needed": plan.gpus_needed, "gpus_needed_reason": plan.gpus_needed_reason,
                "nodes_needed": plan.nodes_needed, "model_flops": self.model_flops,
                "hardware_flops": self.hardware_flops, "run_days": plan.run_days,
                "queue_wait_days": plan.queue_wait_days, "queue_basis": self.queue_basis}


def run_plan(ctx: Context, rate: RunRate) -> RunPlan | None:
    """Returns the run's compute days, expected days and the GPU count its window needs; None without them.

    ``gpus_needed`` = max(memory need, throughput need) in whole nodes; the throughput need keeps the
    per-GPU rate, scaling efficiency and goodput of the quoted size. When no GPU count fits one step in
    memory, ``gpus_needed`` is None and ``gpus_needed_reason`` says why (rules/estimates/training_time/schedule.py).
    """
    plan = layout(ctx)
    training = ctx.job.training
    dataset_tokens = ctx.needed(training.dataset_tokens)
    epochs = ctx.value(training.epochs)
    window_days = ctx.needed(training.completion_window_days)
    if plan is None or dataset_tokens is None or window_days is None:
        return None
    tokens = schedules.run_tokens(dataset_tokens, epochs)
    memory_need = memory_min_gpus(ctx)
    reason = no_fit_reason(ctx) if memory_need is None else None
    cluster = shared_cluster(ctx)
    run = schedules.run_schedule(tokens, window_days, rate, plan, memory_need, reason, cluster)
    model_flops, hardware_flops = _run_flops(ctx, tokens)
    return RunPlan(run, model_flops, hardware_flops, cluster.basis)


def shared_cluster(ctx: Context) -> SharedCluster:
    """Returns what the workload says about sharing the cluster (neither field given: not shared)."""
    training = ctx.job.training
    return SharedCluster(ctx.value(training.shared_cluster_utilisation), ctx.value(training.measured_queue_wait_days))


def quoted_run_plan(ctx: Context) -> RunPlan | None:
    """Returns the run plan at the quoted rate: its throughput, scaling efficiency and first-order goodput.

    None when one of them, the dataset size or the completion window is unknown. Memoised, so that
    time-to-result and the simulated days to completion (rules/checks/facts/goodput.py) read one schedule.
    """
    return ctx.memo(_quoted_run_plan)


def _quoted_run_plan(ctx: Context) -> RunPlan | None:
    rate, scaled, reliability = throughput_facts(ctx), applied_scaling(ctx), goodput_facts(ctx)
    if rate is None or scaled is None or reliability is None:
        return None
    return run_plan(ctx, RunRate(rate.tokens_per_s_per_gpu, scaled.efficiency, reliability.goodput))


def _run_flops(ctx: Context, tokens: float) -> tuple[float | None, float | None]:
    """Returns the run's model FLOPs (6·N·D + attention; N a mixture of experts' active parameters) and hardware FLOPs
    (with the recompute it plans)."""
    parameters = flops_parameters(ctx, needed=False)
    span = attention_span(ctx)
    if parameters is None:
        return None, None
    recompute = ctx.value(ctx.job.training.activation_checkpointing)
    return compute.run_flops(parameters, tokens, recompute, *span)


@dataclass(frozen=True)
class QuoteCost:
    """What the quote costs (capital only), from its priced line items or else its node groups."""

    total: float | None
    from_: str  # "line items", "node groups" or "no prices"
    training_nodes: float | None  # unit price × count of the training node group
    unpriced_line_items: int
    server_lines: tuple[ServerLines, ...] = ()  # the line items and node groups of each server model both name

    def arithmetic_evidence(self) -> dict[str, Any]:
        """Returns the line items against the node groups, per server model (``quote-arithmetic``)."""
        return {"quote_lines": [{"server_model": s.server_model, "line_items": list(s.line_indices),
                                 "node_groups": list(s.group_names), "line_quantity": s.line_quantity,
                                 "group_count": s.group_count, "price_gap": s.price_gap} for s in self.server_lines],
                "quote_count_mismatches": quote_lines.count_mismatches(self.server_lines),
                "quote_price_gap": quote_lines.largest_price_gap(self.server_lines),
                "quote_lines_text": "; ".join(f"{s.server_model}: {s.text}" for s in self.server_lines)}


def server_lines_of(cluster: Cluster, value: Callable[[Given[Any]], Any]) -> tuple[ServerLines, ...]:
    """Returns the quote's line items set against its node groups per server model
    (rules/estimates/power_cost/quote_lines.py), each figure read by ``value`` (a check's ``ctx.value``, which
    records what it read, or a plain read)."""
    return tuple(quote_lines.server_lines(
        [GroupLine(value(g.name) or "", value(g.server_model), value(g.count), value(g.unit_price))
         for g in cluster.node_groups],
        [QuoteLine(index, value(item.sku), value(item.description), value(item.quantity), value(item.unit_price))
         for index, item in enumerate(cluster.line_items)]))


def quote_cost(ctx: Context) -> QuoteCost:
    """Returns the quote total: Σ quantity × unit price of priced line items, else Σ count × unit price of groups.

    Summed once an evaluation (time-to-result reads it for its evidence and for the cost of the run).
    """
    return ctx.memo(_quote_cost, reads_of_refusal=True)


def _quote_cost(ctx: Context) -> QuoteCost:
    trains_on, cluster = training_group(ctx), ctx.job.cluster
    priced, unpriced = [], []
    for index, item in enumerate(cluster.line_items):
        quantity = ctx.value(item.quantity)
        price = ctx.value(item.unit_price)
        if quantity is not None and price is not None:
            priced.append((quantity, price))
        else:
            unpriced.append(index)
    groups = []
    for group in cluster.node_groups:
        count, price = ctx.value(group.count), ctx.value(group.unit_price)
        if count is not None and price is not None:
            groups.append((count, price))
    training = None
    if trains_on is not None:
        count, price = ctx.value(trains_on.count), ctx.value(trains_on.unit_price)
        if count is not None and price is not None:
            training = cost.priced_total([(count, price)])
    compared = server_lines_of(cluster, ctx.value)
    if priced:
        return QuoteCost(cost.priced_total(priced), "line items", training, len(unpriced), compared)
    if groups:
        return QuoteCost(cost.priced_total(groups), "node groups", training, len(unpriced), compared)
    return QuoteCost(None, "no prices", training, len(unpriced), compared)

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
from rules.checks.facts.layout import Placement, layout
from rules.checks.facts.memory import (
    largest_fitting_micro_batch,
    measured_peak_gib,
    memory_estimate,
    memory_min_gpus,
    no_fit_reason,
)
from rules.checks.facts.pointers import ARCHITECTURE, TRAINING
from rules.errors import InconsistentInput
from rules.estimates import batch, compute, cost, interconnect
from rules.estimates.model_state import model_state_bytes_per_param
from rules.estimates.ratios import fraction_of, spare_fraction
from rules.status import Basis
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


# ---- gradient accumulation -------------------------------------------------------------------------
@dataclass(frozen=True)
class Accumulation:
    """How the global batch splits into micro-batches on the data-parallel ranks."""

    global_batch: int
    micro_batch: int
    data_parallel: int
    split: batch.BatchSplit

    @property
    def steps(self) -> int:
        """Micro-batches per optimizer step, rounded up when the split is not whole (a framework refuses it)."""
        return max(1, math.ceil(self.split.accumulation_steps))


def accumulation(ctx: Context, micro_batch: int | None = None) -> Accumulation | None:
    """Returns the split of the global batch for the submitted (or the given) micro-batch; None if unknown."""
    plan = layout(ctx)
    global_batch = ctx.need(f"{TRAINING}/global_batch")
    micro = micro_batch or ctx.need(f"{TRAINING}/micro_batch")
    if plan is None or global_batch is None or micro is None:
        return None
    return Accumulation(int(global_batch), int(micro), plan.data_parallel,
                        batch.batch_split(int(global_batch), int(micro), plan.data_parallel))


# ---- communication ---------------------------------------------------------------------------------
def communication(ctx: Context, sharding: str | None = None) -> interconnect.StepCommunication | None:
    """Returns the collectives of one optimizer step (all its micro-batches) under the submitted or given sharding.

    Communication is in the weights' precision (2 bytes for bf16/fp16 training); with tensor or
    pipeline parallelism each data-parallel group communicates one model-parallel shard. Tensor- and
    pipeline-parallel traffic (activations) is not counted. Raises ValueError for a layout the
    estimator refuses (fsdp-hybrid over part of a node).
    """
    plan = layout(ctx)
    parameters = ctx.need(f"{TRAINING}/model/parameters")
    precision, optimizer = ctx.get(f"{TRAINING}/precision"), ctx.get(f"{TRAINING}/optimizer")
    for pointer, value in ((f"{TRAINING}/precision", precision), (f"{TRAINING}/optimizer", optimizer)):
        if value is None and pointer not in ctx.missing:
            ctx.missing.append(pointer)
    split = accumulation(ctx)
    if plan is None or parameters is None or precision is None or optimizer is None or split is None:
        return None
    state = model_state_bytes_per_param(precision, optimizer, ctx.setting("conventions.model_state_bytes"))
    model_parallel = plan.tensor * plan.pipeline
    trainable = ctx.num(f"{TRAINING}/model/trainable_parameters", parameters)
    return interconnect.communication_bytes_per_step(
        sharding or plan.sharding, parameters / model_parallel, plan.data_parallel, plan.dp_ranks_per_node,
        bytes_per_element=state.weights_bytes_per_param, accumulation_steps=split.steps,
        trainable_parameters=trainable / model_parallel)


@dataclass(frozen=True)
class Bandwidth:
    """The bus bandwidths the job's collectives reach inside a node and across the job, and their origin."""

    node_busbw_gbs: float
    cluster_busbw_gbs: float  # equals node_busbw_gbs on one node
    network_busbw_gbs: float | None  # compute NICs per node × achieved GB/s per NIC ÷ oversubscription
    bound_by: str  # "node", "network", or "measured" (nccl-tests across nodes)
    intra_node_link: str
    source: str  # what the figures rest on, in words
    nodes: int

    def evidence(self) -> dict[str, Any]:
        return {"node_busbw_gbs": self.node_busbw_gbs, "cluster_busbw_gbs": self.cluster_busbw_gbs,
                "network_busbw_gbs": self.network_busbw_gbs, "busbw_bound_by": self.bound_by,
                "intra_node_link": self.intra_node_link, "bandwidth_source": self.source, "nodes": self.nodes}


def bandwidth(ctx: Context) -> Bandwidth | None:
    """Returns the job's intra-node and cluster busbw: nccl-tests where measured, else nameplate × policy fractions."""
    return ctx.memo("training.bandwidth", _bandwidth)


def _bandwidth(ctx: Context) -> Bandwidth | None:
    from rules.checks.cluster import nics  # cluster.py imports this module, so not at the top

    plan = layout(ctx)
    if plan is None:
        return None
    measured_node, measured_cluster, notes = _nccl_tests(ctx, plan)
    if measured_node is not None:
        node, link = measured_node, "measured on one node (nccl-tests)"
        sources = ["intra-node busbw measured by nccl-tests"]
    else:
        nvlink = ctx.need(f"{plan.group}/gpu/nvlink_gbs")
        if nvlink is None:
            return None
        if nvlink > 0:
            node = interconnect.nvlink_busbw_gbs(nvlink, ctx.setting("interconnect.nvlink_busbw_fraction"))
            link = f"NVLink {nvlink:g} GB/s"
            sources = ["NVLink per direction × interconnect.nvlink_busbw_fraction"]
        else:
            generation, origin = _pcie_generation(ctx, plan.group)
            node = interconnect.pcie_x16_gbs(generation) * ctx.setting("interconnect.pcie_busbw_fraction")
            link = f"PCIe Gen{generation} x16, no NVLink ({origin})"
            sources = ["PCIe x16 per direction × interconnect.pcie_busbw_fraction"]
    if plan.nodes == 1:
        return Bandwidth(node, node, None, "node", link, "; ".join(sources + notes), 1)
    # Data-parallel groups side by side on a node (one per tensor-parallel rank) share its NICs.
    share = interconnect.group_nic_share(plan.dp_ranks_per_node, plan.gpus_per_node)
    shared = "" if share == 1 else f", {share:.3g} of it per data-parallel group (tensor parallelism fills the node)"
    if measured_cluster is not None:
        runs, busbw = measured_cluster
        busbw = min(node, busbw * share) if share < 1 else busbw
        sources.append(f"cross-node busbw measured by nccl-tests on {runs} nodes (the job spans {plan.nodes}){shared}")
        return Bandwidth(node, busbw, busbw, "measured", link, "; ".join(sources + notes), plan.nodes)
    compute_nics = nics(ctx, plan.group, "compute")
    if compute_nics.nics <= 0:
        ctx.reader.missing.append(f"{plan.group}/nics")
        return None
    per_nic_gbps = compute_nics.gbps / compute_nics.nics
    fabric_gbps = ctx.num("/quote/fabric/link_gbps")
    if fabric_gbps and fabric_gbps < per_nic_gbps:
        per_nic_gbps = fabric_gbps  # a NIC cannot run faster than the fabric link it plugs into
    nic_gbs = interconnect.gbps_to_gbs(per_nic_gbps) * ctx.setting("interconnect.nic_busbw_fraction")
    oversubscription = max(1.0, ctx.num("/quote/fabric/oversubscription", 1.0))
    tiers = interconnect.hierarchical_busbw_gbs(node, nic_gbs, compute_nics.nics * share, plan.nodes, oversubscription)
    sources.append(f"{compute_nics.nics:g} compute NICs per node at {per_nic_gbps:g} Gb/s × "
                   f"interconnect.nic_busbw_fraction, fabric oversubscription {oversubscription:g}:1{shared}")
    return Bandwidth(node, tiers.busbw_gbs, tiers.network_busbw_gbs, tiers.bound_by, link,
                     "; ".join(sources + notes), plan.nodes)


def _pcie_generation(ctx: Context, group: str) -> tuple[int, str]:
    """Returns the GPU's PCIe generation from the catalogue, else 4 (the older of the current generations)."""
    model = ctx.get(f"{group}/gpu/model")
    spec = ctx.inputs.catalogue.gpu(model) if model else None
    if spec and spec.get("pcie_gen"):
        return int(spec["pcie_gen"]), f"catalogue {model}"
    return 4, "assumed Gen4: GPU model not in the catalogue"


def _nccl_tests(ctx: Context, plan: Placement) -> tuple[float | None, tuple[int, float] | None, list[str]]:
    """Returns the measured intra-node busbw, the (nodes, busbw) of the multi-node run nearest the job's size, notes.

    Each run's figure is its peak busbw over message sizes (nccl-tests doc/PERFORMANCE.md: the
    large-size busbw is the one to compare with hardware); several runs at one size keep the lowest.
    """
    node: float | None = None
    widest: tuple[int, float] | None = None
    notes: list[str] = []
    for index, _run in enumerate(ctx.inputs.get("/measurements/nccl_tests") or []):
        base = f"/measurements/nccl_tests/{index}"
        raw = ctx.get(f"{base}/raw", "")
        nodes = int(ctx.num(f"{base}/nodes", 1))
        try:
            busbw = interconnect.peak_busbw_gbs(interconnect.parse_nccl_tests_output(raw))
        except InconsistentInput as error:
            notes.append(f"{base} not used: {error}")
            continue
        if nodes == 1:
            node = busbw if node is None else min(node, busbw)
        elif widest is None or (abs(nodes - plan.nodes), busbw) < (abs(widest[0] - plan.nodes), widest[1]):
            widest = (nodes, busbw)
    return node, widest, notes


# ---- scaling efficiency ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Scaling:
    """The job's scaling efficiency, whether a measurement or the step model decided it, and the terms."""

    efficiency: float
    basis: Basis
    evidence: dict[str, Any]


def scaling(ctx: Context) -> Scaling | None:
    """Returns the scaling efficiency: measured at the largest measured size (two or more points), else modelled."""
    return ctx.memo("training.scaling", _scaling)


def _scaling(ctx: Context) -> Scaling | None:
    measured, unused = _measured_scaling(ctx)
    if measured is not None:
        return measured
    from rules.checks.cluster import throughput_facts  # cluster.py imports this module, so not at the top

    plan = layout(ctx)
    rate = throughput_facts(ctx)
    sequence_length = ctx.need(f"{TRAINING}/sequence_length")
    split = accumulation(ctx)
    links = bandwidth(ctx)
    step = communication(ctx)
    if None in (plan, rate, sequence_length, split, links, step):
        return None
    tokens = batch.tokens_per_step(split.global_batch, int(sequence_length))
    compute_s = compute.tokens_time_s(tokens, rate.tokens_per_s_per_gpu, plan.gpus)
    communication_s = interconnect.communication_time_s(step, links.node_busbw_gbs, links.cluster_busbw_gbs)
    overlap = ctx.setting("interconnect.overlap_fraction")
    result = interconnect.scaling_efficiency(compute_s, communication_s, overlap)
    evidence = {
        "efficiency": result.efficiency, "compute_s_per_step": result.compute_s,
        "communication_s_per_step": result.communication_s,
        "exposed_communication_s_per_step": result.exposed_communication_s, "step_s": result.step_s,
        "overlap_fraction": overlap, "tokens_per_step": tokens, "accumulation_steps": split.steps,
        "comm_gb_per_step": step.bus_bytes_per_gpu / GB, "allreduce_equivalents": step.allreduce_equivalents,
        "sharding": step.strategy, "gpus": plan.gpus, "data_parallel": plan.data_parallel,
        "collectives": [{"kind": c.kind, "purpose": c.purpose, "size_gb": c.size_bytes / GB, "ranks": c.ranks,
                         "scope": c.scope, "times": c.times} for c in step.collectives],
        **rate.evidence(), **links.evidence(),
    }
    if unused:
        evidence["measurements_not_used"] = unused
    return Scaling(result.efficiency, Basis.ESTIMATED, evidence)


def _measured_scaling(ctx: Context) -> tuple[Scaling | None, str]:
    """Returns the measured scaling (two or more GPU counts), or None and why measurements were not used."""
    runs = ctx.inputs.get("/measurements/scaling") or []
    points = []
    for index, _run in enumerate(runs):
        gpus = ctx.num(f"/measurements/scaling/{index}/gpus")
        tokens_per_s = ctx.num(f"/measurements/scaling/{index}/tokens_per_s")
        if gpus and tokens_per_s:
            points.append((int(gpus), tokens_per_s))
    if len(points) < 2:
        return None, ("one measurements.scaling point; two or more GPU counts are needed" if points else "")
    try:
        measured = interconnect.measured_scaling_efficiency(points)
    except InconsistentInput as error:
        return None, f"measurements.scaling not used: {error}"
    largest = measured[-1]
    plan = layout(ctx)
    return Scaling(largest.efficiency, Basis.MEASURED, {
        "efficiency": largest.efficiency, "measured_gpus": largest.gpus, "base_gpus": largest.base_gpus,
        "tokens_per_s_per_gpu_at_base": measured[0].tokens_per_s_per_gpu,
        "tokens_per_s_per_gpu_at_largest": largest.tokens_per_s_per_gpu,
        "gpus": plan.gpus if plan else largest.gpus,
        "scaling_points": [{"gpus": p.gpus, "tokens_per_s": p.tokens_per_s, "efficiency": p.efficiency}
                           for p in measured],
    }), ""


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
        seconds = interconnect.communication_time_s(step, links.node_busbw_gbs, links.cluster_busbw_gbs)
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

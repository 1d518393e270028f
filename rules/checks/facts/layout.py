"""Where a workload runs: its node group, the training job's layout on it, and the node's NICs and cores."""

from __future__ import annotations

from dataclasses import dataclass

from rules.checks.base import Context
from rules.checks.facts.model import expert_count
from rules.errors import InconsistentInput
from rules.estimates.communication import topology
from rules.estimates.model.layout import Layout, NotWholeExpertGrid, NotWholeReplicas, training_layout
from rules.job.cluster import QuotedNodeGroup


@dataclass(frozen=True)
class Placement:
    """Where the training job runs: its layout and the quoted node group that holds it."""

    layout: Layout
    group: QuotedNodeGroup


def placement(ctx: Context) -> Placement | None:
    """Returns the job's layout and node group, or None (with the missing inputs noted) when they cannot be known.

    InconsistentInput, naming the inputs, when the GPU count is not a whole number of tensor × pipeline ×
    context replicas, or the expert degrees do not split the model's experts and GPUs (Megatron-LM refuses both).
    """
    return ctx.memo(_placement)


def layout(ctx: Context) -> Layout | None:
    """Returns the job's layout on its node group (:func:`placement`): the GPU split and the sharding, with the
    batch, recompute and precision left to the facts that read them (rules/checks/facts/step_model.py)."""
    placed = ctx.memo(_placement)
    return placed.layout if placed is not None else None


def training_group(ctx: Context) -> QuotedNodeGroup | None:
    """Returns the quoted node group the training job runs on (:func:`placement`); None when it cannot be known."""
    placed = ctx.memo(_placement)
    return placed.group if placed is not None else None


def _placement(ctx: Context) -> Placement | None:
    training, cluster = ctx.job.training, ctx.job.cluster
    group = cluster.group_named(ctx.value(training.node_group))
    if group is None:
        ctx.reader.missing.append(training.node_group.pointer)
        return None
    gpus_per_node = ctx.needed(group.gpu.count)
    node_count = ctx.needed(group.count)
    if gpus_per_node is None or node_count is None:
        return None
    parallelism = training.parallelism
    gpus = ctx.value(training.gpus)
    tensor = ctx.value(parallelism.tensor)
    pipeline = ctx.value(parallelism.pipeline)
    context = ctx.value(parallelism.context)
    sharding = ctx.value(parallelism.sharding)
    shard_group = ctx.value(parallelism.shard_group)
    expert, expert_tensor = ctx.value(parallelism.expert), ctx.value(parallelism.expert_tensor)
    try:
        plan = training_layout(int(gpus) if gpus is not None else None, int(gpus_per_node), int(node_count),
                               int(tensor), int(pipeline), sharding, int(shard_group) if shard_group else None,
                               int(context), expert=int(expert), expert_tensor=int(expert_tensor),
                               experts=expert_count(ctx))
    except NotWholeReplicas as error:
        count = (training.gpus.pointer if gpus is not None
                 else f"{group.count.pointer} × {group.gpu.count.pointer}")
        degrees = ", ".join(given.pointer for given in (parallelism.tensor, parallelism.pipeline, parallelism.context))
        raise InconsistentInput(f"{error} (inputs {count}, {degrees})") from None
    except NotWholeExpertGrid as error:
        count = (training.gpus.pointer if gpus is not None
                 else f"{group.count.pointer} × {group.gpu.count.pointer}")
        stated = (parallelism.expert, parallelism.expert_tensor, parallelism.pipeline,
                  training.model.architecture.experts.count)
        degrees = ", ".join(given.pointer for given in stated)
        raise InconsistentInput(f"{error} (inputs {count}, {degrees})") from None
    return Placement(plan, group)


def nics(ctx: Context, group: QuotedNodeGroup, purpose: str) -> topology.NicBandwidth:
    """Returns the node's NICs of one purpose (compute, storage) and their share per GPU of the node."""
    lines = []
    for nic in group.nics:
        if nic.purpose.value == purpose:
            count = ctx.value(nic.count)
            gbps = ctx.value(nic.gbps)
            if gbps:
                lines.append((count if count is not None else 0, gbps))
    gpus_per_node = ctx.value(group.gpu.count)
    return topology.nic_bandwidth(lines, int(gpus_per_node if gpus_per_node is not None else 1))


def cpu_cores_per_node(ctx: Context, group: QuotedNodeGroup) -> int | None:
    """Returns the cores of one of the group's servers (quote, else catalogue), noting what is missing."""
    sockets = ctx.needed(group.cpu.sockets)
    per_socket = ctx.needed(group.cpu.cores_per_socket)
    if sockets is None or per_socket is None:
        return None
    return topology.cpu_cores(int(sockets), int(per_socket))

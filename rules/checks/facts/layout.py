"""Where a workload runs: its node group, the training job's layout on it, and the node's NICs and cores."""

from __future__ import annotations

from dataclasses import dataclass

from rules.checks.base import Context
from rules.errors import InconsistentInput
from rules.estimates.communication import topology
from rules.estimates.model.layout import Layout, NotWholeReplicas, training_layout
from rules.job.pointers import NODE_GROUPS, PARALLELISM, TRAINING


def group_pointer(ctx: Context, workload: str) -> str | None:
    """Returns the pointer of the node group a workload runs on: the named one, else the first with GPUs."""
    groups = ctx.inputs.get(NODE_GROUPS, [])
    wanted = ctx.get(f"/workload/{workload}/node_group")
    for index, group in enumerate(groups):
        if wanted is not None and group.get("name") == wanted:
            return f"{NODE_GROUPS}/{index}"
    if wanted is None:
        for index, group in enumerate(groups):
            if isinstance(group.get("gpu"), dict) and group["gpu"].get("count"):
                return f"{NODE_GROUPS}/{index}"
    return None


@dataclass(frozen=True)
class Placement(Layout):
    """The training job's Layout on one node group of the quote."""

    group: str = ""  # JSON Pointer of the node group


def layout(ctx: Context) -> Placement | None:
    """Returns the job layout, or None (with the missing inputs noted) when it cannot be known.

    InconsistentInput, naming the inputs, when the GPU count is not a whole number of tensor × pipeline ×
    context replicas (Megatron-LM refuses such a world size).
    """
    return ctx.memo(_layout)


def _layout(ctx: Context) -> Placement | None:
    group = group_pointer(ctx, "training")
    if group is None:
        ctx.reader.missing.append(f"{TRAINING}/node_group")
        return None
    gpus_per_node = ctx.need(f"{group}/gpu/count")
    node_count = ctx.need(f"{group}/count")
    if gpus_per_node is None or node_count is None:
        return None
    gpus = ctx.num(f"{TRAINING}/gpus")
    tensor = ctx.num(f"{PARALLELISM}/tensor", 1)
    pipeline = ctx.num(f"{PARALLELISM}/pipeline", 1)
    context = ctx.num(f"{PARALLELISM}/context", 1)
    sharding = ctx.get(f"{PARALLELISM}/sharding", "ddp")
    shard_group = ctx.num(f"{PARALLELISM}/shard_group")
    try:
        plan = training_layout(int(gpus) if gpus is not None else None, int(gpus_per_node), int(node_count),
                               int(tensor), int(pipeline), sharding, int(shard_group) if shard_group else None,
                               int(context))
    except NotWholeReplicas as error:
        count = f"{TRAINING}/gpus" if gpus is not None else f"{group}/count × {group}/gpu/count"
        raise InconsistentInput(f"{error} (inputs {count}, {PARALLELISM}/tensor, {PARALLELISM}/pipeline, "
                                f"{PARALLELISM}/context)") from None
    return Placement(**vars(plan), group=group)


def nics(ctx: Context, group: str, purpose: str) -> topology.NicBandwidth:
    """Returns the node's NICs of one purpose (compute, storage) and their share per GPU of the node."""
    lines = []
    for index, nic in enumerate(ctx.inputs.get(f"{group}/nics") or []):
        if nic.get("purpose") == purpose:
            count = ctx.num(f"{group}/nics/{index}/count", 0)
            gbps = ctx.num(f"{group}/nics/{index}/gbps")
            if gbps:
                lines.append((count, gbps))
    return topology.nic_bandwidth(lines, int(ctx.num(f"{group}/gpu/count", 1)))


def cpu_cores_per_node(ctx: Context, group: str) -> int | None:
    """Returns the cores of one of the group's servers (quote, else catalogue), noting what is missing."""
    sockets = ctx.need(f"{group}/cpu/sockets")
    per_socket = ctx.need(f"{group}/cpu/cores_per_socket")
    if sockets is None or per_socket is None:
        return None
    return topology.cpu_cores(int(sockets), int(per_socket))

"""How a training job's GPUs are split: data × tensor × pipeline parallelism, and how state is sharded.

The data-parallel size is what remains of the GPUs once tensor and pipeline parallelism have taken theirs
(Megatron-LM ``megatron/core/parallel_state.py``, ``initialize_model_parallel``: data_parallel_size =
world_size // (tensor_model_parallel_size × pipeline_model_parallel_size)); Megatron-LM orders ranks
tensor-first, so a node holds whole tensor-parallel groups and its remaining GPUs are data-parallel ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from rules.estimates._args import require_positive_int


@dataclass(frozen=True)
class Layout:
    """A training job laid out on nodes of identical GPUs."""

    gpus: int
    gpus_per_node: int
    nodes: int  # whole nodes the GPUs occupy
    tensor: int
    pipeline: int
    data_parallel: int
    sharding: str  # ddp, zero1, zero2, zero3, fsdp-full or fsdp-hybrid
    shard_group: int | None  # ranks one fsdp-hybrid shard spans; None for the other shardings

    @property
    def model_parallel(self) -> int:
        """Returns the GPUs one model replica spans: tensor × pipeline."""
        return self.tensor * self.pipeline

    @property
    def gpus_on_node(self) -> int:
        """Returns the job's GPUs on one of its nodes (all of its GPUs when it fits on part of a node)."""
        return min(self.gpus, self.gpus_per_node)

    @property
    def dp_ranks_per_node(self) -> int:
        """Returns the data-parallel ranks sharing a node (tensor parallelism innermost, as Megatron-LM orders)."""
        return max(1, min(self.data_parallel, self.gpus_per_node // self.tensor))

    @property
    def whole_unit_gpus(self) -> int:
        """Returns the step in which the job can grow: whole nodes and whole model replicas, lcm(node, t × p)."""
        return math.lcm(self.gpus_per_node, self.model_parallel)


def hybrid_shard_group(data_parallel: int, gpus_per_node: int, tensor: int) -> int:
    """Returns FSDP HYBRID_SHARD's default shard group: the data-parallel ranks of one node.

    PyTorch FSDP (ShardingStrategy.HYBRID_SHARD) shards within a node and replicates across nodes; the
    group must divide the data-parallel size, so it is the largest common divisor of the two.
    """
    return math.gcd(data_parallel, max(1, gpus_per_node // tensor))


def training_layout(gpus: int | None, gpus_per_node: int, nodes_quoted: int, tensor: int = 1, pipeline: int = 1,
                    sharding: str = "ddp", shard_group: int | None = None) -> Layout:
    """Returns the layout of a job on ``gpus`` GPUs (all ``gpus_per_node × nodes_quoted`` when None).

    data_parallel = gpus // (tensor × pipeline), at least 1 (Megatron-LM parallel_state); the nodes are
    the whole nodes the GPUs fill; fsdp-hybrid without a stated shard group shards over one node's
    data-parallel ranks (:func:`hybrid_shard_group`).
    """
    require_positive_int("gpus_per_node", gpus_per_node)
    if gpus is None:
        gpus = gpus_per_node * nodes_quoted
    data_parallel = max(1, gpus // (tensor * pipeline))
    if sharding == "fsdp-hybrid" and shard_group is None:
        shard_group = hybrid_shard_group(data_parallel, gpus_per_node, tensor)
    return Layout(gpus=gpus, gpus_per_node=gpus_per_node, nodes=math.ceil(gpus / gpus_per_node), tensor=tensor,
                  pipeline=pipeline, data_parallel=data_parallel, sharding=sharding,
                  shard_group=shard_group if shard_group else None)


def resized(layout: Layout, gpus: int) -> Layout:
    """Returns the same layout (tensor, pipeline, sharding) on ``gpus`` GPUs; data parallelism absorbs the change.

    A stated fsdp-hybrid shard group that no longer divides the data-parallel size is dropped, so that
    :func:`with_sharding` falls back to one node's data-parallel ranks.
    """
    data_parallel = max(1, gpus // layout.model_parallel)
    shard_group = layout.shard_group
    if shard_group is not None and (shard_group > data_parallel or data_parallel % shard_group):
        shard_group = None
    return replace(layout, gpus=gpus, nodes=math.ceil(gpus / layout.gpus_per_node), data_parallel=data_parallel,
                   shard_group=shard_group)


def with_sharding(layout: Layout, sharding: str) -> Layout:
    """Returns the layout under another sharding; fsdp-hybrid gets one node's data-parallel ranks by default."""
    shard_group = layout.shard_group
    if sharding == "fsdp-hybrid" and shard_group is None:
        shard_group = hybrid_shard_group(layout.data_parallel, layout.gpus_per_node, layout.tensor)
    return replace(layout, sharding=sharding, shard_group=shard_group)

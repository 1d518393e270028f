"""Facts about the training workload that several checks share: where it runs and what it keeps in memory.

Nothing here decides; it reads inputs through a check's Context (so every input read is recorded) and
calls the estimators in rules/estimates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rules.checks.base import Context
from rules.estimates import memory
from rules.units import GIB

T = "/workload/training"
A = f"{T}/model/architecture"
P = f"{T}/parallelism"


def group_pointer(ctx: Context, workload: str) -> str | None:
    """Returns the pointer of the node group a workload runs on: the named one, else the first with GPUs."""
    groups = ctx.inputs.get("/quote/node_groups", [])
    wanted = ctx.get(f"/workload/{workload}/node_group")
    for index, group in enumerate(groups):
        if wanted is not None and group.get("name") == wanted:
            return f"/quote/node_groups/{index}"
    if wanted is None:
        for index, group in enumerate(groups):
            if isinstance(group.get("gpu"), dict) and group["gpu"].get("count"):
                return f"/quote/node_groups/{index}"
    return None


@dataclass(frozen=True)
class Layout:
    """How the training job is laid out on the quoted hardware."""

    group: str  # JSON Pointer of the node group
    gpus: int
    gpus_per_node: int
    nodes: int
    tensor: int
    pipeline: int
    data_parallel: int
    sharding: str
    shard_group: int | None


def layout(ctx: Context) -> Layout | None:
    """Returns the job layout, or None (with the missing inputs recorded) when it cannot be known."""
    return ctx.memo("training.layout", _layout)


def _layout(ctx: Context) -> Layout | None:
    group = group_pointer(ctx, "training")
    if group is None:
        ctx.reader.missing.append(f"{T}/node_group")
        return None
    gpus_per_node = ctx.need(f"{group}/gpu/count")
    node_count = ctx.need(f"{group}/count")
    if gpus_per_node is None or node_count is None:
        return None
    gpus = int(ctx.num(f"{T}/gpus", gpus_per_node * node_count))
    tensor = int(ctx.num(f"{P}/tensor", 1))
    pipeline = int(ctx.num(f"{P}/pipeline", 1))
    sharding = ctx.get(f"{P}/sharding", "ddp")
    shard_group = ctx.num(f"{P}/shard_group")
    data_parallel = max(1, gpus // (tensor * pipeline))
    if sharding == "fsdp-hybrid" and shard_group is None:
        # FSDP's HYBRID_SHARD shards within a node and replicates across nodes.
        shard_group = min(data_parallel, max(1, int(gpus_per_node) // tensor))
    return Layout(group=group, gpus=gpus, gpus_per_node=int(gpus_per_node),
                  nodes=math.ceil(gpus / gpus_per_node), tensor=tensor, pipeline=pipeline,
                  data_parallel=data_parallel, sharding=sharding,
                  shard_group=int(shard_group) if shard_group else None)


@dataclass(frozen=True)
class MemoryEstimate:
    """Per-GPU memory of one training step, in bytes, with the convention that sized the model state."""

    sharding: str
    micro_batch: int | None
    state: memory.StateBytesPerParam
    convention: str
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float | None  # None: the architecture or batch shape is not known
    gathered_bytes: float
    other_bytes: float
    host_offload_bytes: float
    capacity_bytes: float
    usable_bytes: float
    parameters: float

    @property
    def model_state_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @property
    def total_bytes(self) -> float:
        return self.model_state_bytes + (self.activations_bytes or 0) + self.gathered_bytes + self.other_bytes

    def evidence(self) -> dict[str, float | str | bool]:
        """Returns the stable evidence names of peak-memory (GiB per GPU) plus the model-state figures."""
        return {
            "weights_gib": self.weights_bytes / GIB,
            "gradients_gib": self.gradients_bytes / GIB,
            "optimizer_gib": self.optimizer_bytes / GIB,
            "activations_gib": (self.activations_bytes or 0) / GIB,
            "other_gib": (self.gathered_bytes + self.other_bytes) / GIB,
            "gathered_parameters_gib": self.gathered_bytes / GIB,
            "total_gib": self.total_bytes / GIB,
            "usable_gib": self.usable_bytes / GIB,
            "capacity_gib": self.capacity_bytes / GIB,
            "host_offload_gib": self.host_offload_bytes / GIB,
            "model_state_bytes_per_param": self.state.total_bytes_per_param,
            "model_state_gb_per_gpu": self.model_state_bytes / 1e9,
            "model_state_total_gb": self.parameters * self.state.total_bytes_per_param / 1e9,
            "activations_known": self.activations_bytes is not None,
            "spare_fraction": spare_fraction(self.total_bytes, self.usable_bytes),
        }


def spare_fraction(need: float, available: float) -> float:
    """Returns the share of ``available`` left after ``need`` (negative when need exceeds it)."""
    return 1 - need / available if available > 0 else -1.0


def memory_estimate(ctx: Context, sharding: str | None = None, micro_batch: int | None = None) -> MemoryEstimate | None:
    """Returns the per-GPU memory estimate for the submitted layout, or with another sharding / micro-batch.

    None when the inputs that size model state are missing (they are recorded as missing on ``ctx``).
    """
    plan = layout(ctx)
    parameters = ctx.need(f"{T}/model/parameters")
    precision = ctx.get(f"{T}/precision")
    optimizer = ctx.get(f"{T}/optimizer")
    capacity_gib = ctx.need(f"{plan.group}/gpu/memory_gib") if plan else None
    for pointer, value in ((f"{T}/precision", precision), (f"{T}/optimizer", optimizer)):
        if value is None and pointer not in ctx.missing:
            ctx.missing.append(pointer)
    if plan is None or parameters is None or precision is None or optimizer is None or capacity_gib is None:
        return None
    sharding = sharding or plan.sharding
    micro_batch = micro_batch or ctx.num(f"{T}/micro_batch")
    convention = ctx.setting("conventions.model_state_bytes")
    state = memory.model_state_bytes_per_param(precision, optimizer, convention)
    offload = ctx.get(f"{P}/offload", "none")
    if convention == "megatron-distributed-optimizer" and sharding == "ddp":
        sharding = "zero1"  # Megatron's distributed optimizer is ZeRO-1 by construction
    shard_group = plan.shard_group
    if sharding == "fsdp-hybrid" and shard_group is None:
        shard_group = min(plan.data_parallel, max(1, plan.gpus_per_node // plan.tensor))
    per_gpu = memory.model_state_per_gpu_bytes(
        parameters=parameters,
        trainable_parameters=ctx.num(f"{T}/model/trainable_parameters", parameters),
        bytes_per_param=state, sharding=sharding, data_parallel=plan.data_parallel,
        tensor_parallel=plan.tensor, pipeline_parallel=plan.pipeline,
        shard_group=shard_group if sharding == "fsdp-hybrid" else None,
        offload_optimizer=offload in ("optimizer", "optimizer+parameters") and sharding != "ddp",
        offload_parameters=offload == "optimizer+parameters" and sharding in ("zero3", "fsdp-full", "fsdp-hybrid"))
    activations = _activations(ctx, plan, int(micro_batch) if micro_batch else None)
    gathered = 0.0
    if sharding in ("zero3", "fsdp-full", "fsdp-hybrid"):
        gathered = _gathered(ctx, sharding, state)
    fragmentation = ctx.setting("memory.allocator_fragmentation_fraction")
    tensors = per_gpu.gpu_total_bytes + (activations or 0) + gathered
    other = ctx.setting("memory.cuda_context_gib") * GIB + fragmentation * tensors
    capacity = capacity_gib * GIB
    return MemoryEstimate(
        sharding=sharding, micro_batch=int(micro_batch) if micro_batch else None, state=state,
        convention=convention, weights_bytes=per_gpu.weights_bytes, gradients_bytes=per_gpu.gradients_bytes,
        optimizer_bytes=per_gpu.optimizer_bytes, activations_bytes=activations, gathered_bytes=gathered,
        other_bytes=other, host_offload_bytes=per_gpu.host_offload_bytes, capacity_bytes=capacity,
        usable_bytes=capacity * (1 - ctx.setting("memory.headroom_fraction")), parameters=parameters)


def _architecture(ctx: Context) -> dict | None:
    layers, hidden, heads = ctx.need(f"{A}/layers"), ctx.need(f"{A}/hidden"), ctx.need(f"{A}/heads")
    if layers is None or hidden is None or heads is None:
        return None
    mlp = ctx.get(f"{A}/mlp", "gelu")
    return {
        "layers": int(layers), "hidden": int(hidden), "heads": int(heads),
        "kv_heads": int(ctx.num(f"{A}/kv_heads", heads)),
        "ffn_hidden": int(ctx.num(f"{A}/ffn_hidden", 4 * hidden)),
        "vocab": int(v) if (v := ctx.num(f"{A}/vocab")) else None,
        "mlp": mlp,
        "dropout": bool(ctx.get(f"{A}/dropout", mlp == "gelu")),
        "norm": ctx.get(f"{A}/norm", "rmsnorm" if mlp == "swiglu" else "layernorm"),
        "tied": bool(ctx.get(f"{A}/tied_embeddings", False)),
    }


def _activations(ctx: Context, plan: Layout, micro_batch: int | None) -> float | None:
    arch = _architecture(ctx)
    sequence_length = ctx.need(f"{T}/sequence_length")
    if micro_batch is None:
        ctx.need(f"{T}/micro_batch")
    if arch is None or sequence_length is None or micro_batch is None:
        return None
    global_batch = ctx.num(f"{T}/global_batch")
    micro_batches = None
    if global_batch:
        micro_batches = max(1, int(global_batch // (micro_batch * plan.data_parallel)))
    return memory.activation_bytes_per_gpu(
        layers=arch["layers"], sequence_length=int(sequence_length), micro_batch=micro_batch,
        hidden=arch["hidden"], heads=arch["heads"], tensor_parallel=plan.tensor,
        sequence_parallel=bool(ctx.get(f"{P}/sequence_parallel", False)),
        recompute=ctx.get(f"{T}/activation_checkpointing", "none"),
        flash_attention=bool(ctx.get(f"{T}/flash_attention", False)),
        ffn_hidden=arch["ffn_hidden"], kv_heads=arch["kv_heads"], mlp=arch["mlp"], dropout=arch["dropout"],
        pipeline_parallel=plan.pipeline, virtual_stages=int(ctx.num(f"{P}/virtual_stages", 1)),
        micro_batches=micro_batches, vocab=arch["vocab"])


def _gathered(ctx: Context, sharding: str, state: memory.StateBytesPerParam) -> float:
    arch = _architecture(ctx)
    if arch is None or arch["vocab"] is None:
        return 0.0
    # DeepSpeed ZeRO-3 gathers module by module; FSDP gathers one wrapped block (decoder layer) at a time.
    unit = "module" if sharding == "zero3" else "block"
    largest = memory.largest_layer_parameters(
        hidden=arch["hidden"], heads=arch["heads"], kv_heads=arch["kv_heads"], ffn_hidden=arch["ffn_hidden"],
        vocab=arch["vocab"], tied_embeddings=arch["tied"], mlp=arch["mlp"], norm=arch["norm"], unit=unit)
    return memory.gathered_parameters_bytes(largest, bytes_per_param=state.weights_bytes_per_param,
                                            prefetch_layers=ctx.setting("memory.gathered_layers") - 1)

"""Facts about the serving workload that the inference checks share: where it runs and what one GPU holds.

Reads the inference workload of the job (its documented defaults declared in rules/job/spec.py, the policy's
applied here), and calls the estimators in rules/estimates/serving/inference_memory.py; the replica's memory
plan is memoised per evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.checks.base import Context
from rules.errors import InconsistentInput
from rules.estimates.model.hardware import GpuSpec, NodeSpec
from rules.estimates.serving import inference_memory
from rules.estimates.serving.inference_memory import AttentionShape, Deployment, ReplicaMemory, ServingEngine
from rules.job.cluster import QuotedNodeGroup
from rules.job.workload import KV_CACHE_DEFAULT, SIXTEEN_BIT, Serving
from rules.units import bytes_to_gib, gib_to_bytes


@dataclass(frozen=True)
class Attention(AttentionShape):
    """The attention shape that sizes the KV cache, and which of it the submission left to defaults."""

    kv_heads_given: bool = True  # False: kv_heads was left out and taken equal to heads
    head_dim_given: bool = True  # False: head_dim was left out and taken as hidden // heads

    @property
    def grouped(self) -> bool:
        return self.kv_heads < self.heads

    def describe(self) -> str:
        """Returns e.g. "32 KV heads (no GQA) of dim 128" or "8 KV heads for 64 query heads (GQA) of dim 128"."""
        if not self.grouped:
            heads = f"{self.kv_heads} KV heads (no GQA" + ("" if self.kv_heads_given else
                                                            "; kv_heads not given, taken equal to heads") + ")"
        else:
            kind = "MQA" if self.kv_heads == 1 else "GQA"
            heads = f"{self.kv_heads} KV heads for {self.heads} query heads ({kind})"
        dim = f"head dim {self.head_dim}" + ("" if self.head_dim_given else " (hidden / heads)")
        return f"{self.layers} layers × {heads} × {dim}"


@dataclass(frozen=True)
class ServingMemory:
    """One replica's memory plan on the serving node group, with what the submission said and left out."""

    hardware: NodeSpec  # the serving node group
    group: QuotedNodeGroup  # the serving node group as quoted
    engine: ServingEngine
    weight_precision: str
    kv_precision: str
    kv_precision_note: str
    attention: Attention | None  # None: the architecture is not known
    context_tokens: int | None  # None: neither the context nor prompt + output is known
    replica: ReplicaMemory | None  # None when the estimators refused the inputs (``problem`` says why)
    problem: str = ""

    def evidence(self) -> dict[str, float | int | str | bool]:
        """Returns the inference-memory evidence (GiB per GPU unless the name says otherwise)."""
        replica = self.replica
        if replica is None:
            return {}
        evidence: dict[str, float | int | str | bool] = {
            "gpu_model": self.hardware.gpu.model,
            "parameters": replica.parameters,
            "weight_precision": self.weight_precision,
            "weight_bytes_per_param": replica.weight_bytes_per_param,
            "weights_gib": bytes_to_gib(replica.weight_bytes),
            "weights_gib_per_gpu": bytes_to_gib(replica.weight_bytes_per_gpu),
            "reserve_gib": bytes_to_gib(replica.reserve_bytes),
            "weights_and_reserve_gib": bytes_to_gib(replica.weights_and_reserve_bytes),
            "capacity_gib": bytes_to_gib(self.hardware.gpu.capacity_bytes),
            "gpu_memory_utilization": self.engine.gpu_memory_utilization,
            "usable_gib": bytes_to_gib(replica.usable_bytes),
            "tensor_parallel": replica.tensor_parallel,
            "kv_cache_precision": self.kv_precision,
            "kv_cache_bytes_per_element": inference_memory.KV_PRECISION_BYTES[self.kv_precision],
            "kv_cache_precision_note": self.kv_precision_note,
        }
        if self.attention is not None:
            evidence.update(layers=self.attention.layers, heads=self.attention.heads,
                            kv_heads=self.attention.kv_heads, head_dim=self.attention.head_dim,
                            gqa=self.attention.grouped, attention=self.attention.describe())
        if replica.kv is not None:
            evidence.update(kv_cache_bytes_per_token=replica.kv.whole_model_bytes,
                            kv_cache_bytes_per_token_per_gpu=replica.kv.per_gpu_bytes,
                            kv_heads_per_gpu=replica.kv.kv_heads_per_gpu)
        if self.context_tokens is not None:
            evidence["context_tokens"] = self.context_tokens
        if replica.concurrency is not None:
            concurrency = replica.concurrency
            evidence.update(kv_cache_gib=bytes_to_gib(concurrency.kv_budget_bytes),
                            kv_cache_gib_per_sequence=bytes_to_gib(concurrency.kv_bytes_per_sequence),
                            shortfall_gib=bytes_to_gib(concurrency.shortfall_bytes),
                            kv_block_tokens=self.engine.block_size_tokens,
                            max_concurrent_sequences=concurrency.max_sequences)
        return evidence


# Why a served mixture of experts over expert tensor parallelism gets no latency estimate.
EXPERTS_NOT_MODELLED = ("the serving latency model does not model expert tensor parallelism "
                        "(inference.parallelism.expert_tensor > 1); inference-memory sizes the weights of every expert")


def serving_not_modelled_reason(ctx: Context) -> str | None:
    """Returns why the served model's latency is not modelled whatever the inputs (a mixture of experts whose experts
    are split by expert tensor parallelism), else None."""
    serving = ctx.job.serving
    if serving.model.architecture.experts.count.value is not None and (ctx.value(serving.parallelism.expert_tensor)
                                                                          or 1) > 1:
        return EXPERTS_NOT_MODELLED
    return None


def serving_group(ctx: Context) -> QuotedNodeGroup | None:
    """Returns the node group that serves: the one the workload names, else the first with GPUs (None: none is)."""
    return ctx.job.cluster.group_named(ctx.value(ctx.job.serving.node_group))


def hardware(ctx: Context, group: QuotedNodeGroup) -> NodeSpec | None:
    """Returns the serving node group's hardware, or None (with the missing inputs noted) when it is not known."""
    gpus_per_node = ctx.needed(group.gpu.count)
    nodes = ctx.needed(group.count)
    capacity_gib = ctx.needed(group.gpu.memory_gib)
    if gpus_per_node is None or nodes is None or capacity_gib is None:
        return None
    model = ctx.value(group.gpu.model)
    gpu = GpuSpec(model=model if model is not None else "GPU", capacity_bytes=gib_to_bytes(capacity_gib))
    return NodeSpec(gpu=gpu, gpus_per_node=int(gpus_per_node), nodes=int(nodes), pointer=group.pointer)


def serving_memory(ctx: Context) -> ServingMemory | None:
    """Returns one replica's memory plan, or None when the weights cannot be sized (inputs noted missing).

    The plan may lack the KV cache (``replica.kv`` / ``replica.concurrency`` None) when the architecture or
    the context is missing: those inputs are then noted missing too.
    """
    return ctx.memo(_serving_memory)


def _serving_memory(ctx: Context) -> ServingMemory | None:
    serving = ctx.job.serving
    group = serving_group(ctx)
    if group is None:
        ctx.reader.missing.append(serving.node_group.pointer)
    node_group = hardware(ctx, group) if group is not None else None
    parameters = ctx.needed(serving.model.parameters)
    weight_precision = ctx.value(serving.weight_precision)
    if weight_precision is None:
        ctx.reader.missing.append(serving.weight_precision.pointer)
    if group is None or node_group is None or parameters is None or weight_precision is None:
        return None
    tensor_parallel = int(ctx.value(serving.tensor_parallel))
    utilization = ctx.value(serving.gpu_memory_utilization)
    if utilization is None:
        utilization = ctx.setting("inference.default_gpu_memory_utilization")
    kv_precision, kv_note = _kv_precision(ctx, serving, weight_precision)
    attention = _attention(ctx, serving)
    context_tokens = _context_tokens(ctx, serving)
    engine = ServingEngine(gpu_memory_utilization=utilization,
                           reserve_bytes=gib_to_bytes(ctx.setting("inference.activation_reserve_gib")),
                           block_size_tokens=int(ctx.setting("inference.kv_block_tokens")),
                           max_num_seqs=int(ctx.setting("inference.max_num_seqs")))
    replica, problem = None, ""
    try:
        deployment = Deployment(parameters, weight_precision, kv_precision, tensor_parallel,
                                int4_group_size=int(ctx.setting("inference.int4_group_size")))
        replica = inference_memory.replica_memory(deployment, node_group, engine, attention, context_tokens)
    except InconsistentInput as error:  # out-of-range inputs the schema cannot rule out (e.g. overflowing sizes)
        problem = str(error)
    return ServingMemory(hardware=node_group, group=group, engine=engine, weight_precision=weight_precision,
                         kv_precision=kv_precision, kv_precision_note=kv_note, attention=attention,
                         context_tokens=context_tokens, replica=replica, problem=problem)


def _kv_precision(ctx: Context, serving: Serving, weight_precision: str) -> tuple[str, str]:
    """Returns the KV-cache precision (its default the weights' 16-bit dtype, else bf16) and where it came from."""
    precision = ctx.value(serving.kv_cache_precision)
    if serving.kv_cache_precision.stated:
        return precision, "as submitted"
    if weight_precision in SIXTEEN_BIT:
        return precision, f"not given: the {weight_precision} weight precision"
    return precision, (f"not given: {KV_CACHE_DEFAULT} by default, since {weight_precision} "
                       f"weights are not 16-bit")


def _attention(ctx: Context, serving: Serving) -> Attention | None:
    architecture = serving.model.architecture
    layers, heads = ctx.needed(architecture.layers), ctx.needed(architecture.heads)
    hidden = ctx.value(architecture.hidden)
    head_dim = ctx.value(architecture.head_dim)
    if head_dim is None:
        if hidden is None:
            ctx.needed(architecture.hidden)  # head_dim defaults to hidden / heads
        elif heads is not None:
            head_dim = inference_memory.default_head_dim(int(hidden), int(heads))
        if head_dim is None and hidden is not None:  # fewer hidden units than heads: it must be given
            ctx.needed(architecture.head_dim)
    if layers is None or heads is None or head_dim is None:
        return None
    kv_heads = ctx.value(architecture.kv_heads)  # default: heads (no GQA)
    return Attention(layers=int(layers), heads=int(heads), kv_heads=int(kv_heads), head_dim=int(head_dim),
                     hidden=int(hidden) if hidden else None, kv_heads_given=architecture.kv_heads.stated,
                     head_dim_given=ctx.value(architecture.head_dim) is not None)


def _context_tokens(ctx: Context, serving: Serving) -> int | None:
    """Returns the context each sequence reserves: context_tokens, else (its default) prompt + output tokens."""
    if not serving.context_tokens.stated:
        # The default rests on the prompt and output lengths: they are read when it is taken.
        prompt, output = ctx.value(serving.prompt_tokens), ctx.value(serving.output_tokens)
        if prompt is None or output is None:
            ctx.needed(serving.context_tokens)
            return None
    return int(ctx.value(serving.context_tokens))

"""Facts about the serving workload that the inference checks share: where it runs and what one GPU holds.

Reads the inference workload, applies the documented defaults, and calls the estimators in
rules/estimates/serving/inference_memory.py; the replica's memory plan is memoised per evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.checks.base import Context
from rules.checks.facts.layout import group_pointer
from rules.errors import InconsistentInput
from rules.estimates.model.hardware import GpuSpec, NodeSpec
from rules.estimates.serving import inference_memory
from rules.estimates.serving.inference_memory import AttentionShape, Deployment, ReplicaMemory, ServingEngine
from rules.job.pointers import INFERENCE, INFERENCE_ARCHITECTURE, INFERENCE_MODEL
from rules.units import bytes_to_gib, gib_to_bytes

SIXTEEN_BIT = ("bf16", "fp16")
# A KV cache in a precision other than the model's 16-bit dtype needs an explicit choice (vLLM's
# kv_cache_dtype "auto" keeps the model dtype); quantised and fp32 weights are served with a bf16 cache here.
DEFAULT_KV_PRECISION = "bf16"


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


def hardware(ctx: Context) -> NodeSpec | None:
    """Returns the serving node group, or None (with the missing inputs noted) when it is not known."""
    group = group_pointer(ctx, "inference")
    if group is None:
        ctx.reader.missing.append(f"{INFERENCE}/node_group")
        return None
    gpus_per_node = ctx.need(f"{group}/gpu/count")
    nodes = ctx.need(f"{group}/count")
    capacity_gib = ctx.need(f"{group}/gpu/memory_gib")
    if gpus_per_node is None or nodes is None or capacity_gib is None:
        return None
    gpu = GpuSpec(model=ctx.get(f"{group}/gpu/model", "GPU"), capacity_bytes=gib_to_bytes(capacity_gib))
    return NodeSpec(gpu=gpu, gpus_per_node=int(gpus_per_node), nodes=int(nodes), pointer=group)


def serving_memory(ctx: Context) -> ServingMemory | None:
    """Returns one replica's memory plan, or None when the weights cannot be sized (inputs noted missing).

    The plan may lack the KV cache (``replica.kv`` / ``replica.concurrency`` None) when the architecture or
    the context is missing: those inputs are then noted missing too.
    """
    return ctx.memo(_serving_memory)


def _serving_memory(ctx: Context) -> ServingMemory | None:
    node_group = hardware(ctx)
    parameters = ctx.need(f"{INFERENCE_MODEL}/parameters")
    weight_precision = ctx.get(f"{INFERENCE}/weight_precision")
    if weight_precision is None:
        ctx.reader.missing.append(f"{INFERENCE}/weight_precision")
    if node_group is None or parameters is None or weight_precision is None:
        return None
    tensor_parallel = int(ctx.num(f"{INFERENCE}/tensor_parallel", 1))
    utilization = ctx.num(f"{INFERENCE}/gpu_memory_utilization",
                          ctx.setting("inference.default_gpu_memory_utilization"))
    kv_precision, kv_note = _kv_precision(ctx, weight_precision)
    attention = _attention(ctx)
    context_tokens = _context_tokens(ctx)
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
    return ServingMemory(hardware=node_group, engine=engine, weight_precision=weight_precision,
                         kv_precision=kv_precision, kv_precision_note=kv_note, attention=attention,
                         context_tokens=context_tokens, replica=replica, problem=problem)


def _kv_precision(ctx: Context, weight_precision: str) -> tuple[str, str]:
    """Returns the KV-cache precision and a note saying where it came from."""
    submitted = ctx.get(f"{INFERENCE}/kv_cache_precision")
    if submitted is not None:
        return submitted, "as submitted"
    if weight_precision in SIXTEEN_BIT:
        return weight_precision, f"not given: the {weight_precision} weight precision"
    return DEFAULT_KV_PRECISION, (f"not given: {DEFAULT_KV_PRECISION} by default, since {weight_precision} "
                                  f"weights are not 16-bit")


def _attention(ctx: Context) -> Attention | None:
    layers, heads = ctx.need(f"{INFERENCE_ARCHITECTURE}/layers"), ctx.need(f"{INFERENCE_ARCHITECTURE}/heads")
    hidden = ctx.num(f"{INFERENCE_ARCHITECTURE}/hidden")
    head_dim = ctx.num(f"{INFERENCE_ARCHITECTURE}/head_dim")
    if head_dim is None:
        if hidden is None:
            ctx.need(f"{INFERENCE_ARCHITECTURE}/hidden")  # head_dim defaults to hidden / heads
        elif heads is not None:
            head_dim = inference_memory.default_head_dim(int(hidden), int(heads))
        if head_dim is None and hidden is not None:  # fewer hidden units than heads: it must be given
            ctx.need(f"{INFERENCE_ARCHITECTURE}/head_dim")
    if layers is None or heads is None or head_dim is None:
        return None
    kv_heads = ctx.num(f"{INFERENCE_ARCHITECTURE}/kv_heads")
    return Attention(layers=int(layers), heads=int(heads), kv_heads=int(kv_heads or heads), head_dim=int(head_dim),
                     hidden=int(hidden) if hidden else None, kv_heads_given=kv_heads is not None,
                     head_dim_given=ctx.num(f"{INFERENCE_ARCHITECTURE}/head_dim") is not None)


def _context_tokens(ctx: Context) -> int | None:
    """Returns the context each sequence reserves: context_tokens, else prompt + output tokens."""
    context = ctx.num(f"{INFERENCE}/context_tokens")
    if context is None:
        prompt, output = ctx.num(f"{INFERENCE}/prompt_tokens"), ctx.num(f"{INFERENCE}/output_tokens")
        if prompt is None or output is None:
            ctx.need(f"{INFERENCE}/context_tokens")
            return None
        return inference_memory.context_tokens(int(prompt), int(output))
    return int(context)

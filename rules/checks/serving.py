"""Facts about the serving workload that the inference checks share: where it runs and what one GPU holds.

Nothing here decides; it reads inputs through a check's Context (so every input read is recorded),
applies the documented defaults, and calls the estimators in rules/estimates/inference.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.checks.base import Context
from rules.checks.facts.layout import group_pointer
from rules.errors import InconsistentInput
from rules.estimates import inference
from rules.units import GIB

I = "/workload/inference"  # noqa: E741 - the inference workload, as T is the training one
M = f"{I}/model"
A = f"{M}/architecture"

SIXTEEN_BIT = ("bf16", "fp16")
# A KV cache in a precision other than the model's 16-bit dtype needs an explicit choice (vLLM's
# kv_cache_dtype "auto" keeps the model dtype); quantised and fp32 weights are served with a bf16 cache here.
DEFAULT_KV_PRECISION = "bf16"


@dataclass(frozen=True)
class Hardware:
    """The serving node group: its pointer, GPU model and counts, and one GPU's memory."""

    group: str  # JSON Pointer of the node group
    gpu_model: str
    gpus_per_node: int
    nodes: int
    capacity_bytes: float


@dataclass(frozen=True)
class Attention:
    """The attention shape that sizes the KV cache."""

    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int | None
    kv_heads_given: bool  # False: kv_heads was left out and taken equal to heads
    head_dim_given: bool  # False: head_dim was left out and taken as hidden // heads

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
    """One replica's memory plan: weights, reserve and the KV cache each GPU of it holds."""

    hardware: Hardware
    parameters: float
    weight_precision: str
    weight_bytes: float  # whole model, quantisation metadata included
    tensor_parallel: int
    gpu_memory_utilization: float
    usable_bytes: float  # capacity × gpu_memory_utilization, per GPU
    reserve_bytes: float  # activation / workspace reserve per GPU (policy)
    kv_precision: str
    kv_precision_note: str
    attention: Attention | None  # None: the architecture is not known
    context_tokens: int | None  # None: neither the context nor prompt + output is known
    kv: inference.KvCacheBytesPerToken | None
    concurrency: inference.ConcurrencyBudget | None
    block_size_tokens: int
    problem: str = ""  # why an estimator refused the inputs, when it did (the figures are then not usable)

    @property
    def weight_bytes_per_gpu(self) -> float:
        return self.weight_bytes / self.tensor_parallel

    def evidence(self) -> dict[str, float | int | str | bool]:
        """Returns the inference-memory evidence (GiB per GPU unless the name says otherwise)."""
        weights_and_reserve = self.weight_bytes_per_gpu + self.reserve_bytes
        evidence: dict[str, float | int | str | bool] = {
            "gpu_model": self.hardware.gpu_model,
            "parameters": self.parameters,
            "weight_precision": self.weight_precision,
            "weight_bytes_per_param": self.weight_bytes / self.parameters,
            "weights_gib": self.weight_bytes / GIB,
            "weights_gib_per_gpu": self.weight_bytes_per_gpu / GIB,
            "reserve_gib": self.reserve_bytes / GIB,
            "weights_and_reserve_gib": weights_and_reserve / GIB,
            "capacity_gib": self.hardware.capacity_bytes / GIB,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "usable_gib": self.usable_bytes / GIB,
            "tensor_parallel": self.tensor_parallel,
            "kv_cache_precision": self.kv_precision,
            "kv_cache_bytes_per_element": inference.KV_PRECISION_BYTES[self.kv_precision],
            "kv_cache_precision_note": self.kv_precision_note,
        }
        if self.attention is not None:
            evidence.update(layers=self.attention.layers, heads=self.attention.heads,
                            kv_heads=self.attention.kv_heads, head_dim=self.attention.head_dim,
                            gqa=self.attention.grouped, attention=self.attention.describe())
        if self.kv is not None:
            evidence.update(kv_cache_bytes_per_token=self.kv.whole_model_bytes,
                            kv_cache_bytes_per_token_per_gpu=self.kv.per_gpu_bytes,
                            kv_heads_per_gpu=self.kv.kv_heads_per_gpu)
        if self.context_tokens is not None:
            evidence["context_tokens"] = self.context_tokens
        if self.concurrency is not None:
            evidence.update(kv_cache_gib=self.concurrency.kv_budget_bytes / GIB,
                            kv_cache_gib_per_sequence=self.concurrency.kv_bytes_per_sequence / GIB,
                            shortfall_gib=self.concurrency.shortfall_bytes / GIB,
                            kv_block_tokens=self.block_size_tokens,
                            max_concurrent_sequences=self.concurrency.max_sequences)
        return evidence


def hardware(ctx: Context) -> Hardware | None:
    """Returns the serving node group, or None (with the missing inputs recorded) when it is not known."""
    group = group_pointer(ctx, "inference")
    if group is None:
        ctx.reader.missing.append(f"{I}/node_group")
        return None
    gpus_per_node = ctx.need(f"{group}/gpu/count")
    nodes = ctx.need(f"{group}/count")
    capacity_gib = ctx.need(f"{group}/gpu/memory_gib")
    if gpus_per_node is None or nodes is None or capacity_gib is None:
        return None
    return Hardware(group=group, gpu_model=ctx.get(f"{group}/gpu/model", "GPU"), gpus_per_node=int(gpus_per_node),
                    nodes=int(nodes), capacity_bytes=capacity_gib * GIB)


def serving_memory(ctx: Context) -> ServingMemory | None:
    """Returns one replica's memory plan, or None when the weights cannot be sized (inputs recorded missing).

    The plan may lack the KV cache (``kv`` / ``concurrency`` None) when the architecture or the context
    is missing: those inputs are then recorded as missing too.
    """
    return ctx.memo("inference.memory", _serving_memory)


def _serving_memory(ctx: Context) -> ServingMemory | None:
    node_group = hardware(ctx)
    parameters = ctx.need(f"{M}/parameters")
    weight_precision = ctx.get(f"{I}/weight_precision")
    if weight_precision is None:
        ctx.reader.missing.append(f"{I}/weight_precision")
    if node_group is None or parameters is None or weight_precision is None:
        return None
    tensor_parallel = int(ctx.num(f"{I}/tensor_parallel", 1))
    utilization = ctx.num(f"{I}/gpu_memory_utilization", ctx.setting("inference.default_gpu_memory_utilization"))
    kv_precision, kv_note = _kv_precision(ctx, weight_precision)
    attention = _attention(ctx)
    context_tokens = _context_tokens(ctx)
    block_size = int(ctx.setting("inference.kv_block_tokens"))
    reserve = ctx.setting("inference.activation_reserve_gib") * GIB
    problem = ""
    kv = concurrency = None
    try:
        weights = inference.weight_bytes(
            parameters, weight_precision, group_size=int(ctx.setting("inference.int4_group_size")),
            int8_channel_size=attention.hidden if attention and attention.hidden else 4096)
        if attention is not None and context_tokens is not None:
            kv = inference.kv_cache_bytes_per_token(attention.layers, attention.kv_heads, attention.head_dim,
                                                    kv_precision, tensor_parallel)
            concurrency = inference.max_concurrent_sequences(
                node_group.capacity_bytes, utilization, weights / tensor_parallel, reserve, kv.per_gpu_bytes,
                context_tokens, block_size_tokens=block_size)
    except InconsistentInput as error:  # out-of-range inputs the schema cannot rule out (e.g. overflowing sizes)
        weights, problem = 0.0, str(error)
        kv = concurrency = None
    return ServingMemory(
        hardware=node_group, parameters=parameters, weight_precision=weight_precision, weight_bytes=weights,
        tensor_parallel=tensor_parallel, gpu_memory_utilization=utilization,
        usable_bytes=node_group.capacity_bytes * utilization, reserve_bytes=reserve, kv_precision=kv_precision,
        kv_precision_note=kv_note, attention=attention, context_tokens=context_tokens, kv=kv,
        concurrency=concurrency, block_size_tokens=block_size, problem=problem)


def _kv_precision(ctx: Context, weight_precision: str) -> tuple[str, str]:
    """Returns the KV-cache precision and a note saying where it came from."""
    submitted = ctx.get(f"{I}/kv_cache_precision")
    if submitted is not None:
        return submitted, "as submitted"
    if weight_precision in SIXTEEN_BIT:
        return weight_precision, f"not given: the {weight_precision} weight precision"
    return DEFAULT_KV_PRECISION, (f"not given: {DEFAULT_KV_PRECISION} by default, since {weight_precision} "
                                  f"weights are not 16-bit")


def _attention(ctx: Context) -> Attention | None:
    layers, heads = ctx.need(f"{A}/layers"), ctx.need(f"{A}/heads")
    hidden = ctx.num(f"{A}/hidden")
    head_dim = ctx.num(f"{A}/head_dim")
    if head_dim is None:
        if hidden is None:
            ctx.need(f"{A}/hidden")  # head_dim defaults to hidden / heads
        elif heads is not None and hidden // heads >= 1:
            head_dim = hidden // heads
        else:  # fewer hidden units than heads: no whole head dimension, so it must be given
            ctx.need(f"{A}/head_dim")
    if layers is None or heads is None or head_dim is None:
        return None
    kv_heads = ctx.num(f"{A}/kv_heads")
    return Attention(layers=int(layers), heads=int(heads), kv_heads=int(kv_heads or heads), head_dim=int(head_dim),
                     hidden=int(hidden) if hidden else None, kv_heads_given=kv_heads is not None,
                     head_dim_given=ctx.num(f"{A}/head_dim") is not None)


def _context_tokens(ctx: Context) -> int | None:
    """Returns the context each sequence reserves: context_tokens, else prompt + output tokens."""
    context = ctx.num(f"{I}/context_tokens")
    if context is None:
        prompt, output = ctx.num(f"{I}/prompt_tokens"), ctx.num(f"{I}/output_tokens")
        if prompt is None or output is None:
            ctx.need(f"{I}/context_tokens")
            return None
        return int(prompt) + int(output)
    return int(context)

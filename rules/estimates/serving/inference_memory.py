"""Serving memory: weight and KV-cache bytes, and how many full-context sequences one GPU of a replica holds.

Pure arithmetic: no I/O, no configuration. Decimal units (GB = 10^9 bytes), as on datasheets; ``_bytes``
bytes throughout.

Sources:
- vLLM ``vllm/worker/cache_engine.py`` ``CacheEngine.get_cache_block_size`` (KV bytes per token) and
  ``ModelConfig.get_num_kv_heads`` (``max(1, total_num_kv_heads // tensor_parallel_size)``);
  ``vllm/worker/worker.py`` ``Worker.determine_num_available_blocks`` (KV budget =
  total memory × ``gpu_memory_utilization`` − peak non-KV memory).
- AutoGPTQ ``nn_modules/qlinear``: ``scales`` fp16 and ``qzeros`` packed at ``bits`` per value, one row
  per ``group_size`` input features (``BaseQuantizeConfig(bits=4, group_size=128)`` in its README);
  AutoAWQ README ``quant_config = {"zero_point": True, "q_group_size": 128, "w_bit": 4}``.
- The capacity-planning guide, "GPU Capacity Planning for AI Training & Serving", step 4.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.estimates._args import (
    require_choice,
    require_fraction,
    require_non_negative,
    require_positive,
    require_positive_int,
)
from rules.estimates.model.hardware import NodeSpec

# Bytes per weight before any quantisation metadata.
_WEIGHT_ELEMENT_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}
WEIGHT_PRECISIONS: tuple[str, ...] = tuple(_WEIGHT_ELEMENT_BYTES)

# Bytes per KV-cache element (vLLM ``kv_cache_dtype``: auto = model dtype, or fp8).
KV_PRECISION_BYTES: dict[str, int] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
}

_FP16_SCALE_BYTES = 2.0  # GPTQ/AWQ store group scales as fp16
_FP32_SCALE_BYTES = 4.0  # per-channel int8 scales (SmoothQuant / vLLM W8A8) are fp32


def weight_bytes(
    parameters: float,
    precision: str,
    group_size: int = 128,
    *,
    zero_point: bool = True,
    int8_channel_size: int = 4096,
) -> float:
    """Return the bytes that ``parameters`` weights occupy at ``precision``, quantisation metadata included.

    Per weight: fp32 4 B, bf16/fp16 2 B, fp8 1 B (one per-tensor scale per matrix: negligible, not
    counted), int8 1 B, int4 0.5 B.

    int4 (GPTQ/AWQ convention, AutoGPTQ ``qlinear`` buffers and AutoAWQ ``quant_config``): each group
    of ``group_size`` weights along the input dimension stores one fp16 scale (2 B) and, when
    ``zero_point`` (asymmetric; AWQ's default, and GPTQ checkpoints always store ``qzeros``), one
    zero point packed at 4 bits (0.5 B). Group size 128 with zero points: 0.5 + 2.5/128 ≈ 0.5195 B.

    int8 (per-channel, SmoothQuant / vLLM W8A8): one fp32 scale per output channel, i.e. per
    ``int8_channel_size`` weights (the layer's input features). The default 4096 is the hidden size of
    a 7B model, so for larger models this over-counts slightly (≤ 0.1 %).
    """
    require_positive("parameters", parameters)
    require_positive_int("group_size", group_size)
    require_positive_int("int8_channel_size", int8_channel_size)
    key = require_choice("weight precision", precision, _WEIGHT_ELEMENT_BYTES, ignore_case=True)
    per_weight = _WEIGHT_ELEMENT_BYTES[key]
    if key == "int4":
        group_metadata = _FP16_SCALE_BYTES + (0.5 if zero_point else 0.0)
        per_weight += group_metadata / group_size
    elif key == "int8":
        per_weight += _FP32_SCALE_BYTES / int8_channel_size
    return parameters * per_weight


@dataclass(frozen=True)
class KvCacheBytesPerToken:
    """KV-cache bytes one token occupies, for the whole model and on each tensor-parallel GPU."""

    whole_model_bytes: int  # 2 × layers × kv_heads × head_dim × bytes
    per_gpu_bytes: int  # same with the KV heads one GPU holds
    kv_heads_per_gpu: int  # max(1, kv_heads // tp): replicated once tp exceeds kv_heads
    tensor_parallel: int


def kv_cache_bytes_per_token(
    layers: int,
    kv_heads: int,
    head_dim: int,
    kv_precision: str,
    tensor_parallel: int = 1,
) -> KvCacheBytesPerToken:
    """Return KV-cache bytes per token, whole model and per GPU (vLLM ``CacheEngine.get_cache_block_size``).

    2 (K and V) × layers × kv_heads × head_dim × bytes per element, as vLLM sizes a cache block
    (divided by its block size). Under tensor parallelism each GPU holds
    ``max(1, kv_heads // tp)`` heads (vLLM ``ModelConfig.get_num_kv_heads``): once tp exceeds the KV
    heads they are replicated, so the per-GPU figure stops shrinking. vLLM itself refuses a tp that
    neither divides nor is a multiple of the KV heads; this function does not check that.
    """
    require_positive_int("layers", layers)
    require_positive_int("kv_heads", kv_heads)
    require_positive_int("head_dim", head_dim)
    require_positive_int("tensor_parallel", tensor_parallel)
    key = require_choice("KV-cache precision", kv_precision, KV_PRECISION_BYTES, ignore_case=True)
    element_bytes = KV_PRECISION_BYTES[key]
    heads_per_gpu = max(1, kv_heads // tensor_parallel)
    return KvCacheBytesPerToken(
        whole_model_bytes=2 * layers * kv_heads * head_dim * element_bytes,
        per_gpu_bytes=2 * layers * heads_per_gpu * head_dim * element_bytes,
        kv_heads_per_gpu=heads_per_gpu,
        tensor_parallel=tensor_parallel,
    )


@dataclass(frozen=True)
class ConcurrencyBudget:
    """How many full-context sequences one GPU's KV cache holds, and the memory split behind it."""

    usable_bytes: float  # capacity × gpu_memory_utilization
    kv_budget_bytes: float  # usable − weights − reserve, floored at 0
    shortfall_bytes: float  # how far weights + reserve exceed usable memory; 0 when they fit
    kv_bytes_per_sequence: float  # per GPU, context rounded up to whole blocks
    kv_blocks: int  # whole KV blocks the budget holds
    max_sequences: int  # floor, >= 0


def max_concurrent_sequences(
    capacity_bytes: float,
    gpu_memory_utilization: float,
    weight_bytes_per_gpu: float,
    reserve_bytes: float,
    kv_bytes_per_token_per_gpu: float,
    context_tokens: int,
    *,
    block_size_tokens: int = 16,
) -> ConcurrencyBudget:
    """Return the KV budget and the number of ``context_tokens``-long sequences it holds (vLLM semantics).

    vLLM ``Worker.determine_num_available_blocks``: usable = capacity × ``gpu_memory_utilization``;
    KV budget = usable − weights − activation/workspace reserve (vLLM measures the latter with a
    profiling forward pass; here it is the caller's ``reserve_bytes``). The budget is cut into blocks of
    ``block_size_tokens`` tokens (vLLM default 16) and each sequence takes ceil(context / block) blocks,
    as vLLM's "maximum concurrency" report does. ``block_size_tokens=1`` gives the plain
    floor(budget / (bytes per token × context)).
    """
    require_positive("capacity_bytes", capacity_bytes)
    require_fraction("gpu_memory_utilization", gpu_memory_utilization)
    require_non_negative("weight_bytes_per_gpu", weight_bytes_per_gpu)
    require_non_negative("reserve_bytes", reserve_bytes)
    require_positive("kv_bytes_per_token_per_gpu", kv_bytes_per_token_per_gpu)
    require_positive_int("context_tokens", context_tokens)
    require_positive_int("block_size_tokens", block_size_tokens)

    usable = capacity_bytes * gpu_memory_utilization
    remaining = usable - weight_bytes_per_gpu - reserve_bytes
    kv_budget = max(0.0, remaining)
    block_bytes = kv_bytes_per_token_per_gpu * block_size_tokens
    blocks = int(kv_budget // block_bytes)
    blocks_per_sequence = -(-context_tokens // block_size_tokens)
    return ConcurrencyBudget(
        usable_bytes=usable,
        kv_budget_bytes=kv_budget,
        shortfall_bytes=max(0.0, -remaining),
        kv_bytes_per_sequence=blocks_per_sequence * block_bytes,
        kv_blocks=blocks,
        max_sequences=blocks // blocks_per_sequence,
    )


# --------------------------------------------------------------------------------------------------
# One replica's memory plan
# --------------------------------------------------------------------------------------------------
# Per-channel int8 scales are counted per this many weights when the model's hidden size is not known:
# the hidden size of a 7B model (see weight_bytes).
DEFAULT_INT8_CHANNEL_SIZE = 4096


@dataclass(frozen=True)
class AttentionShape:
    """The attention shape that sizes the KV cache (Hugging Face config.json names)."""

    layers: int  # num_hidden_layers
    heads: int  # num_attention_heads
    kv_heads: int  # num_key_value_heads
    head_dim: int
    hidden: int | None  # hidden_size, when known (the int8 scales are counted per hidden-size channel)


@dataclass(frozen=True)
class ServingEngine:
    """The serving engine's memory and batching settings (vLLM engine arguments of the same names)."""

    gpu_memory_utilization: float  # share of each GPU's memory the engine may use
    reserve_bytes: float  # activation and workspace memory per GPU outside weights and KV cache
    block_size_tokens: int = 16  # KV-cache block size
    max_num_seqs: int = 256  # sequences the scheduler runs at once at most


@dataclass(frozen=True)
class ReplicaMemory:
    """One replica's memory plan: weights, reserve and the KV cache each GPU of it holds."""

    parameters: float
    weight_bytes: float  # whole model, quantisation metadata included
    tensor_parallel: int
    usable_bytes: float  # capacity × gpu_memory_utilization, per GPU
    reserve_bytes: float  # activation and workspace reserve per GPU
    kv: KvCacheBytesPerToken | None  # None: the attention shape or the context is not known
    concurrency: ConcurrencyBudget | None

    @property
    def weight_bytes_per_gpu(self) -> float:
        return self.weight_bytes / self.tensor_parallel

    @property
    def weight_bytes_per_param(self) -> float:
        return self.weight_bytes / self.parameters

    @property
    def weights_and_reserve_bytes(self) -> float:
        """Returns what one GPU of the replica holds besides its KV cache: its weight shard and the reserve."""
        return self.weight_bytes_per_gpu + self.reserve_bytes


def default_head_dim(hidden: int, heads: int) -> int | None:
    """Returns hidden // heads, the head dimension configs leave out; None when there are more heads than units.

    Hugging Face ``modeling_llama.py`` (LlamaAttention): ``head_dim = config.hidden_size //
    config.num_attention_heads`` unless the config states ``head_dim``.
    """
    require_positive_int("heads", heads)
    head_dim = hidden // heads
    return head_dim if head_dim >= 1 else None


def context_tokens(prompt_tokens: int, output_tokens: int) -> int:
    """Returns the context a sequence reserves in the KV cache: prompt + output tokens.

    A sequence's KV cache grows with every token it holds, prompt and generated alike (vLLM allocates
    blocks for both, up to ``max_model_len``), so a request that ends with ``output_tokens`` after a
    ``prompt_tokens`` prompt holds their sum at its end.
    """
    return prompt_tokens + output_tokens


@dataclass(frozen=True)
class Deployment:
    """How a model is deployed on one replica: its size, the precisions of weights and KV cache, tensor parallelism."""

    parameters: float
    weight_precision: str  # one of WEIGHT_PRECISIONS
    kv_precision: str  # one of KV_PRECISION_BYTES
    tensor_parallel: int
    int4_group_size: int = 128  # weights per fp16 scale of an int4 (GPTQ/AWQ) checkpoint


def replica_memory(deployment: Deployment, group: NodeSpec, engine: ServingEngine, attention: AttentionShape | None,
                   context: int | None) -> ReplicaMemory:
    """Returns one replica's weights, KV bytes per token and the full-context sequences one of its GPUs holds.

    Weights: :func:`weight_bytes` (int4 groups of ``int4_group_size``, int8 scales per hidden-size channel),
    split over the deployment's ``tensor_parallel`` GPUs; KV cache: :func:`kv_cache_bytes_per_token` and
    :func:`max_concurrent_sequences` (vLLM), both only when the attention shape and the context are known.
    """
    parameters, tensor_parallel = deployment.parameters, deployment.tensor_parallel
    channel = attention.hidden if attention and attention.hidden else DEFAULT_INT8_CHANNEL_SIZE
    weights = weight_bytes(parameters, deployment.weight_precision, group_size=deployment.int4_group_size,
                           int8_channel_size=channel)
    kv = concurrency = None
    if attention is not None and context is not None:
        kv = kv_cache_bytes_per_token(attention.layers, attention.kv_heads, attention.head_dim,
                                      deployment.kv_precision, tensor_parallel)
        concurrency = max_concurrent_sequences(
            group.gpu.capacity_bytes, engine.gpu_memory_utilization, weights / tensor_parallel, engine.reserve_bytes,
            kv.per_gpu_bytes, context, block_size_tokens=engine.block_size_tokens)
    return ReplicaMemory(parameters=parameters, weight_bytes=weights, tensor_parallel=tensor_parallel,
                         usable_bytes=group.gpu.capacity_bytes * engine.gpu_memory_utilization,
                         reserve_bytes=engine.reserve_bytes, kv=kv, concurrency=concurrency)

"""Training-memory estimators: model state, activations, logits, gathered parameters, parameter counts.

Pure functions only: no I/O, no policy or configuration reading. Every convention that published sources
disagree on (gradient width, master weights, dropout, logits precision, prefetch depth) is a parameter or
a named, cited entry in ``BYTE_CONVENTIONS``. Results are bytes (int or float), never GiB; callers convert.

Sources (cited again where used):
- ZeRO: Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models",
  SC'20, arXiv 1910.02054, §3.1 and Figure 1.
- Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", 2022,
  arXiv 2205.05198, §4 and Table 2.
- Megatron-LM ``megatron/training/theoretical_memory_usage.py`` (compute_weight_and_optimizer_memory,
  compute_activation_memory).
- DeepSpeed ``deepspeed/runtime/zero/stage3.py`` (estimate_zero3_model_states_mem_needs).
- Hugging Face Transformers guide "Model training anatomy" (bytes per parameter per optimizer).
"""

import math
from dataclasses import dataclass
from typing import Final

from rules.errors import InconsistentInput
from rules.estimates._args import (
    require_at_most,
    require_bool,
    require_choice,
    require_non_negative,
    require_non_negative_int,
    require_positive,
    require_positive_int,
    require_positive_ints,
)

# --------------------------------------------------------------------------------------------------
# Allowed values of the string enums (ValueError messages list them).
# --------------------------------------------------------------------------------------------------
PRECISIONS: Final = ("bf16-mixed", "fp16-mixed", "fp32", "bf16-pure")
OPTIMIZERS: Final = ("adamw", "adam", "adamw-8bit", "sgd-momentum", "sgd", "adafactor")
SHARDINGS: Final = ("ddp", "zero1", "zero2", "zero3", "fsdp-full", "fsdp-hybrid")
RECOMPUTE_MODES: Final = ("none", "selective", "full")
MLP_KINDS: Final = ("gelu", "swiglu")
NORM_KINDS: Final = ("rmsnorm", "layernorm")
LAYER_UNITS: Final = ("module", "block")
MEGATRON_NORMALIZATIONS: Final = ("LayerNorm", "RMSNorm")

DEFAULT_CONVENTION: Final = "zero-paper"

# Shardings whose parameters (weights) are partitioned over the shard group.
_PARAMETER_SHARDED: Final = ("zero3", "fsdp-full", "fsdp-hybrid")


@dataclass(frozen=True)
class StateBytesPerParam:
    """Bytes of model state per parameter, split the way ZeRO partitions them.

    ``optimizer_bytes_per_param`` includes the fp32 master weights (ZeRO's K = 4 + 4 + 4 for mixed
    precision Adam); ``master_weights_bytes_per_param`` says how much of it they are.
    ``optimizer_sharded_over_data_parallel`` marks conventions that already assume the optimizer state is
    split over data-parallel ranks (Megatron's distributed optimizer: 6 + 12/DP).
    """

    weights_bytes_per_param: float
    gradients_bytes_per_param: float
    optimizer_bytes_per_param: float
    master_weights_bytes_per_param: float
    optimizer_sharded_over_data_parallel: bool
    citation: str

    @property
    def total_bytes_per_param(self) -> float:
        """Return weights + gradients + optimizer bytes per parameter, unsharded (ZeRO's 2 + 2 + K)."""
        return self.weights_bytes_per_param + self.gradients_bytes_per_param + self.optimizer_bytes_per_param


# Mixed-precision (bf16/fp16) AdamW bookkeeping as each source counts it.
BYTE_CONVENTIONS: Final[dict[str, StateBytesPerParam]] = {
    "zero-paper": StateBytesPerParam(
        weights_bytes_per_param=2,
        gradients_bytes_per_param=2,
        optimizer_bytes_per_param=12,
        master_weights_bytes_per_param=4,
        optimizer_sharded_over_data_parallel=False,
        citation="Rajbhandari et al. SC'20 (arXiv 1910.02054) §3.1: (2 + 2 + K)Ψ, K = 12 -> 16 B/param",
    ),
    "megatron": StateBytesPerParam(
        weights_bytes_per_param=2,
        gradients_bytes_per_param=4,
        optimizer_bytes_per_param=12,
        master_weights_bytes_per_param=4,
        optimizer_sharded_over_data_parallel=False,
        citation=(
            "Megatron-LM megatron/training/theoretical_memory_usage.py (18 B/param, fp32 grads); "
            "HF 'Model training anatomy'; llm-analysis"
        ),
    ),
    "megatron-distributed-optimizer": StateBytesPerParam(
        weights_bytes_per_param=2,
        gradients_bytes_per_param=4,
        optimizer_bytes_per_param=12,
        master_weights_bytes_per_param=4,
        optimizer_sharded_over_data_parallel=True,
        citation=(
            "Megatron-LM megatron/training/theoretical_memory_usage.py, use_distributed_optimizer: 6 + 12/DP B/param"
        ),
    ),
    "seed-rough": StateBytesPerParam(
        weights_bytes_per_param=2,
        gradients_bytes_per_param=2,
        optimizer_bytes_per_param=8,
        master_weights_bytes_per_param=0,
        optimizer_sharded_over_data_parallel=False,
        citation=(
            "capacity-planning guide \"GPU Capacity Planning for AI Training & Serving\": 2 + 2 + 8 = 12 B/param, "
            "omits fp32 master "
            "weights (kept only to explain differences)"
        ),
    ),
}

# Optimizer moment bytes per parameter when the moments are kept in fp32 (mixed precision and fp32).
# HF "Model training anatomy": AdamW 8, 8-bit AdamW 2, SGD with momentum 4; EleutherAI "Transformer Math
# 101" agrees. Adafactor (Shazeer & Stern 2018, arXiv 1804.04235 §3-4) factors the second moment into
# row and column statistics (O(n + m) per n x m matrix, neglected here); 4 B/param assumes the optional
# first moment (beta1) is kept in fp32, an approximation that is conservative when beta1 is off.
_MOMENT_BYTES_FP32: Final[dict[str, float]] = {
    "adamw": 8,
    "adam": 8,
    "adamw-8bit": 2,
    "sgd-momentum": 4,
    "sgd": 0,
    "adafactor": 4,
}
# Pure bf16 training: torch.optim allocates moments like the parameter (bf16); bitsandbytes 8-bit moments
# stay 1 byte each whatever the parameter dtype.
_MOMENT_BYTES_BF16: Final[dict[str, float]] = {
    "adamw": 4,
    "adam": 4,
    "adamw-8bit": 2,
    "sgd-momentum": 2,
    "sgd": 0,
    "adafactor": 2,
}
_OPTIMIZER_CITATIONS: Final[dict[str, str]] = {
    "adamw": "AdamW m and v (HF 'Model training anatomy')",
    "adam": "Adam m and v (HF 'Model training anatomy')",
    "adamw-8bit": "8-bit AdamW moments, 2 B/param (HF 'Model training anatomy', bitsandbytes)",
    "sgd-momentum": "SGD momentum buffer (HF 'Model training anatomy')",
    "sgd": "plain SGD keeps no optimizer state",
    "adafactor": "Adafactor approximate, first moment only (Shazeer & Stern 2018, arXiv 1804.04235)",
}


@dataclass(frozen=True)
class ModelStatePerGpu:
    """Model-state bytes one GPU holds, and the host bytes its rank holds for offloaded state."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    host_offload_bytes: float

    @property
    def gpu_total_bytes(self) -> float:
        """Return weights + gradients + optimizer bytes resident on the GPU (host offload excluded)."""
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes


# --------------------------------------------------------------------------------------------------
# Validation helpers (the generic ones are in rules.estimates._args)
# --------------------------------------------------------------------------------------------------
def _kv_heads(kv_heads: int | None, heads: int) -> int:
    """Return ``kv_heads`` (``heads`` when None); raise InconsistentInput unless it is an integer in [1, heads]."""
    groups = heads if kv_heads is None else kv_heads
    require_positive_int("kv_heads", groups)
    require_at_most("kv_heads", groups, "heads", heads)
    return groups


# --------------------------------------------------------------------------------------------------
# 1. Bytes per parameter
# --------------------------------------------------------------------------------------------------
def model_state_bytes_per_param(
    precision: str, optimizer: str, convention: str = DEFAULT_CONVENTION
) -> StateBytesPerParam:
    """Return weights/gradients/optimizer bytes per parameter (ZeRO arXiv 1910.02054 §3.1; HF training anatomy).

    Mixed precision (``bf16-mixed``, ``fp16-mixed``): 16-bit weights (2), gradients as the convention
    counts them (2 in the ZeRO paper, 4 in Megatron-LM/HF), fp32 master weights (4, omitted by
    ``seed-rough``) plus fp32 moments (AdamW 8, 8-bit AdamW 2, SGD momentum 4, SGD 0, Adafactor ~4).
    ``fp32``: 4 + 4 + moments, no master copy (pure fp32 AdamW = 4 + 4 + 8). ``bf16-pure``: 2 + 2 and
    moments in bf16 (torch.optim allocates them like the parameter; 8-bit moments stay 2), no master copy.
    The convention only changes the mixed-precision layout, and carries Megatron's distributed-optimizer
    flag (optimizer state split over DP) whatever the precision.

    Raises ValueError naming the unknown precision, optimizer or convention and the allowed values.
    """
    require_choice("precision", precision, PRECISIONS)
    require_choice("optimizer", optimizer, OPTIMIZERS)
    require_choice("convention", convention, tuple(BYTE_CONVENTIONS))
    conv = BYTE_CONVENTIONS[convention]
    if precision in ("bf16-mixed", "fp16-mixed"):
        weights, gradients, master = 2.0, conv.gradients_bytes_per_param, conv.master_weights_bytes_per_param
        moments = _MOMENT_BYTES_FP32[optimizer]
    elif precision == "fp32":
        weights, gradients, master = 4.0, 4.0, 0.0
        moments = _MOMENT_BYTES_FP32[optimizer]
    else:  # bf16-pure
        weights, gradients, master = 2.0, 2.0, 0.0
        moments = _MOMENT_BYTES_BF16[optimizer]
    return StateBytesPerParam(
        weights_bytes_per_param=weights,
        gradients_bytes_per_param=gradients,
        optimizer_bytes_per_param=master + moments,
        master_weights_bytes_per_param=master,
        optimizer_sharded_over_data_parallel=conv.optimizer_sharded_over_data_parallel,
        citation=f"{precision}, {_OPTIMIZER_CITATIONS[optimizer]}; convention {convention}: {conv.citation}",
    )


# --------------------------------------------------------------------------------------------------
# 2. Model state per GPU under DDP / ZeRO / FSDP
# --------------------------------------------------------------------------------------------------
def model_state_per_gpu_bytes(
    parameters: float,
    trainable_parameters: float,
    bytes_per_param: StateBytesPerParam,
    sharding: str,
    data_parallel: int,
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
    shard_group: int | None = None,
    offload_optimizer: bool = False,
    offload_parameters: bool = False,
) -> ModelStatePerGpu:
    """Return per-GPU weights/gradients/optimizer bytes and offloaded host bytes (ZeRO arXiv 1910.02054 §5, Fig. 1).

    Ψ = parameters / (tensor_parallel × pipeline_parallel) per model-parallel rank (an even split; see
    ``megatron_weight_and_optimizer_bytes`` for Megatron's most-loaded stage), N = shard group size:
    - ddp: (w + g + k)Ψ, nothing sharded;
    - zero1: (w + g)Ψ + kΨ/N            (ZeRO-1 = (2 + 2)Ψ + KΨ/Nd);
    - zero2: wΨ + (g + k)Ψ/N            (ZeRO-2 = 2Ψ + (2 + K)Ψ/Nd);
    - zero3, fsdp-full: (w + g + k)Ψ/N  (ZeRO-3 = (2 + 2 + K)Ψ/Nd; PyTorch FSDP FULL_SHARD);
    - fsdp-hybrid: as ZeRO-3 within ``shard_group`` ranks (typically the GPUs of one node), replicated
      across the data_parallel / shard_group groups (PyTorch FSDP HYBRID_SHARD).
    N = data_parallel unless ``shard_group`` is given (required for fsdp-hybrid; for zero1-3/fsdp-full it
    models sub-group sharding such as DeepSpeed MiCS). Frozen parameters (parameters −
    trainable_parameters, e.g. a base model under LoRA adapters) hold weights only, sharded like the
    weights. ``offload_optimizer`` (DeepSpeed ZeRO-Offload, stages 1-3) moves this rank's optimizer state,
    fp32 master weights included, to host memory; ``offload_parameters`` (DeepSpeed offload_param /
    FSDP CPUOffload, parameter-sharded modes only) also moves this rank's weight shard. Moved bytes are
    reported in ``host_offload_bytes``; gathered-layer buffers and pinned staging buffers are not counted
    here (see ``gathered_parameters_bytes``).

    Raises ValueError for unknown sharding, inconsistent sizes, a ``megatron-distributed-optimizer``
    layout with ddp, offload_optimizer with ddp, or offload_parameters without parameter sharding.
    """
    require_positive("parameters", parameters)
    require_non_negative("trainable_parameters", trainable_parameters)
    require_at_most("trainable_parameters", trainable_parameters, "parameters", parameters)
    if not isinstance(bytes_per_param, StateBytesPerParam):
        raise ValueError("bytes_per_param must be a StateBytesPerParam (see model_state_bytes_per_param)")
    require_choice("sharding", sharding, SHARDINGS)
    require_positive_int("data_parallel", data_parallel)
    require_positive_int("tensor_parallel", tensor_parallel)
    require_positive_int("pipeline_parallel", pipeline_parallel)
    require_bool("offload_optimizer", offload_optimizer)
    require_bool("offload_parameters", offload_parameters)

    if shard_group is not None:
        require_positive_int("shard_group", shard_group)
        require_at_most("shard_group", shard_group, "data_parallel", data_parallel)
    if sharding == "ddp":
        if shard_group not in (None, 1):
            raise InconsistentInput("sharding 'ddp' shards nothing; shard_group must be None or 1")
        if bytes_per_param.optimizer_sharded_over_data_parallel:
            raise InconsistentInput(
                "bytes_per_param assumes the optimizer is split over data-parallel ranks "
                "(megatron-distributed-optimizer); use sharding 'zero1' (6 + 12/DP) instead of 'ddp'"
            )
        if offload_optimizer:
            raise InconsistentInput("offload_optimizer needs ZeRO stage 1-3 or FSDP; sharding 'ddp' has none")
        group = 1
    elif sharding == "fsdp-hybrid":
        if shard_group is None:
            raise InconsistentInput("sharding 'fsdp-hybrid' needs shard_group (ranks per shard, e.g. GPUs per node)")
        if data_parallel % shard_group:
            raise InconsistentInput(
                f"fsdp-hybrid needs data_parallel ({data_parallel}) divisible by shard_group ({shard_group})"
            )
        group = shard_group
    else:
        group = data_parallel if shard_group is None else shard_group
    if offload_parameters and sharding not in _PARAMETER_SHARDED:
        raise InconsistentInput(
            f"offload_parameters needs parameter sharding ({', '.join(_PARAMETER_SHARDED)}); got {sharding!r}"
        )

    model_parallel = tensor_parallel * pipeline_parallel
    local_all = parameters / model_parallel
    local_trainable = trainable_parameters / model_parallel

    weights_div = group if sharding in _PARAMETER_SHARDED else 1
    gradients_div = group if sharding in ("zero2", *_PARAMETER_SHARDED) else 1
    optimizer_div = 1 if sharding == "ddp" else group

    weights = bytes_per_param.weights_bytes_per_param * local_all / weights_div
    gradients = bytes_per_param.gradients_bytes_per_param * local_trainable / gradients_div
    optimizer = bytes_per_param.optimizer_bytes_per_param * local_trainable / optimizer_div

    host = 0.0
    if offload_optimizer:
        host += optimizer
        optimizer = 0.0
    if offload_parameters:
        host += weights
        weights = 0.0
    return ModelStatePerGpu(
        weights_bytes=weights, gradients_bytes=gradients, optimizer_bytes=optimizer, host_offload_bytes=host
    )


# --------------------------------------------------------------------------------------------------
# 3. Activations
# --------------------------------------------------------------------------------------------------
def activation_bytes_per_layer(
    sequence_length: int,
    micro_batch: int,
    hidden: int,
    heads: int,
    tensor_parallel: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    flash_attention: bool = False,
    ffn_hidden: int | None = None,
    kv_heads: int | None = None,
    mlp: str = "gelu",
    dropout: bool = True,
) -> float:
    """Return activation bytes one GPU stores for one transformer layer (Korthikanti arXiv 2205.05198 Table 2).

    16-bit activations, 1-byte dropout masks. With ffn_hidden = 4h, kv_heads = heads, gelu and dropout
    this equals Table 2 exactly (s sequence, b micro-batch, h hidden, a heads, t tensor parallel):
    none sbh(34 + 5as/h); TP sbh(10 + 24/t + 5as/(ht)); TP+SP sbh(34/t + 5as/(ht));
    TP + selective sbh(10 + 24/t); TP+SP+selective sbh·34/t; full recompute 2sbh (÷t with SP).
    Generalised term by term (see the comments): GQA scales the stored K and V by kv_heads/heads
    (a rank holds at least one KV head once t exceeds kv_heads); SwiGLU stores gate, up and their
    activated product (3 × 2sbf instead of GeLU's input and output 2 × 2sbf); ``dropout=False`` (e.g.
    Llama pre-training) drops the masks; flash attention (Dao et al. 2022) drops the 5as²b terms and
    keeps only the fp32 softmax log-sum-exp, 4·a·s·b/t bytes. Selective recompute drops the whole
    core-attention term (s² terms or log-sum-exp). head_dim is taken as hidden/heads.
    """
    require_positive_ints(
        sequence_length=sequence_length,
        micro_batch=micro_batch,
        hidden=hidden,
        heads=heads,
        tensor_parallel=tensor_parallel,
    )
    require_bool("sequence_parallel", sequence_parallel)
    require_bool("flash_attention", flash_attention)
    require_bool("dropout", dropout)
    require_choice("recompute", recompute, RECOMPUTE_MODES)
    require_choice("mlp", mlp, MLP_KINDS)
    if ffn_hidden is not None:
        require_positive_int("ffn_hidden", ffn_hidden)
    g = _kv_heads(kv_heads, heads)

    s, b, h, a, t = sequence_length, micro_batch, hidden, heads, tensor_parallel
    f = 4 * h if ffn_hidden is None else ffn_hidden
    sbh = s * b * h
    # Sequence parallelism splits the otherwise replicated (non-tensor-parallel) region along the sequence.
    outside_divisor = t if sequence_parallel else 1

    if recompute == "full":
        # Korthikanti §5 / Table 2: only the layer input (2sbh) is kept; the rest is recomputed.
        return 2 * sbh / outside_divisor

    # Terms outside the tensor-parallel region: replicated on every TP rank unless sequence parallel.
    outside = 0.0
    # Terms inside the tensor-parallel region: split over t (heads or ffn columns per rank).
    inside = 0.0

    # --- Attention block: 11sbh + 5as²b in the paper (§4.1) ---------------------------------------
    outside += 2 * sbh  # shared input of the Q, K, V projections (layernorm output), 2sbh
    inside += 2 * sbh / t  # Q for QKᵀ, 2sbh
    kv_bytes_per_rank = 2 * s * b * (h / a) * max(g / t, 1)  # one of K or V, 2sbh·(kv_heads/heads)
    inside += kv_bytes_per_rank  # K for QKᵀ
    inside += kv_bytes_per_rank  # V for the attention-over-values matmul
    inside += 2 * sbh / t  # input of the output projection, 2sbh
    if dropout:
        outside += sbh  # dropout mask after the output projection, sbh (1 byte)

    # Core attention, the 5as²b of the paper: softmax output 2as²b, its dropout mask as²b, the dropout
    # output 2as²b. Without dropout the softmax output feeds the values matmul directly: 2as²b.
    if recompute == "selective":
        core = 0.0  # Korthikanti §4.2.2: QKᵀ, softmax, dropout and attention over V are recomputed
    elif flash_attention:
        core = 4 * a * s * b / t  # FlashAttention keeps only fp32 log-sum-exp per head and position
    else:
        core = (5 if dropout else 2) * a * s * s * b / t

    # --- MLP block: 19sbh in the paper (§4.1) -----------------------------------------------------
    outside += 2 * sbh  # input of the first linear layer, 2sbh
    if mlp == "gelu":
        inside += 2 * 2 * s * b * f / t  # GeLU input and GeLU output (second linear input): 8sbh at 4h
    else:
        inside += 3 * 2 * s * b * f / t  # SwiGLU: gate, up, and activated product (down-proj input)
    if dropout:
        outside += sbh  # dropout mask after the second linear layer, sbh

    # --- Layer norms: 4sbh (two norms, each stores its 2sbh input) ---------------------------------
    outside += 2 * 2 * sbh

    return outside / outside_divisor + inside + core


def activation_bytes_per_gpu(
    layers: int,
    sequence_length: int,
    micro_batch: int,
    hidden: int,
    heads: int,
    tensor_parallel: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    flash_attention: bool = False,
    ffn_hidden: int | None = None,
    kv_heads: int | None = None,
    mlp: str = "gelu",
    dropout: bool = True,
    pipeline_parallel: int = 1,
    virtual_stages: int = 1,
    micro_batches: int | None = None,
    include_embedding: bool = True,
    vocab: int | None = None,
    logits_bytes_per_element: float = 4,
) -> float:
    """Return activation bytes on the first pipeline stage's GPU (Korthikanti arXiv 2205.05198 §4.2.3, §4.3).

    1F1B: the first stage holds p in-flight micro-batches of ceil(L/p) layers, i.e. L layers' worth when
    p divides L. Interleaving with v > 1 virtual stages multiplies that by 1 + (p − 1)/(p·v) (§4.2.3).
    If ``micro_batches`` (per step) is below p without interleaving, only that many are in flight
    (Megatron-LM theoretical_memory_usage.py discounts by min(1, m/p)). ``include_embedding`` adds, per
    in-flight micro-batch, the input token ids 8sb and the embedding dropout mask sbh (§4.3 and Megatron
    compute_activation_memory), ÷t with sequence parallelism. With p = 1 and ``vocab`` given the first
    stage is also the last and the output layer's buffers (``logits_bytes``) are added; for p > 1 the
    last stage's logits are the caller's to evaluate with ``logits_bytes``.
    """
    require_positive_int("layers", layers)
    require_positive_int("pipeline_parallel", pipeline_parallel)
    require_positive_int("virtual_stages", virtual_stages)
    require_bool("include_embedding", include_embedding)
    if micro_batches is not None:
        require_positive_int("micro_batches", micro_batches)
    per_layer = activation_bytes_per_layer(
        sequence_length,
        micro_batch,
        hidden,
        heads,
        tensor_parallel=tensor_parallel,
        sequence_parallel=sequence_parallel,
        recompute=recompute,
        flash_attention=flash_attention,
        ffn_hidden=ffn_hidden,
        kv_heads=kv_heads,
        mlp=mlp,
        dropout=dropout,
    )
    p, v = pipeline_parallel, virtual_stages
    layers_on_stage = math.ceil(layers / p)
    in_flight: float = p if micro_batches is None else min(p, micro_batches)
    if v > 1:
        in_flight = p * (1 + (p - 1) / (p * v))  # interleaved schedule memory penalty, §4.2.3

    total = per_layer * layers_on_stage * in_flight
    if include_embedding:
        s, b = sequence_length, micro_batch
        divisor = tensor_parallel if sequence_parallel else 1
        embedding = 8 * s * b  # input token ids (int64), Megatron compute_activation_memory
        if dropout:
            embedding += s * b * hidden  # embedding dropout mask, §4.3
        total += embedding / divisor * in_flight
    if p == 1 and vocab is not None:
        total += logits_bytes(
            sequence_length,
            micro_batch,
            vocab,
            hidden,
            tensor_parallel=tensor_parallel,
            sequence_parallel=sequence_parallel,
            logits_bytes_per_element=logits_bytes_per_element,
        )
    return total


# --------------------------------------------------------------------------------------------------
# 4. Output layer
# --------------------------------------------------------------------------------------------------
def logits_bytes(
    sequence_length: int,
    micro_batch: int,
    vocab: int,
    hidden: int,
    tensor_parallel: int = 1,
    sequence_parallel: bool = False,
    logits_bytes_per_element: float = 4,
) -> float:
    """Return output-layer activation bytes per GPU: 4sbh + 4sbV (Korthikanti arXiv 2205.05198 §4.3).

    We use the paper's (and Megatron-LM compute_activation_memory's) 4·s·b·h·(1 + V/h): the final
    layernorm input 2sbh, the output projection input 2sbh, and the logits kept in fp32 for the
    cross-entropy loss, 4sbV. The fp32 logits dominate at large vocabularies (V = 128k is ~31 × h for
    h = 4096), which is why the paper's form is kept rather than the smaller "input 2sbh" reading.
    The logits are split over TP ranks (vocab-parallel cross entropy); the 4sbh hidden-state terms are
    split only with sequence parallelism. ``logits_bytes_per_element`` is 4 (fp32) by default;
    Megatron's compute_activation_memory_without_sp counts 2-byte logits and a single 2sbh input.
    """
    require_positive_ints(
        sequence_length=sequence_length,
        micro_batch=micro_batch,
        vocab=vocab,
        hidden=hidden,
        tensor_parallel=tensor_parallel,
    )
    require_bool("sequence_parallel", sequence_parallel)
    require_positive("logits_bytes_per_element", logits_bytes_per_element)
    s, b, t = sequence_length, micro_batch, tensor_parallel
    hidden_state_bytes = 2 * 2 * s * b * hidden  # final-norm input + output-projection input
    fp32_logits = logits_bytes_per_element * s * b * vocab / t
    return hidden_state_bytes / (t if sequence_parallel else 1) + fp32_logits


# --------------------------------------------------------------------------------------------------
# 5. ZeRO-3 / FSDP gathered parameters
# --------------------------------------------------------------------------------------------------
def gathered_parameters_bytes(
    largest_layer_parameters: float, bytes_per_param: float = 2, prefetch_layers: int = 1
) -> float:
    """Return bytes of unsharded layer buffers under ZeRO-3/FSDP (DeepSpeed stage3.py; PyTorch FSDP prefetch).

    ``largest_layer_parameters × bytes_per_param × (1 + prefetch_layers)``: the layer being computed plus
    the ones gathered ahead. Defaults (2 bytes, 1 prefetched) give 4 × largest-layer parameters, which is
    both DeepSpeed's ``largest_layer_memory = 4 * largest_layer_params`` in
    ``deepspeed/runtime/zero/stage3.py`` (estimate_zero3_model_states_mem_needs) and PyTorch FSDP with
    forward/backward prefetch holding the current and the next unit unsharded (torch.distributed.fsdp,
    ``forward_prefetch`` / ``BackwardPrefetch.BACKWARD_PRE``). Set ``prefetch_layers=0`` for no prefetch.
    """
    require_non_negative("largest_layer_parameters", largest_layer_parameters)
    require_positive("bytes_per_param", bytes_per_param)
    require_non_negative_int("prefetch_layers", prefetch_layers)
    return largest_layer_parameters * bytes_per_param * (1 + prefetch_layers)


# --------------------------------------------------------------------------------------------------
# 6. Parameter counts from the architecture
# --------------------------------------------------------------------------------------------------
def _check_architecture(
    hidden: int,
    heads: int,
    kv_heads: int,
    ffn_hidden: int,
    vocab: int,
    mlp: str,
    norm: str,
    head_dim: int | None,
) -> int:
    require_positive_ints(hidden=hidden, heads=heads, kv_heads=kv_heads, ffn_hidden=ffn_hidden, vocab=vocab)
    require_at_most("kv_heads", kv_heads, "heads", heads)
    require_choice("mlp", mlp, MLP_KINDS)
    require_choice("norm", norm, NORM_KINDS)
    if head_dim is None:
        return hidden // heads
    require_positive_int("head_dim", head_dim)
    return head_dim


def _layer_parts(
    hidden: int,
    heads: int,
    kv_heads: int,
    ffn_hidden: int,
    mlp: str,
    norm: str,
    linear_biases: bool,
    head_dim: int,
) -> tuple[dict[str, int], int]:
    """Return the per-module parameter counts of one transformer layer and one norm's count."""
    h, q_width, kv_width = hidden, heads * head_dim, kv_heads * head_dim
    bias = 1 if linear_biases else 0
    norm_params = h if norm == "rmsnorm" else 2 * h  # LayerNorm has weight and bias
    modules = {
        "q": h * q_width + bias * q_width,
        "k": h * kv_width + bias * kv_width,
        "v": h * kv_width + bias * kv_width,
        "o": q_width * h + bias * h,
        "down": ffn_hidden * h + bias * h,
        "up": h * ffn_hidden + bias * ffn_hidden,
    }
    if mlp == "swiglu":
        modules["gate"] = h * ffn_hidden + bias * ffn_hidden
    return modules, norm_params


def transformer_parameters(
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    ffn_hidden: int,
    vocab: int,
    tied_embeddings: bool,
    mlp: str = "swiglu",
    norm: str = "rmsnorm",
    linear_biases: bool = False,
    head_dim: int | None = None,
) -> int:
    """Return the parameter count of a decoder-only transformer (HF Llama modeling_llama.py layout).

    Per layer: q and o projections h × (heads·head_dim), k and v h × (kv_heads·head_dim); MLP with 2
    (gelu: up, down) or 3 (swiglu: gate, up, down) h × ffn matrices; two norms (RMSNorm h, LayerNorm 2h);
    optional linear biases. Plus a final norm and the embedding, counted once if tied to the output
    layer and twice if untied. Learned position embeddings are not counted (rotary models have none).
    head_dim defaults to hidden // heads. Reproduces the HF model cards' configs: Llama-2-7B
    6,738,415,616 and Meta-Llama-3-8B 8,030,261,248.
    """
    require_positive_int("layers", layers)
    require_bool("tied_embeddings", tied_embeddings)
    require_bool("linear_biases", linear_biases)
    d = _check_architecture(hidden, heads, kv_heads, ffn_hidden, vocab, mlp, norm, head_dim)
    modules, norm_params = _layer_parts(hidden, heads, kv_heads, ffn_hidden, mlp, norm, linear_biases, d)
    per_layer = sum(modules.values()) + 2 * norm_params
    embeddings = vocab * hidden * (1 if tied_embeddings else 2)
    return layers * per_layer + norm_params + embeddings


def largest_layer_parameters(
    hidden: int,
    heads: int,
    kv_heads: int,
    ffn_hidden: int,
    vocab: int,
    tied_embeddings: bool,
    mlp: str = "swiglu",
    norm: str = "rmsnorm",
    linear_biases: bool = False,
    head_dim: int | None = None,
    unit: str = "module",
) -> int:
    """Return the parameters of the largest unit gathered at once (DeepSpeed stage3.py; PyTorch FSDP wrap).

    ``unit="module"``: the largest single module's own parameters, as DeepSpeed's
    estimate_zero3_model_states_mem_needs_all_live counts them (``m.parameters(recurse=False)``):
    usually the embedding or output matrix V × h, else the largest MLP or attention matrix.
    ``unit="block"``: PyTorch FSDP with ``transformer_auto_wrap_policy``, one decoder layer per unit;
    the root unit holds what is not wrapped (embedding, output layer if untied, final norm), so the
    result is the larger of one layer and that root.
    """
    require_bool("tied_embeddings", tied_embeddings)
    require_bool("linear_biases", linear_biases)
    require_choice("unit", unit, LAYER_UNITS)
    d = _check_architecture(hidden, heads, kv_heads, ffn_hidden, vocab, mlp, norm, head_dim)
    modules, norm_params = _layer_parts(hidden, heads, kv_heads, ffn_hidden, mlp, norm, linear_biases, d)
    embedding = vocab * hidden
    if unit == "module":
        return max(embedding, *modules.values())
    layer = sum(modules.values()) + 2 * norm_params
    root = embedding * (1 if tied_embeddings else 2) + norm_params
    return max(layer, root)


# --------------------------------------------------------------------------------------------------
# 7. Megatron-LM theoretical memory (weights + optimizer)
# --------------------------------------------------------------------------------------------------
def megatron_most_loaded_shard_parameters(
    layers: int,
    hidden: int,
    heads: int,
    ffn_hidden: int,
    padded_vocab: int,
    kv_heads: int | None = None,
    swiglu: bool = False,
    normalization: str = "LayerNorm",
    untie_embeddings_and_output_weights: bool = False,
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
) -> float:
    """Return parameters on Megatron's most loaded model shard (megatron/training/theoretical_memory_usage.py).

    As compute_weight_and_optimizer_memory counts them (dense models, kv_channels = hidden/heads):
    per layer 2h(ffn·(3/2 if swiglu) + norm) + 2h²(1 + kv_heads/heads), norm = 2 for LayerNorm and 1
    for RMSNorm, no linear biases; the block adds a final norm; the embedding is h × padded_vocab. The
    first stage holds (block/p + embedding)/t; with untied embeddings and p = 1 the output layer adds
    another embedding/t.
    """
    require_positive_ints(
        layers=layers,
        hidden=hidden,
        heads=heads,
        ffn_hidden=ffn_hidden,
        padded_vocab=padded_vocab,
        tensor_parallel=tensor_parallel,
        pipeline_parallel=pipeline_parallel,
    )
    require_bool("swiglu", swiglu)
    require_bool("untie_embeddings_and_output_weights", untie_embeddings_and_output_weights)
    require_choice("normalization", normalization, MEGATRON_NORMALIZATIONS)
    groups = _kv_heads(kv_heads, heads)
    h = hidden
    norm_size = 1 if normalization == "RMSNorm" else 2
    gated = 3 / 2 if swiglu else 1
    per_layer = 2 * h * (ffn_hidden * gated + norm_size) + 2 * h * h * (1 + groups / heads)
    block = per_layer * layers + norm_size * h
    embedding = h * padded_vocab
    shard = (block / pipeline_parallel + embedding) / tensor_parallel
    if untie_embeddings_and_output_weights and pipeline_parallel == 1:
        shard += embedding / tensor_parallel
    return shard


def megatron_weight_and_optimizer_bytes(
    layers: int,
    hidden: int,
    heads: int,
    ffn_hidden: int,
    padded_vocab: int,
    kv_heads: int | None = None,
    swiglu: bool = False,
    normalization: str = "LayerNorm",
    untie_embeddings_and_output_weights: bool = False,
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
    data_parallel: int = 1,
    distributed_optimizer: bool = False,
) -> float:
    """Return Megatron's weight + optimizer bytes on the most loaded GPU (theoretical_memory_usage.py).

    compute_weight_and_optimizer_memory: most-loaded-shard parameters × 18 B/param, or × (6 + 12/DP)
    with the distributed optimizer; both taken from ``BYTE_CONVENTIONS`` ("megatron",
    "megatron-distributed-optimizer") so the convention table and this figure cannot drift apart.
    """
    require_positive_int("data_parallel", data_parallel)
    require_bool("distributed_optimizer", distributed_optimizer)
    shard = megatron_most_loaded_shard_parameters(
        layers,
        hidden,
        heads,
        ffn_hidden,
        padded_vocab,
        kv_heads=kv_heads,
        swiglu=swiglu,
        normalization=normalization,
        untie_embeddings_and_output_weights=untie_embeddings_and_output_weights,
        tensor_parallel=tensor_parallel,
        pipeline_parallel=pipeline_parallel,
    )
    conv = BYTE_CONVENTIONS["megatron-distributed-optimizer" if distributed_optimizer else "megatron"]
    optimizer_div = data_parallel if conv.optimizer_sharded_over_data_parallel else 1
    per_param = (
        conv.weights_bytes_per_param + conv.gradients_bytes_per_param + conv.optimizer_bytes_per_param / optimizer_div
    )
    return shard * per_param

"""Model-state estimators: bytes per parameter, their share per GPU under DDP / ZeRO / FSDP, gathered layers.

Pure functions only: no I/O, no policy or configuration reading. Every convention that published sources
disagree on (gradient width, master weights, prefetch depth) is a parameter or a named, cited entry in
``BYTE_CONVENTIONS``. Results are bytes (int or float), never GiB; callers convert.

Sources (cited again where used):
- ZeRO: Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models",
  SC'20, arXiv 1910.02054, §3.1, §5 and Figure 1.
- Megatron-LM ``megatron/training/theoretical_memory_usage.py`` (compute_weight_and_optimizer_memory).
- DeepSpeed ``deepspeed/runtime/zero/stage_1_and_2.py`` and ``stage3.py`` (estimate_zero2/3_model_states_mem_needs;
  reproduced in rules/estimates/memory/deepspeed_estimators.py).
- ZeRO-Offload and ZeRO-Infinity for what leaves the GPU (rules/estimates/memory/offload.py).
- Hugging Face Transformers guide "Model training anatomy" (bytes per parameter per optimizer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rules.errors import InconsistentInput
from rules.estimates._args import (
    require_at_most,
    require_bool,
    require_choice,
    require_non_negative,
    require_positive,
    require_positive_int,
)
from rules.estimates.memory.offload import OFFLOADS, RankState, offload_rank_state
from rules.estimates.memory.offload import gathered_parameters_bytes as gathered_parameters_bytes  # its former home
from rules.estimates.model.layout import Layout

# --------------------------------------------------------------------------------------------------
# Allowed values of the string enums (InconsistentInput messages list them).
# --------------------------------------------------------------------------------------------------
PRECISIONS: Final = ("bf16-mixed", "fp16-mixed", "fp8-mixed", "fp32", "bf16-pure")
OPTIMIZERS: Final = ("adamw", "adam", "adamw-8bit", "sgd-momentum", "sgd", "adafactor")
SHARDINGS: Final = ("ddp", "zero1", "zero2", "zero3", "fsdp-full", "fsdp-hybrid")

DEFAULT_CONVENTION: Final = "zero-paper"

# Shardings whose parameters (weights) are partitioned over the shard group.
PARAMETER_SHARDED: Final = ("zero3", "fsdp-full", "fsdp-hybrid")


@dataclass(frozen=True)
class StateBytesPerParam:
    """Bytes of model state per parameter, split the way ZeRO partitions them.

    ``optimizer_bytes_per_param`` includes the fp32 master weights (ZeRO's K = 4 + 4 + 4 for mixed
    precision Adam); ``master_weights_bytes_per_param`` says how much of it they are.
    ``optimizer_sharded_over_data_parallel`` marks conventions that already assume the optimizer state is
    split over data-parallel ranks (Megatron's distributed optimizer: 6 + 12/DP).
    ``fp32_gradient_bytes_per_param`` is an fp32 copy of the gradients that the optimizer steps on, kept
    beside the 16-bit gradients and partitioned like the optimizer state (DeepSpeed ZeRO-1/2:
    ``single_partition_of_fp32_groups[i].grad`` in stage_1_and_2.py); 0 where the optimizer reads the
    gradients themselves.
    """

    weights_bytes_per_param: float
    gradients_bytes_per_param: float
    optimizer_bytes_per_param: float
    master_weights_bytes_per_param: float
    optimizer_sharded_over_data_parallel: bool
    citation: str
    fp32_gradient_bytes_per_param: float = 0.0

    @property
    def total_bytes_per_param(self) -> float:
        """Return weights + gradients (and their fp32 copy) + optimizer bytes per parameter, unsharded (2 + 2 + K)."""
        return (self.weights_bytes_per_param + self.gradients_bytes_per_param + self.fp32_gradient_bytes_per_param
                + self.optimizer_bytes_per_param)


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
    "deepspeed": StateBytesPerParam(
        weights_bytes_per_param=2,
        gradients_bytes_per_param=2,
        optimizer_bytes_per_param=12,
        master_weights_bytes_per_param=4,
        optimizer_sharded_over_data_parallel=False,
        citation=(
            "DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs: "
            "2 + 18/N (16-bit and fp32 gradients, fp32 master, m, v) -> 20 B/param; ZeRO-3: stage3.py 18 B/param"
        ),
        fp32_gradient_bytes_per_param=4,
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

# DeepSpeed ZeRO-3 counts 18 B/param, all of it partitioned (stage3.py, estimate_zero3_model_states_mem_needs:
# ``18 * total_params / total_gpus``; memory.rst: 2 for the 16-bit parameters + 16 for fp32 parameters, gradients,
# momentum and variance): the gradient partition is counted at fp32 width and there is no separate fp32 copy.
DEEPSPEED_STAGE3: Final = StateBytesPerParam(
    weights_bytes_per_param=2,
    gradients_bytes_per_param=4,
    optimizer_bytes_per_param=12,
    master_weights_bytes_per_param=4,
    optimizer_sharded_over_data_parallel=False,
    citation="DeepSpeed deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs: 18/N -> 18 B/param",
)

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
    host_gradients_bytes: float = 0.0  # the part of host_offload_bytes that is gradients (ZeRO-Offload)

    @property
    def gpu_total_bytes(self) -> float:
        """Return weights + gradients + optimizer bytes resident on the GPU (host offload excluded)."""
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes


# --------------------------------------------------------------------------------------------------
# 1. Bytes per parameter
# --------------------------------------------------------------------------------------------------
def model_state_bytes_per_param(
    precision: str, optimizer: str, convention: str = DEFAULT_CONVENTION, sharding: str | None = None
) -> StateBytesPerParam:
    """Return weights/gradients/optimizer bytes per parameter (ZeRO arXiv 1910.02054 §3.1; HF training anatomy).

    Mixed precision (``bf16-mixed``, ``fp16-mixed``, and ``fp8-mixed``, whose FP8 GEMMs cast 16-bit weights
    and activations per layer and keep the same state: NVIDIA Transformer Engine, "Using FP8 with Transformer
    Engine", FP8 recipes keep higher-precision weights and fp32 master state): 16-bit weights (2), gradients
    as the convention counts them (2 in the ZeRO paper, 4 in Megatron-LM/HF), fp32 master weights (4, omitted by
    ``seed-rough``) plus fp32 moments (AdamW 8, 8-bit AdamW 2, SGD momentum 4, SGD 0, Adafactor ~4).
    ``fp32``: 4 + 4 + moments, no master copy (pure fp32 AdamW = 4 + 4 + 8). ``bf16-pure``: 2 + 2 and
    moments in bf16 (torch.optim allocates them like the parameter; 8-bit moments stay 2), no master copy.
    The convention only changes the mixed-precision layout, and carries Megatron's distributed-optimizer
    flag (optimizer state split over DP) whatever the precision. ``deepspeed`` counts as DeepSpeed's
    estimators do, which depends on the stage: under ZeRO-1/2 (and DDP) 2 + 2 + 4 (an fp32 gradient copy) + 12,
    under a parameter-sharded ``sharding`` (ZeRO-3, FSDP) 2 + 4 + 12 (:data:`DEEPSPEED_STAGE3`).

    Raises ValueError naming the unknown precision, optimizer or convention and the allowed values.
    """
    require_choice("precision", precision, PRECISIONS)
    require_choice("optimizer", optimizer, OPTIMIZERS)
    require_choice("convention", convention, tuple(BYTE_CONVENTIONS))
    conv = BYTE_CONVENTIONS[convention]
    if convention == "deepspeed" and sharding in PARAMETER_SHARDED:
        conv = DEEPSPEED_STAGE3
    fp32_gradients = 0.0
    if precision in ("bf16-mixed", "fp16-mixed", "fp8-mixed"):
        weights, gradients, master = 2.0, conv.gradients_bytes_per_param, conv.master_weights_bytes_per_param
        moments, fp32_gradients = _MOMENT_BYTES_FP32[optimizer], conv.fp32_gradient_bytes_per_param
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
        fp32_gradient_bytes_per_param=fp32_gradients,
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
    An fp32 gradient copy (``fp32_gradient_bytes_per_param``, DeepSpeed ZeRO-1/2) is partitioned like the
    optimizer state and reported with the gradients. N = data_parallel unless ``shard_group`` is given
    (required for fsdp-hybrid; for zero1-3/fsdp-full it models sub-group sharding such as DeepSpeed MiCS).
    Frozen parameters (parameters − trainable_parameters, e.g. a base model under LoRA adapters) hold weights
    only, sharded like the weights. ``offload_optimizer`` (ZeRO-Offload, stages 1-3) moves this rank's
    optimizer state and gradient partition to host memory, ``offload_parameters`` (ZeRO-Infinity
    offload_param, FSDP CPUOffload; parameter-sharded modes only) its weight shard too
    (:func:`rules.estimates.memory.offload.offload_rank_state`). Moved bytes are reported in ``host_offload_bytes``;
    gathered layers and pinned buffers are not counted here (rules/estimates/memory/offload.py).

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
    if offload_parameters and sharding not in PARAMETER_SHARDED:
        raise InconsistentInput(
            f"offload_parameters needs parameter sharding ({', '.join(PARAMETER_SHARDED)}); got {sharding!r}"
        )

    model_parallel = tensor_parallel * pipeline_parallel
    local_all = parameters / model_parallel
    local_trainable = trainable_parameters / model_parallel

    weights_div = group if sharding in PARAMETER_SHARDED else 1
    gradients_div = group if sharding in ("zero2", *PARAMETER_SHARDED) else 1
    optimizer_div = 1 if sharding == "ddp" else group

    trainable_share = local_trainable / optimizer_div  # the parameters this rank's optimizer updates
    rank = RankState(
        weights_bytes=bytes_per_param.weights_bytes_per_param * local_all / weights_div,
        gradients_bytes=bytes_per_param.gradients_bytes_per_param * local_trainable / gradients_div,
        gradient_partition_bytes=bytes_per_param.gradients_bytes_per_param * trainable_share,
        fp32_gradient_bytes=bytes_per_param.fp32_gradient_bytes_per_param * trainable_share,
        optimizer_bytes=bytes_per_param.optimizer_bytes_per_param * trainable_share,
        gradients_partitioned=sharding in ("zero2", *PARAMETER_SHARDED))
    held = offload_rank_state(rank, offload_optimizer, offload_parameters)
    return ModelStatePerGpu(
        weights_bytes=held.gpu_weights_bytes, gradients_bytes=held.gpu_gradients_bytes,
        optimizer_bytes=held.gpu_optimizer_bytes, host_offload_bytes=held.host_bytes,
        host_gradients_bytes=held.host_gradients_bytes)


# --------------------------------------------------------------------------------------------------
# The state of one training job's model on its most loaded GPU
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainedModel:
    """The model a training job updates: how many parameters, how many of them train, and in what formats."""

    parameters: float
    trainable_parameters: float  # all of them unless adapters train a subset (LoRA)
    precision: str  # one of PRECISIONS
    optimizer: str  # one of OPTIMIZERS


def effective_sharding(sharding: str, convention: str) -> str:
    """Returns the sharding the model state is sized under: ddp becomes zero1 under Megatron's distributed optimizer.

    Megatron-LM's distributed optimizer (``--use-distributed-optimizer``) splits the optimizer state over the
    data-parallel ranks, which is ZeRO stage 1 by construction (theoretical_memory_usage.py: 6 + 12/DP B/param).
    """
    if convention == "megatron-distributed-optimizer" and sharding == "ddp":
        return "zero1"
    return sharding


def model_state_on_gpu(model: TrainedModel, layout: Layout, bytes_per_param: StateBytesPerParam, offload: str,
                       stage_factor: float = 1.0) -> ModelStatePerGpu:
    """Returns the model state on one GPU of ``layout`` (:func:`model_state_per_gpu_bytes`, ZeRO §5).

    State is sharded over the layout's data × context ranks (``Layout.shard_ranks``): context-parallel ranks
    hold the same parameters, and Megatron-LM's distributed optimizer shards over the data-parallel group
    with context parallelism (``megatron/core/optimizer/__init__.py``, ``get_megatron_optimizer``:
    ``get_data_parallel_group(with_context_parallel=True)``), as ZeRO and FSDP do over their process group.
    The layout's shard group counts only under fsdp-hybrid. ``offload`` (one of OFFLOADS) moves the optimizer
    state and the gradient partition to host memory under ZeRO stages 1-3 and FSDP (ZeRO-Offload), and with
    ``optimizer+parameters`` the weight shard too where parameters are sharded (DeepSpeed offload_param,
    FSDP CPUOffload). ``stage_factor`` scales the parameters to the most loaded pipeline stage
    (:func:`rules.estimates.model.parameters.first_stage_parameter_factor`).
    """
    require_choice("offload", offload, OFFLOADS)
    sharding = layout.sharding
    return model_state_per_gpu_bytes(
        parameters=model.parameters * stage_factor,
        trainable_parameters=model.trainable_parameters * stage_factor,
        bytes_per_param=bytes_per_param, sharding=sharding, data_parallel=layout.shard_ranks,
        tensor_parallel=layout.tensor, pipeline_parallel=layout.pipeline,
        shard_group=layout.shard_group if sharding == "fsdp-hybrid" else None,
        offload_optimizer=offload in ("optimizer", "optimizer+parameters") and sharding != "ddp",
        offload_parameters=offload == "optimizer+parameters" and sharding in PARAMETER_SHARDED)

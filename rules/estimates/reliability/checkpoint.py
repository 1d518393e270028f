"""Checkpoint size, save time and the Young/Daly checkpoint interval."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rules.errors import InconsistentInput
from rules.estimates._args import (
    is_number,
    require_choice,
    require_fraction,
    require_positive,
    require_positive_int,
)
from rules.estimates.memory.model_state import model_state_bytes_per_param

# Bytes per parameter of the model weights as trained.
WEIGHT_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4}
# Bytes per parameter of optimizer state (EleutherAI cookbook / Hugging Face "model training anatomy"):
# Adam/AdamW keep fp32 m and v (8); 8-bit Adam keeps them in 1 byte each (2); SGD with momentum one fp32
# buffer (4); plain SGD none.
OPTIMIZER_STATE_BYTES: dict[str, int] = {"adamw": 8, "adam": 8, "adam-8bit": 2, "sgd-momentum": 4, "sgd": 0}
MASTER_WEIGHT_BYTES = 4  # fp32 master copy kept by mixed-precision training
YOUNG_DALY_ORDERS: tuple[str, ...] = ("first", "daly")


@dataclass(frozen=True)
class CheckpointSize:
    """A full training checkpoint's size, term by term (bytes; GB = 1e9 bytes)."""

    parameters: float
    weights_bytes: float  # model weights in the training precision
    master_weights_bytes: float  # fp32 master copy (mixed precision only)
    optimizer_bytes: float  # optimizer state (Adam m and v, …)
    gradients_bytes: float  # 0 unless gradients are saved (they usually are not)
    total_bytes: float

    @property
    def bytes_per_parameter(self) -> float:
        """Total bytes per parameter (14 for bf16 + fp32 master + Adam)."""
        return self.total_bytes / self.parameters

    @property
    def total_gb(self) -> float:
        """Total size in GB (1e9 bytes), the unit of the ``checkpoint_gb`` evidence."""
        return self.total_bytes / 1e9


def checkpoint_size(
    parameters: float,
    precision: str = "bf16",
    optimizer: str = "adamw",
    *,
    master_weights: bool | None = None,
    save_gradients: bool = False,
    gradient_bytes_per_parameter: float | None = None,
) -> CheckpointSize:
    """Return the size of a full (resumable) training checkpoint with its breakdown.

    bf16/fp16 mixed precision with Adam: weights 2 + fp32 master 4 + Adam m and v 8 = 14 bytes/param
    (the reference table in ``shared/reference/README.md``; ZeRO, arXiv 1910.02054 §3.1, for the
    states: 2Ψ fp16 weights, 12Ψ fp32 master + momentum + variance). Pure fp32 AdamW: 4 + 8 = 12.
    ``master_weights`` defaults to True for bf16/fp16 and must not be True for fp32 (the weights are
    the master copy). Gradients are not part of a resumable checkpoint unless ``save_gradients``
    (e.g. mid-accumulation saves); their bytes per parameter default to the weight precision (pass 4
    for frameworks that keep fp32 gradients, such as Megatron-LM).
    ``precision``: bf16, fp16, fp32. ``optimizer``: adamw, adam, adam-8bit, sgd-momentum, sgd.
    """
    require_positive("parameters", parameters)
    require_choice("precision", precision, tuple(WEIGHT_BYTES))
    require_choice("optimizer", optimizer, tuple(OPTIMIZER_STATE_BYTES))
    weight_bytes = WEIGHT_BYTES[precision]
    mixed = weight_bytes < MASTER_WEIGHT_BYTES
    if master_weights is None:
        master_weights = mixed
    elif master_weights and not mixed:
        raise InconsistentInput("fp32 training keeps no separate master copy: master_weights must be False or None")
    if gradient_bytes_per_parameter is None:
        gradient_bytes_per_parameter = weight_bytes
    require_positive("gradient_bytes_per_parameter", gradient_bytes_per_parameter)
    weights = parameters * weight_bytes
    master = parameters * MASTER_WEIGHT_BYTES if master_weights else 0.0
    optimizer_bytes = parameters * OPTIMIZER_STATE_BYTES[optimizer]
    gradients = parameters * gradient_bytes_per_parameter if save_gradients else 0.0
    total = weights + master + optimizer_bytes + gradients
    return CheckpointSize(parameters, weights, master, optimizer_bytes, gradients, total)


@dataclass(frozen=True)
class CheckpointSave:
    """How long one checkpoint takes to write, and what bounds it."""

    save_s: float
    write_gbs: float  # effective write bandwidth: min of the two below
    storage_write_gbs: float  # the storage system's sustained write bandwidth (after the write efficiency)
    node_nics_gbs: float  # writing nodes × storage-NIC GB/s per node
    bound_by: str  # "storage" or "node-nics"


def checkpoint_save(
    checkpoint_bytes: float,
    storage_write_gbs: float,
    writing_nodes: int,
    storage_nic_gbs_per_node: float,
    write_efficiency: float = 1.0,
) -> CheckpointSave:
    """Return the checkpoint save time: bytes / min(storage write GB/s × efficiency, nodes × storage-NIC GB/s).

    A sharded checkpoint (PyTorch DCP, Megatron distributed checkpointing) is written by every node
    at once, so the write is bounded by the storage system's aggregate write bandwidth or by the sum of
    the writing nodes' storage-network bandwidth, whichever is lower. ``writing_nodes`` is the nodes
    that write (all nodes for a sharded checkpoint; one for a rank-0 ``torch.save``). ``write_efficiency``
    (0, 1] is the share of a quoted (nameplate) write bandwidth a checkpoint burst sustains; 1 for a measured
    one. Source: the acceptance plan's "Design checkpoint bandwidth" ("calculate checkpoint size and
    frequency, define maximum acceptable save time and test the storage system at that burst rate"); use
    measured write bandwidth (e.g. fio/IOR at the burst size) where available.
    """
    require_positive("checkpoint_bytes", checkpoint_bytes)
    require_fraction("write_efficiency", write_efficiency)
    storage_write_gbs = storage_write_gbs * write_efficiency
    require_positive("storage_write_gbs", storage_write_gbs)
    require_positive_int("writing_nodes", writing_nodes)
    require_positive("storage_nic_gbs_per_node", storage_nic_gbs_per_node)
    nics = writing_nodes * storage_nic_gbs_per_node
    if nics < storage_write_gbs:
        write, bound = nics, "node-nics"
    else:
        write, bound = storage_write_gbs, "storage"
    return CheckpointSave(checkpoint_bytes / (write * 1e9), write, storage_write_gbs, nics, bound)


def young_daly_interval_s(save_s: float, mtbf_s: float, order: str = "first") -> float:
    """Return the checkpoint interval (compute time between checkpoints) that minimises lost time.

    ``order="first"``: τ = √(2·δ·M) (Young 1974, "A first order approximation to the optimum
    checkpoint interval", CACM 17(9); Daly 2006, "A higher order estimate of the optimum checkpoint
    interval for restart dumps", FGCS 22(3), first-order form). ``order="daly"``: Daly 2006's
    higher-order estimate τ = √(2δM)·[1 + ⅓·√(δ/(2M)) + (1/9)·δ/(2M)] − δ for δ < 2M, else τ = M.
    δ = ``save_s`` (time to write one checkpoint), M = ``mtbf_s`` (mean time between failures of the
    whole job, not of one node). Example: δ = 60 s, M = 3 h → τ = √(2·60·10 800) = 1138.4 s ≈ 19 min.
    """
    require_positive("save_s", save_s)
    require_positive("mtbf_s", mtbf_s)
    require_choice("order", order, YOUNG_DALY_ORDERS)
    first = math.sqrt(2.0 * save_s * mtbf_s)
    if order == "first":
        return first
    if save_s >= 2.0 * mtbf_s:
        return mtbf_s
    ratio = save_s / (2.0 * mtbf_s)
    return first * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) - save_s


def training_checkpoint_size(
    parameters: float,
    precision: str,
    optimizer: str,
    *,
    trainable_parameters: float | None = None,
    save_gradients: bool = False,
    save_frozen_weights: bool = True,
    convention: str = "zero-paper",
) -> CheckpointSize:
    """Return the resumable checkpoint size for a submission's precision and optimizer names.

    Takes the submission vocabulary (``bf16-mixed``, ``fp16-mixed``, ``fp32``, ``bf16-pure``; ``adamw``,
    ``adamw-8bit``, ``adafactor``, …) and the per-parameter bytes of
    :func:`rules.estimates.memory.model_state.model_state_bytes_per_param`, so a checkpoint and the GPU memory
    estimate agree on the optimizer state: weights of every saved parameter + the optimizer state of the
    trainable ones (fp32 master copy and moments) + their gradients when ``save_gradients``. For
    bf16-mixed AdamW that is 2 + 4 + 8 = 14 bytes/param (``shared/reference/README.md``; ZeRO,
    arXiv 1910.02054 §3.1), equal to :func:`checkpoint_size`; gradients add 2 (ZeRO paper) or 4
    (Megatron-LM) as ``convention`` counts them. ``save_frozen_weights=False`` leaves the frozen base
    weights out (adapter fine-tuning: PEFT's ``save_pretrained`` writes the adapter only; the base model
    is re-read from its own files on restart).
    """
    require_positive("parameters", parameters)
    trainable = parameters if trainable_parameters is None else trainable_parameters
    if not is_number(trainable) or trainable < 0 or trainable > parameters:
        raise InconsistentInput(f"trainable_parameters must be in [0, parameters], got {trainable_parameters!r}")
    state = model_state_bytes_per_param(precision, optimizer, convention)
    saved_weights = parameters if save_frozen_weights else trainable
    weights = saved_weights * state.weights_bytes_per_param
    master = trainable * state.master_weights_bytes_per_param
    optimizer_bytes = trainable * (state.optimizer_bytes_per_param - state.master_weights_bytes_per_param)
    gradients = trainable * state.gradients_bytes_per_param if save_gradients else 0.0
    total = weights + master + optimizer_bytes + gradients
    if total <= 0:
        raise InconsistentInput("the checkpoint would be empty: nothing trainable and frozen weights not saved")
    return CheckpointSize(parameters, weights, master, optimizer_bytes, gradients, total)


def interval_deviation_ratio(interval_s: float, optimal_s: float) -> float:
    """Return how many times a checkpoint interval is off the optimum, either way: max(τ/τ*, τ*/τ) ≥ 1.

    The first-order lost-time fraction δ/τ + τ/(2M) is symmetric in log τ around τ* = √(2δM) (Young
    1974; Daly 2006, FGCS 22(3)): at τ = r·τ* or τ*/r it is (r + 1/r)/2 times the minimum, so one ratio
    describes checkpointing too often and too rarely alike (r = 2 costs 1.25× the minimum overhead).
    """
    require_positive("interval_s", interval_s)
    require_positive("optimal_s", optimal_s)
    return max(interval_s / optimal_s, optimal_s / interval_s)


def checkpoint_overhead_fraction(interval_s: float, save_s: float, mtbf_s: float) -> float:
    """Return the first-order share of wall time lost to checkpointing and rework: δ/τ + τ/(2M).

    Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9), 1974: saving
    every τ seconds costs δ/τ of the time, and a failure (mean time between failures M) loses on average
    half an interval, τ/(2M). Minimised at τ* = √(2δM) (:func:`young_daly_interval_s`).
    """
    require_positive("interval_s", interval_s)
    require_positive("save_s", save_s)
    require_positive("mtbf_s", mtbf_s)
    return save_s / interval_s + interval_s / (2 * mtbf_s)


@dataclass(frozen=True)
class IntervalReview:
    """A checkpoint interval against the Young/Daly optimum: how far off it is and what that costs."""

    optimum_s: float  # τ* = √(2δM)
    off_ratio: float  # max(τ/τ*, τ*/τ)
    excess_overhead: float  # lost-time share at τ minus that at τ*, ≥ 0


def interval_review(interval_s: float, save_s: float, mtbf_s: float) -> IntervalReview:
    """Returns how a checkpoint interval compares with the Young/Daly optimum for this save time and job MTBF.

    The optimum is :func:`young_daly_interval_s` (Young 1974), the deviation :func:`interval_deviation_ratio`,
    and the excess the first-order overhead δ/τ + τ/(2M) (:func:`checkpoint_overhead_fraction`) at the interval
    less that at the optimum: the share of wall time the chosen interval costs beyond the best one.
    """
    optimum_s = young_daly_interval_s(save_s, mtbf_s)
    return IntervalReview(
        optimum_s=optimum_s,
        off_ratio=interval_deviation_ratio(interval_s, optimum_s),
        excess_overhead=(checkpoint_overhead_fraction(interval_s, save_s, mtbf_s)
                         - checkpoint_overhead_fraction(optimum_s, save_s, mtbf_s)),
    )

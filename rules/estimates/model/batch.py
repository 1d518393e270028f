"""Batch arithmetic: global batch, micro-batch, gradient accumulation and data-parallel size.

The identity every framework enforces: global batch = micro-batch × accumulation steps × data-parallel
size, with a whole number of accumulation steps. DeepSpeed checks ``train_batch_size ==
train_micro_batch_size_per_gpu * gradient_accumulation_steps * world_size`` (``deepspeed/runtime/config.py``,
``_batch_assertion``; world size there is the data-parallel size); Megatron-LM's
``ConstantNumMicroBatchesCalculator`` (``megatron/core/num_microbatches_calculator.py``) asserts that the
global batch is divisible by micro-batch × data-parallel size. Batches count sequences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rules.estimates._args import require_non_negative_int, require_positive_int, require_positive_ints

# valid_micro_batches lists micro-batches up to this many sequences at most: no GPU holds the activations of
# more, and scanning every candidate up to a global batch of 2^53 sequences would never end.
MAX_MICRO_BATCH = 65536


@dataclass(frozen=True)
class BatchSplit:
    """How a global batch splits into micro-batches on the data-parallel ranks."""

    accumulation_steps: float  # global / (micro × data parallel); a whole number when ``whole``
    whole: bool  # True when the global batch is a whole number of micro-batch rounds
    sequences_per_round: int  # micro-batch × data-parallel size: sequences one accumulation step adds
    remainder_sequences: int  # global batch mod sequences per round


def batch_split(global_batch: int, micro_batch: int, data_parallel: int) -> BatchSplit:
    """Return the accumulation steps global / (micro × DP) and whether it is a whole number.

    Source: DeepSpeed ``deepspeed/runtime/config.py`` (``_batch_assertion``: train_batch_size =
    micro_batch_per_gpu × gradient_accumulation_steps × world_size); Megatron-LM
    ``ConstantNumMicroBatchesCalculator`` ("global batch size ... is not divisible by micro batch size ...
    times data parallel size"). Example: 256 sequences, micro-batch 1, 128 ranks → 2 steps.
    """
    require_positive_ints(global_batch=global_batch, micro_batch=micro_batch, data_parallel=data_parallel)
    per_round = micro_batch * data_parallel
    remainder = global_batch % per_round
    return BatchSplit(global_batch / per_round, remainder == 0, per_round, remainder)


def nearest_global_batches(global_batch: int, micro_batch: int, data_parallel: int) -> tuple[int | None, int]:
    """Return the valid global batches just below (None if there is none) and at or above ``global_batch``.

    Valid means a whole number (≥ 1) of micro-batch × data-parallel rounds (see :func:`batch_split`):
    e.g. global 250, micro-batch 2, 16 ranks → (224, 256).
    """
    split = batch_split(global_batch, micro_batch, data_parallel)
    per_round = split.sequences_per_round
    if split.whole:
        return global_batch, global_batch
    below = (global_batch // per_round) * per_round
    return (below or None), below + per_round


def valid_micro_batches(global_batch: int, data_parallel: int, largest: int | None = None) -> list[int]:
    """Return the micro-batches m (ascending, at most ``largest`` and MAX_MICRO_BATCH) for which global / (m × DP)
    is whole.

    Empty when the global batch is not a multiple of the data-parallel size: then no micro-batch works
    and the global batch (or the GPU count) must change. E.g. global 256 on 16 ranks → 1, 2, 4, 8, 16.
    """
    require_positive_int("global_batch", global_batch)
    require_positive_int("data_parallel", data_parallel)
    if largest is not None:
        require_positive_int("largest", largest)
    if global_batch % data_parallel:
        return []
    per_rank = global_batch // data_parallel
    limit = min(per_rank, MAX_MICRO_BATCH) if largest is None else min(per_rank, largest, MAX_MICRO_BATCH)
    return [m for m in range(1, limit + 1) if per_rank % m == 0]


def sequences_per_rank(global_batch: int, data_parallel: int) -> int:
    """Return ⌈global batch / data-parallel size⌉: the most sequences one rank processes per optimizer step.

    A micro-batch above it would need fewer than one accumulation step, so it bounds the micro-batch
    search. Source: the batch identity of DeepSpeed ``_batch_assertion`` with one accumulation step.
    """
    require_positive_int("global_batch", global_batch)
    require_positive_int("data_parallel", data_parallel)
    return -(-global_batch // data_parallel)


def tokens_per_step(global_batch: int, sequence_length: int) -> int:
    """Return the tokens one optimizer step trains on: global batch (sequences) × sequence length.

    Source: the usual definition of batch size in tokens (e.g. Kaplan et al. 2020, arXiv 2001.08361 §2:
    batch size B in tokens; GPT-3, arXiv 2005.14165 Table 2.1 lists batch sizes in tokens).
    """
    require_positive_int("global_batch", global_batch)
    require_positive_int("sequence_length", sequence_length)
    return global_batch * sequence_length


@dataclass(frozen=True)
class Accumulation:
    """How the global batch splits into micro-batches on the data-parallel ranks."""

    global_batch: int
    micro_batch: int
    data_parallel: int
    split: BatchSplit

    @property
    def steps(self) -> int:
        """Micro-batches per optimizer step, rounded up when the split is not whole (a framework refuses it)."""
        return max(1, math.ceil(self.split.accumulation_steps))


def per_rank_global_batch(split: Accumulation, data_parallel: int) -> int:
    """Returns the global batch that keeps each rank's batch of ``split`` on ``data_parallel`` ranks (weak scaling).

    micro-batch × accumulation steps × data_parallel: the batch identity of :func:`batch_split` (DeepSpeed
    ``_batch_assertion``) with the per-rank work held fixed, the fixed per-GPU batch at which
    ``rules.estimates.training_time.scaling.scaling_efficiency`` defines weak-scaling efficiency.
    """
    require_positive_int("data_parallel", data_parallel)
    return split.micro_batch * split.steps * data_parallel


def accumulation(global_batch: int, micro_batch: int, data_parallel: int) -> Accumulation:
    """Returns the split of ``global_batch`` into ``micro_batch``-sized micro-batches on the data-parallel ranks.

    The identity of :func:`batch_split` (DeepSpeed ``_batch_assertion``; Megatron-LM's micro-batch calculator),
    with the accumulation steps a framework would run: the quotient rounded up when it is not whole.
    """
    return Accumulation(global_batch, micro_batch, data_parallel, batch_split(global_batch, micro_batch, data_parallel))


@dataclass(frozen=True)
class MicroBatchOptions:
    """The micro-batches that split a global batch into whole rounds, and the valid global batches near it."""

    valid_micro_batches: list[int]  # ascending; up to the largest fitting one, all of them when none fits
    fitting_micro_batches: list[int]  # those of ``valid_micro_batches`` that fit (none when none fits)
    suggested_micro_batch: int | None  # the largest fitting valid one; None when no valid micro-batch fits
    suggested_accumulation_steps: int | None  # its accumulation steps
    nearest_global_batches: list[int]  # at the submitted micro-batch: the valid ones just below and at or above
    divides_over_ranks: bool  # the global batch is a whole number of sequences per data-parallel rank


def micro_batch_options(split: Accumulation, largest_fitting: int) -> MicroBatchOptions:
    """Returns the valid micro-batches of ``split``'s global batch up to ``largest_fitting``, and the nearest
    valid global batches at its micro-batch.

    Valid means a whole number of accumulation steps (:func:`batch_split`: DeepSpeed ``_batch_assertion``,
    Megatron-LM's micro-batch calculator); :func:`valid_micro_batches` lists them, :func:`nearest_global_batches`
    the global batches around the submitted one. ``largest_fitting`` 0 (not even micro-batch 1 fits) lists every
    valid micro-batch and suggests none. E.g. global 256 on 16 ranks with at most 4 fitting: valid 1, 2, 4,
    suggested 4 with 4 steps.
    """
    require_non_negative_int("largest_fitting", largest_fitting)
    global_batch, data_parallel = split.global_batch, split.data_parallel
    valid = valid_micro_batches(global_batch, data_parallel, largest_fitting or None)
    fitting = valid if largest_fitting else []
    suggested = fitting[-1] if fitting else None
    steps = int(batch_split(global_batch, suggested, data_parallel).accumulation_steps) if suggested else None
    below, above = nearest_global_batches(global_batch, split.micro_batch, data_parallel)
    return MicroBatchOptions(valid, fitting, suggested, steps, sorted({b for b in (below, above) if b}),
                             global_batch % data_parallel == 0)

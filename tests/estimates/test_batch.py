"""Tests for rules.estimates.model.batch: the global = micro × accumulation × data-parallel identity."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.estimates.model.batch import (
    accumulation,
    batch_split,
    micro_batch_options,
    nearest_global_batches,
    per_rank_global_batch,
    sequences_per_rank,
    tokens_per_step,
    valid_micro_batches,
)


def test_deepspeed_batch_identity_256_is_1_x_2_x_128():
    # DeepSpeed runtime/config.py _batch_assertion: train_batch_size = micro_batch_per_gpu ×
    # gradient_accumulation_steps × world_size; e.g. 256 = 1 × 2 × 128.
    split = batch_split(256, 1, 128)
    assert split.whole and split.accumulation_steps == 2 and split.remainder_sequences == 0


def test_megatron_refuses_a_global_batch_not_divisible_by_micro_times_dp():
    # Megatron-LM ConstantNumMicroBatchesCalculator: global 512, micro 2, DP 24 → 512 mod 48 = 32, refused.
    split = batch_split(512, 2, 24)
    assert not split.whole
    assert split.accumulation_steps == pytest.approx(10.6667, abs=1e-4)
    assert split.remainder_sequences == 32
    assert nearest_global_batches(512, 2, 24) == (480, 528)
    assert nearest_global_batches(250, 2, 16) == (224, 256)
    assert nearest_global_batches(20, 2, 16) == (None, 32)
    assert nearest_global_batches(256, 2, 16) == (256, 256)


def test_micro_batch_options_256_on_16_ranks_with_4_fitting():
    # 256 sequences on 16 ranks: 16 per rank, divided by 1, 2, 4, 8, 16; with at most 4 fitting, 1, 2, 4
    # are valid and fit, and micro-batch 4 takes 256 / (4 × 16) = 4 accumulation steps (DeepSpeed
    # _batch_assertion). The submitted micro-batch 2 already splits 256 whole: the nearest valid batch is 256.
    options = micro_batch_options(accumulation(256, 2, 16), largest_fitting=4)

    assert options.valid_micro_batches == options.fitting_micro_batches == [1, 2, 4]
    assert (options.suggested_micro_batch, options.suggested_accumulation_steps) == (4, 4)
    assert options.nearest_global_batches == [256]
    assert options.divides_over_ranks


def test_micro_batch_options_when_nothing_fits_or_nothing_divides():
    # Not even micro-batch 1 fits: every divisor of 16 per rank is listed, none fits, none is suggested.
    none_fit = micro_batch_options(accumulation(256, 2, 16), largest_fitting=0)
    assert none_fit.valid_micro_batches == [1, 2, 4, 8, 16] and none_fit.fitting_micro_batches == []
    assert none_fit.suggested_micro_batch is None and none_fit.suggested_accumulation_steps is None
    # Megatron-LM refuses 512 on 24 ranks at micro-batch 2 (512 mod 48 = 32): 480 and 528 are the nearest
    # valid batches, and 512 / 24 is not whole, so no micro-batch divides it.
    refused = micro_batch_options(accumulation(512, 2, 24), largest_fitting=8)
    assert refused.valid_micro_batches == [] and refused.suggested_micro_batch is None
    assert refused.nearest_global_batches == [480, 528]
    assert not refused.divides_over_ranks


def test_valid_micro_batches_divide_the_per_rank_batch():
    assert valid_micro_batches(256, 16) == [1, 2, 4, 8, 16]
    assert valid_micro_batches(256, 16, largest=5) == [1, 2, 4]
    assert valid_micro_batches(512, 24) == []  # 512 sequences cannot split evenly over 24 ranks


def test_tokens_per_step_is_sequences_times_length():
    # Llama 3 70B fine-tune example: 256 sequences of 8192 tokens = 2,097,152 tokens per step.
    assert tokens_per_step(256, 8192) == 2_097_152
    with pytest.raises(ValueError, match="sequence_length"):
        tokens_per_step(256, 0)


@given(global_batch=st.integers(1, 10_000), micro=st.integers(1, 64), dp=st.integers(1, 1024))
def test_every_valid_micro_batch_gives_a_whole_split(global_batch, micro, dp):
    for m in valid_micro_batches(global_batch, dp, largest=64):
        assert batch_split(global_batch, m, dp).whole
    below, above = nearest_global_batches(global_batch, micro, dp)
    assert batch_split(above, micro, dp).whole and above >= global_batch
    assert below is None or (batch_split(below, micro, dp).whole and below <= global_batch)


def test_sequences_per_rank_rounds_up():
    # 256 sequences over 128 ranks: 2 each; 100 over 24 ranks: at most 5 on a rank.
    assert sequences_per_rank(256, 128) == 2
    assert sequences_per_rank(100, 24) == 5


def test_valid_micro_batches_stop_at_the_scan_limit() -> None:
    # A global batch of 2^52 sequences once made the scan run for ever.
    from rules.estimates.model.batch import MAX_MICRO_BATCH, valid_micro_batches

    found = valid_micro_batches(2**52, 1)

    assert found[-1] <= MAX_MICRO_BATCH and found[:3] == [1, 2, 4]


def test_accumulation_steps_round_up_when_the_split_is_not_whole() -> None:
    # 256 sequences, micro-batch 1, 128 ranks: 2 steps (DeepSpeed _batch_assertion); 250 sequences at
    # micro-batch 2 on 16 ranks is 7.8125 rounds, which a framework would run as 8.
    from rules.estimates.model.batch import accumulation

    assert accumulation(256, 1, 128).steps == 2
    uneven = accumulation(250, 2, 16)
    assert uneven.split.accumulation_steps == 7.8125 and not uneven.split.whole and uneven.steps == 8


def test_the_per_rank_batch_kept_on_another_data_parallel_size():
    # 512 sequences of micro-batch 1 on 32 ranks: 16 per rank; on 16 ranks the same work is 256 sequences.
    assert per_rank_global_batch(accumulation(512, 1, 32), 16) == 256
    # A split that is not whole runs ⌈500 / 48⌉ = 11 steps of micro-batch 2: 2 × 11 × 12 = 264 on 12 ranks.
    assert per_rank_global_batch(accumulation(500, 2, 24), 12) == 264

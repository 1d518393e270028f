"""Tests for rules.estimates.training_time.schedule: time to result and the GPUs a window needs, by hand."""

import math

import pytest

from rules.estimates.model.layout import training_layout
from rules.estimates.training_time.schedule import NEVER_DAYS, RunRate, run_schedule, run_tokens

# 128 nodes × 8 GPUs at TP 8 × PP 4: the job grows in steps of lcm(8, 32) = 32 GPUs.
LAYOUT = training_layout(None, 8, 128, tensor=8, pipeline=4, sharding="zero1")


def test_schedule_by_hand_capacity_planning_guide_step_3():
    # 1.5e12 tokens at 1,000 tokens/s per GPU on 1024 GPUs at 90 % scaling efficiency:
    # 1.5e12 / (1000 × 1024 × 0.9) = 1,627,604.2 s = 18.838 days; at 95 % goodput 19.829 days of 30.
    rate = RunRate(tokens_per_s_per_gpu=1_000.0, scaling_efficiency=0.9, goodput=0.95)

    plan = run_schedule(run_tokens(1.5e12, 1), 30, rate, LAYOUT, memory_min_gpus=64, no_fit_reason=None)

    assert plan.compute_s == pytest.approx(1_627_604.2, abs=0.1)  # compute only: no goodput, no checkpoints
    assert plan.compute_days == pytest.approx(1.5e12 / (1000 * 1024 * 0.9) / 86_400)
    assert plan.days == pytest.approx(plan.compute_days / 0.95)
    assert plan.window_fraction == pytest.approx(plan.days / 30)
    # The window needs ⌈1.5e12 / (30 d × 86,400 × 1000 × 0.9 × 0.95)⌉ = ⌈676.85⌉ = 677 GPUs for throughput,
    # more than the 64 memory needs; in steps of 32 GPUs that is 704, 88 nodes; the quote has 1024/704 of it.
    assert plan.throughput_min_gpus == 677
    assert (plan.gpus_needed, plan.nodes_needed) == (704, 88)
    assert plan.oversize_ratio == pytest.approx(1024 / 704)


def test_a_job_without_goodput_never_finishes_and_needs_no_throughput_count():
    plan = run_schedule(1.5e12, 30, RunRate(1_000.0, 0.9, 0.0), LAYOUT, memory_min_gpus=64, no_fit_reason=None)
    assert plan.days == NEVER_DAYS and plan.throughput_min_gpus is None
    assert plan.gpus_needed == 64  # the memory need alone, in steps of 32


def test_no_count_is_advised_when_none_fits_memory():
    reason = "no GPU count fits memory: under ddp one training step needs 1,100.0 GiB per GPU"
    plan = run_schedule(1.5e12, 30, RunRate(1_000.0, 0.9, 0.95), LAYOUT, memory_min_gpus=None, no_fit_reason=reason)
    assert plan.gpus_needed is None and plan.nodes_needed is None and plan.oversize_ratio is None
    assert plan.gpus_needed_reason == reason


def test_run_tokens_are_dataset_tokens_times_epochs():
    assert run_tokens(6e9, 2.5) == 1.5e10
    with pytest.raises(ValueError, match="epochs"):
        run_tokens(6e9, 0)
    assert math.isfinite(run_tokens(1.5e12, 1))

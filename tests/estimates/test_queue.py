"""Tests for rules.estimates.reliability.queue: the wait in a shared cluster's queue (M/M/1, Kleinrock vol. 1 §3.2)."""

import pytest

from rules.errors import InconsistentInput
from rules.estimates.model.layout import training_layout
from rules.estimates.reliability.queue import (
    MEASURED,
    MM1,
    NOT_SHARED,
    SharedCluster,
    mm1_wait_days,
    queue_wait_days,
    run_window_days,
)
from rules.estimates.training_time.schedule import RunRate, run_schedule


def test_mm1_wait_is_rho_over_one_minus_rho_service_times():
    # ρ = 0.5: one mean service time of wait; ρ = 0.75: three; ρ = 0: none
    assert mm1_wait_days(0.5, 10.0) == pytest.approx(10.0)
    assert mm1_wait_days(0.75, 10.0) == pytest.approx(30.0)
    assert mm1_wait_days(0.0, 10.0) == 0.0
    with pytest.raises(InconsistentInput, match="utilisation"):
        mm1_wait_days(1.0, 10.0)


def test_a_measured_wait_is_taken_as_it_is_and_preferred():
    both = SharedCluster(utilisation=0.9, measured_wait_days=3.0)
    assert both.basis == MEASURED and queue_wait_days(both, 10.0) == 3.0
    assert run_window_days(both, 14.0) == pytest.approx(11.0)
    assert SharedCluster(utilisation=0.5).basis == MM1
    assert SharedCluster().basis == NOT_SHARED and queue_wait_days(SharedCluster(), 10.0) == 0.0
    assert queue_wait_days(None, 10.0) == 0.0 and run_window_days(None, 14.0) == 14.0


def test_mm1_leaves_the_run_window_times_one_minus_rho():
    # wait + run = run / (1 − ρ) ≤ window  ⇔  run ≤ window × (1 − ρ)
    assert run_window_days(SharedCluster(utilisation=0.5), 14.0) == pytest.approx(7.0)


def test_the_schedule_adds_the_wait_and_sizes_the_gpus_for_what_it_leaves():
    # Given 8e10 tokens at 1,000 tokens/s per GPU on 8 GPUs: 1e7 s = 115.74 days of run, no failures
    layout = training_layout(8, 8, 1, 1, 1, "fsdp-full", None, 1)
    rate = RunRate(1_000.0, 1.0, 1.0)
    alone = run_schedule(8e10, 200.0, rate, layout, 8, None)
    shared = run_schedule(8e10, 200.0, rate, layout, 8, None, SharedCluster(utilisation=0.5))

    # Then the shared run waits as long as it runs, and needs the GPUs that run it in 100 days
    assert alone.days == pytest.approx(1e7 / 86_400) and alone.queue_wait_days == 0
    assert shared.run_days == pytest.approx(alone.days)
    assert shared.queue_wait_days == pytest.approx(alone.days)
    assert shared.days == pytest.approx(2 * alone.days)
    assert shared.throughput_min_gpus == 10  # 8 × 115.74 / 100 = 9.26 → 10
    assert alone.throughput_min_gpus == 5


def test_a_wait_that_fills_the_window_leaves_no_throughput_need():
    layout = training_layout(8, 8, 1, 1, 1, "fsdp-full", None, 1)
    plan = run_schedule(8.64e10, 14.0, RunRate(1_000.0, 1.0, 1.0), layout, 8, None,
                        SharedCluster(measured_wait_days=20.0))
    assert plan.run_window_days == pytest.approx(-6.0) and plan.throughput_min_gpus is None

"""Tests for rules.estimates.reliability.failures: each quotes the published figure it reproduces."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.estimates.reliability.checkpoint import young_daly_interval_s
from rules.estimates.reliability.failures import (
    expected_wall_time_s,
    job_goodput,
    job_mtbf_from_interruptions_h,
    job_mtbf_h,
    lost_work_per_failure_s,
    node_mtbf_from_job_h,
)


def test_llama3_419_interruptions_in_54_days_on_2048_nodes():
    # Llama 3 (arXiv 2407.21783) §3.3.4: 419 unexpected interruptions in 54 days on 16,384 H100 GPUs
    # (2048 nodes of 8): a job MTBF of ~3.09 h ("about one every 3 hours") and ~6,300 h per node.
    job = job_mtbf_from_interruptions_h(419, 54 * 24)
    assert job == pytest.approx(3.093, abs=0.001)
    node = node_mtbf_from_job_h(job, 16_384 // 8)
    assert node == pytest.approx(6334.6, abs=0.1)
    assert 6_000 <= node <= 6_500
    # And back: 2048 such nodes give the observed job MTBF.
    assert job_mtbf_h(node, 2048) == pytest.approx(job)


def test_lost_work_per_failure_conventions():
    # Project convention: interval/2 + save + restart; Young's (τ + δ)/2 + R with save_lost_fraction 0.5.
    assert lost_work_per_failure_s(1200.0, 60.0, 600.0) == pytest.approx(600 + 60 + 600)
    assert lost_work_per_failure_s(1200.0, 60.0, 600.0, save_lost_fraction=0.5) == pytest.approx(
        (1200 + 60) / 2 + 600
    )


def test_goodput_at_young_optimum_is_1_minus_sqrt_2delta_over_m_daly_2006():
    # Daly 2006 first-order model: overhead δ/τ + τ/(2M) is minimal at τ = √(2δM), where it is √(2δ/M).
    delta, m = 60.0, 3 * 3600.0
    tau = young_daly_interval_s(delta, m)
    g = job_goodput(tau, delta, 0.0, m, save_lost_fraction=0.0)
    assert g.goodput == pytest.approx(1 - math.sqrt(2 * delta / m))
    assert g.goodput == pytest.approx(0.8946, abs=1e-4)
    assert g.save_overhead == pytest.approx(g.failure_overhead)
    assert g.failures_per_day == pytest.approx(8.0)


def test_goodput_llama3_scale_with_restart():
    # Job MTBF 3.09 h (Llama 3), 60 s saves every 19 min, 10 min restart:
    # overhead = 60/1138 + (569 + 60 + 600)/11134 = 0.0527 + 0.1104.
    m = job_mtbf_from_interruptions_h(419, 54 * 24) * 3600
    g = job_goodput(1138.4, 60.0, 600.0, m)
    assert g.lost_per_failure_s == pytest.approx(1138.4 / 2 + 60 + 600)
    assert g.goodput == pytest.approx(1 - 60 / 1138.4 - (1138.4 / 2 + 660) / m)
    assert 0.83 < g.goodput < 0.84


def test_goodput_floors_at_zero_and_wall_time_is_infinite():
    g = job_goodput(interval_s=3600.0, save_s=600.0, restart_s=3600.0, job_mtbf_s=1800.0)
    assert g.goodput == 0.0
    assert expected_wall_time_s(86_400.0, g.goodput) == math.inf
    assert expected_wall_time_s(86_400.0, 0.8) == pytest.approx(108_000.0)


def test_invalid_inputs_raise():
    with pytest.raises(ValueError):
        job_mtbf_h(1000.0, 0)
    with pytest.raises(ValueError):
        lost_work_per_failure_s(100.0, 10.0, 10.0, save_lost_fraction=2.0)
    with pytest.raises(ValueError):
        expected_wall_time_s(10.0, 1.5)


@given(
    interval=st.floats(1.0, 1e6),
    save=st.floats(0.0, 1e5),
    restart=st.floats(0.0, 1e5),
    mtbf=st.floats(1.0, 1e9),
)
def test_goodput_is_within_0_and_1(interval, save, restart, mtbf):
    g = job_goodput(interval, save, restart, mtbf)
    assert 0.0 <= g.goodput <= 1.0 and g.save_overhead >= 0 and g.failure_overhead >= 0


def test_expected_wall_days_divide_compute_days_by_goodput() -> None:
    # 18.84 failure-free days at 95 % goodput take 19.83 days; a job that never progresses never ends.
    from rules.estimates.reliability.failures import expected_wall_days

    assert expected_wall_days(18.84, 0.95) == pytest.approx(19.8316, rel=1e-5)
    assert expected_wall_days(18.84, 0.0) == math.inf
    with pytest.raises(ValueError, match="goodput"):
        expected_wall_days(18.84, 1.5)

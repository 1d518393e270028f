"""Tests for rules.estimates.reliability.goodput_sim: the simulated days to completion against the closed forms.

Two closed forms are used. Daly 2006's expected wall time M·e^{R/M}·(e^{(τ+δ)/M} − 1) per segment is
the exact expectation of the simulated process (Poisson failures, a failure loses the segment so far
and restarts, failures may strike restarts), so the simulated mean must match it up to Monte Carlo
error at any failure rate. The project's first-order goodput (rules.estimates.reliability.failures, Young 1974 /
Daly 2006 first-order model) is its expansion to first order in (τ + δ)/M and R/M, so the two agree only
while the interval, the save and the restart are small against the job MTBF; the test checks both.
"""

import math

import numpy as np
import pytest

from rules.estimates.reliability.checkpoint import young_daly_interval_s
from rules.estimates.reliability.failures import (
    expected_wall_time_s,
    job_goodput,
    job_mtbf_from_interruptions_h,
    node_mtbf_from_job_h,
)
from rules.estimates.reliability.goodput_sim import (
    EXACT_DRAWS_PER_SUM,
    MAX_DRAWS_PER_CHUNK,
    GoodputInputs,
    _sum_truncated_exponentials,
    daly_expected_wall_time_s,
    exact_draws_per_trial,
    linear_percentiles,
    sample_wall_time_s,
    simulate_goodput,
    window_probability,
)

DAY = 86_400.0
# Llama 3 (arXiv 2407.21783) §3.3.4: 419 unexpected interruptions in 54 days on 2048 nodes of 8 H100s,
# about 6,335 h per node (tests/estimates/test_reliability.py reproduces it).
LLAMA3_NODE_MTBF_H = node_mtbf_from_job_h(job_mtbf_from_interruptions_h(419, 54 * 24), 2048)

# A 60-day run on 1024 GPUs (128 nodes, job MTBF ≈ 49.5 h): 30-min interval, 60 s saves, 20-min restart.
LLAMA3_1024_GPUS_60_DAYS = GoodputInputs(60 * DAY, 128, LLAMA3_NODE_MTBF_H, 1800.0, 60.0, 1200.0)
# The full Llama 3 scale (2048 nodes, job MTBF ≈ 3.09 h), 30 days at Young's interval for 60 s saves.
LLAMA3_16K_GPUS_30_DAYS = GoodputInputs(
    30 * DAY, 2048, LLAMA3_NODE_MTBF_H,
    young_daly_interval_s(60.0, LLAMA3_NODE_MTBF_H * 3600 / 2048), 60.0, 600.0,
)
# The examples/h200-128node-pretraining.json job: 128 nodes at 5,000 h, 30-min interval, 120 s, 20 min.
H200_128_NODES_60_DAYS = GoodputInputs(60 * DAY, 128, 5000.0, 1800.0, 120.0, 1200.0)
# Far outside the first-order regime: job MTBF 29 min against a 50-min segment and a 30-min restart,
# 10.5 days of compute (a partial last segment).
HARSH_10_DAYS = GoodputInputs(10.5 * DAY, 2048, 1000.0, 3000.0, 300.0, 1800.0)
ASYNC_SAVES = GoodputInputs(60 * DAY, 128, 5000.0, 1800.0, 120.0, 1200.0, async_save=True)


@pytest.mark.parametrize(
    "inputs",
    [LLAMA3_1024_GPUS_60_DAYS, LLAMA3_16K_GPUS_30_DAYS, H200_128_NODES_60_DAYS, HARSH_10_DAYS, ASYNC_SAVES],
    ids=["llama3-1024gpu-60d", "llama3-16kgpu-30d", "h200-128node-60d", "harsh-partial-segment", "async-save"],
)
def test_mean_of_10000_trials_matches_daly_2006_expected_wall_time_within_2_percent(inputs):
    result = simulate_goodput(inputs, seed=20261201, trials=10_000)
    expected_days = daly_expected_wall_time_s(inputs) / DAY
    assert result.expected_days == pytest.approx(expected_days)
    assert result.days_mean == pytest.approx(expected_days, rel=0.02)
    # Failures actually happened, and the mean carries their cost above the failure-free time.
    assert result.failures_mean > 10
    assert result.days_mean > result.failure_free_days


@pytest.mark.parametrize(
    "inputs", [LLAMA3_1024_GPUS_60_DAYS, H200_128_NODES_60_DAYS], ids=["llama3-1024gpu-60d", "h200-128node-60d"]
)
def test_mean_matches_first_order_goodput_of_reliability_py_where_its_assumptions_hold(inputs):
    # (τ + δ)/M and R/M below 2 %: compute / (1 − δ/τ − ((τ + δ)/2 + R)/M), Young's convention
    # (save_lost_fraction 0.5: a failure strikes uniformly within the τ + δ of a segment).
    goodput = job_goodput(inputs.interval_s, inputs.save_s, inputs.restart_s, inputs.job_mtbf_s,
                          save_lost_fraction=0.5).goodput
    first_order_days = expected_wall_time_s(inputs.compute_s, goodput) / DAY
    result = simulate_goodput(inputs, seed=7, trials=10_000)
    assert result.days_mean == pytest.approx(first_order_days, rel=0.02)


@pytest.mark.parametrize(
    "inputs",
    [GoodputInputs(60 * DAY, 128, 5000.0, 1800.0, 120.0, 0.0),  # no restart: no restart draws at all
     GoodputInputs(1200.0, 128, 500.0, 1800.0, 60.0, 600.0)],  # one short segment (a count-1 group only)
    ids=["restart-0", "one-segment"],
)
def test_edge_jobs_match_daly_2006_and_count_only_the_failures_they_can_have(inputs):
    # Failures per segment group are NegativeBinomial(n, e^{−L/M}): n·(e^{L/M} − 1) expected, and each
    # failure brings e^{R/M} − 1 failed restarts more (none when R = 0).
    result = simulate_goodput(inputs, seed=20261202, trials=10_000)
    m = inputs.job_mtbf_s
    segment_failures = sum(count * math.expm1(length / m) for count, length in inputs.segments())
    assert result.days_mean == pytest.approx(daly_expected_wall_time_s(inputs) / DAY, rel=0.02)
    assert result.failures_mean == pytest.approx(segment_failures * math.exp(inputs.restart_s / m), rel=0.05)
    if inputs.restart_s == 0:
        assert result.days_p50 > result.failure_free_days  # the failures' lost work alone delays the runs


def test_first_order_goodput_overstates_the_harsh_case_the_simulation_follows_daly():
    # With M ≈ 29 min the first-order goodput is 0 (the job "never finishes"); the exact expectation is
    # finite, about 90 days for 10.5 days of compute, and the simulation reproduces it.
    g = job_goodput(HARSH_10_DAYS.interval_s, HARSH_10_DAYS.save_s, HARSH_10_DAYS.restart_s,
                    HARSH_10_DAYS.job_mtbf_s, save_lost_fraction=0.5)
    assert g.goodput == 0.0
    result = simulate_goodput(HARSH_10_DAYS, seed=3, trials=2_000)
    assert 80 < result.expected_days < 110
    assert result.days_mean == pytest.approx(result.expected_days, rel=0.02)


def test_lost_work_per_failure_is_simulated_not_assumed_half_a_segment():
    # Given an exponential failure law with M = L (one segment per MTBF), when a failure falls inside
    # the segment, then the work lost averages M − L·e^{-1}/(1 − e^{-1}) ≈ 0.418 L, not L/2.
    rng = np.random.default_rng(11)
    counts = np.full(1000, 200, dtype=np.int64)
    lost = _sum_truncated_exponentials(rng, counts, 1.0, 1.0).sum() / counts.sum()
    assert lost == pytest.approx(1 - math.exp(-1) / (1 - math.exp(-1)), rel=0.01)
    assert lost < 0.45


def test_chunked_draws_sum_the_same_law_as_one_chunk():
    # More draws than one chunk holds: every trial still gets its own sum, each within [0, count·L).
    rng = np.random.default_rng(5)
    counts = np.full(40, 50_000, dtype=np.int64)  # each trial more than a chunk, all drawn one by one
    assert counts[0] > MAX_DRAWS_PER_CHUNK and counts[0] <= exact_draws_per_trial(counts.size)
    sums = _sum_truncated_exponentials(rng, counts, 10.0, 1.0)
    assert (sums > 0).all() and (sums < counts).all()
    # Mean of an exponential (M = 10) truncated to [0, 1): 10 − e^{-0.1}/(1 − e^{-0.1}) ≈ 0.4917.
    assert sums.sum() / counts.sum() == pytest.approx(10 - math.exp(-0.1) / -math.expm1(-0.1), rel=1e-3)


def test_the_chunk_size_does_not_change_a_single_bit_of_the_sums(monkeypatch):
    # Chunks hold whole trials, and each trial's lost times are summed from its own draws alone.
    counts = np.random.default_rng(3).poisson(40.0, size=10_000)
    small = _sum_truncated_exponentials(np.random.default_rng(9), counts, 140_625.0, 1_805.0)
    monkeypatch.setattr("rules.estimates.reliability.goodput_sim.MAX_DRAWS_PER_CHUNK", 1 << 20)
    one_chunk = _sum_truncated_exponentials(np.random.default_rng(9), counts, 140_625.0, 1_805.0)
    assert counts.sum() > 10 * MAX_DRAWS_PER_CHUNK
    assert np.array_equal(small, one_chunk)


def test_trials_with_very_many_failures_use_the_normal_law_and_keep_the_mean():
    # Job MTBF 36 s against 10-min segments: ≈ 1.7e7 failures per segment pass, far above the exact cap.
    inputs = GoodputInputs(2 * 3600.0, 1000, 10.0, 600.0, 0.0, 0.0)
    # The count itself spreads as Gamma(12 segments): 29 % per trial, so 10,000 trials for a 0.3 % mean.
    wall, failures = sample_wall_time_s(inputs, trials=10_000, seed=1)
    assert failures.min() > 1_000_000
    assert wall.mean() == pytest.approx(daly_expected_wall_time_s(inputs), rel=0.02)


class _CountingGenerator:
    """A NumPy generator that counts the uniform draws asked of it (one per lost time drawn exactly)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.uniforms = 0

    def random(self, size: int) -> np.ndarray:
        self.uniforms += size
        return self.rng.random(size)

    def normal(self, loc, scale):
        return self.rng.normal(loc, scale)


def test_exact_draws_of_one_sum_stay_within_the_budget_whatever_the_failure_count():
    # Given 10,000 trials of 1,000 failures each (5x a trial's share of the budget) and 10,000 of 150,
    # when their lost times are summed, then at most EXACT_DRAWS_PER_SUM are drawn one by one, the rest
    # from the normal law, and the mean lost time is the truncated exponential's either way.
    assert exact_draws_per_trial(10_000) == EXACT_DRAWS_PER_SUM // 10_000 == 209
    assert exact_draws_per_trial(1) == 100_000
    many = _CountingGenerator(2)
    sums = _sum_truncated_exponentials(many, np.full(10_000, 1_000, dtype=np.int64), 1.0, 1.0)
    assert many.uniforms == 0
    few = _CountingGenerator(2)
    few_sums = _sum_truncated_exponentials(few, np.full(10_000, 150, dtype=np.int64), 1.0, 1.0)
    assert few.uniforms == 1_500_000 <= EXACT_DRAWS_PER_SUM
    # Mean of an exponential (M = 1) truncated to [0, 1): 1 − e^{-1}/(1 − e^{-1}) ≈ 0.418.
    truncated_mean = 1 - math.exp(-1) / -math.expm1(-1)
    assert sums.mean() / 1_000 == pytest.approx(truncated_mean, rel=1e-3)
    assert few_sums.mean() / 150 == pytest.approx(truncated_mean, rel=1e-3)


def test_same_seed_gives_identical_results_and_another_seed_does_not():
    a = simulate_goodput(LLAMA3_1024_GPUS_60_DAYS, seed=42, trials=2_000, window_days=63)
    b = simulate_goodput(LLAMA3_1024_GPUS_60_DAYS, seed=42, trials=2_000, window_days=63)
    c = simulate_goodput(LLAMA3_1024_GPUS_60_DAYS, seed=43, trials=2_000, window_days=63)
    assert a == b
    assert np.array_equal(sample_wall_time_s(HARSH_10_DAYS, 500, 9)[0], sample_wall_time_s(HARSH_10_DAYS, 500, 9)[0])
    assert c.days_mean != a.days_mean


@pytest.mark.parametrize("inputs", [LLAMA3_1024_GPUS_60_DAYS, LLAMA3_16K_GPUS_30_DAYS, HARSH_10_DAYS])
def test_percentiles_are_ordered_and_bracket_the_spread(inputs):
    result = simulate_goodput(inputs, seed=1, trials=5_000)
    assert result.failure_free_days < result.days_p50 <= result.days_p90 <= result.days_p99
    assert result.days_p50 < result.days_p99  # the failures spread the runs


def test_no_failures_takes_compute_plus_one_save_per_interval():
    # Node MTBF 1e12 h: no failure in 60 days. 60 days / 30 min = 2880 segments, each ending in a 60 s save.
    inputs = GoodputInputs(60 * DAY, 128, 1e12, 1800.0, 60.0, 1200.0)
    result = simulate_goodput(inputs, seed=0, trials=1_000)
    assert result.failure_free_days == pytest.approx(60 + 2880 * 60 / DAY)
    assert result.days_mean == pytest.approx(62.0)
    assert result.days_p50 == result.days_p99 == pytest.approx(62.0)
    assert result.failures_mean == 0
    assert result.goodput == pytest.approx(60 / 62)


def test_no_failures_with_a_partial_last_segment_and_async_saves():
    # 100 min of compute at a 30-min interval: three full segments and a 10-min one, four saves.
    blocking = GoodputInputs(6000.0, 8, 1e12, 1800.0, 30.0, 60.0)
    assert blocking.segments() == ((3, 1830.0), (1, 630.0))
    assert simulate_goodput(blocking, seed=0, trials=10).days_mean == pytest.approx((6000 + 4 * 30) / DAY)
    asynchronous = GoodputInputs(6000.0, 8, 1e12, 1800.0, 30.0, 60.0, async_save=True)
    assert simulate_goodput(asynchronous, seed=0, trials=10).days_mean == pytest.approx(6000 / DAY)


def test_window_probability_rises_with_the_window_from_0_to_1():
    wall, _ = sample_wall_time_s(LLAMA3_1024_GPUS_60_DAYS, 5_000, 8)
    windows = np.linspace(61.5, 64.0, 26)
    probabilities = [window_probability(wall, w) for w in windows]
    assert probabilities[0] == 0.0 and probabilities[-1] == 1.0
    assert all(a <= b for a, b in zip(probabilities, probabilities[1:], strict=False))
    assert 0 < window_probability(wall, 62.75) < 1
    result = simulate_goodput(LLAMA3_1024_GPUS_60_DAYS, seed=8, trials=5_000, window_days=62.75)
    assert result.window_probability == pytest.approx(window_probability(wall, 62.75))
    assert result.window_days == 62.75
    # About half the runs finish by the median.
    assert simulate_goodput(LLAMA3_1024_GPUS_60_DAYS, seed=8, trials=5_000,
                            window_days=result.days_p50).window_probability == pytest.approx(0.5, abs=0.01)


def test_a_job_that_cannot_finish_reports_infinite_days_and_window_probability_0():
    # Job MTBF 18 s against 30-min segments: e^{100} failures expected per segment.
    inputs = GoodputInputs(60 * DAY, 2048, 10.0, 1800.0, 120.0, 1200.0)
    result = simulate_goodput(inputs, seed=0, trials=100, window_days=365)
    assert math.isinf(result.days_p50) and math.isinf(result.days_mean)
    assert result.expected_days > 1e70  # the closed form is finite, and hopeless
    assert result.window_probability == 0.0
    assert result.goodput == 0.0


@pytest.mark.parametrize(
    ("field", "value"),
    [("compute_s", 0.0), ("compute_s", math.nan), ("nodes", 0), ("nodes", 2.5), ("nodes", True),
     ("node_mtbf_h", -1.0), ("node_mtbf_h", math.inf), ("interval_s", 0.0), ("save_s", -1.0),
     ("restart_s", -0.5), ("async_save", "yes")],
)
def test_invalid_inputs_raise_naming_the_argument(field, value):
    fields = {"compute_s": DAY, "nodes": 8, "node_mtbf_h": 5000.0, "interval_s": 1800.0, "save_s": 60.0,
              "restart_s": 600.0, "async_save": False, field: value}
    with pytest.raises(ValueError, match=rf"^{field} must be"):
        GoodputInputs(**fields)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"trials": 0}, "trials"), ({"trials": 10.0}, "trials"), ({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"),
     ({"seed": None}, "seed"), ({"window_days": 0}, "window_days"), ({"window_days": math.nan}, "window_days")],
)
def test_invalid_simulation_arguments_raise_naming_the_argument(kwargs, name):
    arguments = {"seed": 1, "trials": 10, **kwargs}
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        simulate_goodput(LLAMA3_1024_GPUS_60_DAYS, **arguments)


@pytest.mark.parametrize("size", [1, 2, 3, 10, 101, 10_000])
def test_linear_percentiles_are_numpys_to_the_bit(size):
    # Many equal values (runs without failures) and a spread of others, as the simulated days are.
    rng = np.random.default_rng(size)
    for _ in range(50):
        values = np.where(rng.random(size) < 0.8, 2.5, 2.5 + rng.exponential(0.3, size))
        percents = (0.0, 1.0, 33.3, 50.0, 90.0, 99.0, 99.9, 100.0)
        assert linear_percentiles(values, percents) == tuple(float(v) for v in np.percentile(values, percents))

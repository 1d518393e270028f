"""Tests for rules.estimates.reliability.negative_binomial: table-inverted draws against the exact
NegativeBinomial(n, p) pmf.

The exact pmf is C(n + k − 1, k)·p^n·(1 − p)^k (Johnson, Kemp & Kotz, Univariate Discrete Distributions,
§5.1), computed here term by term with math.lgamma, independently of the sampler's recurrence. Samples are
seeded, so every statistic below is one fixed number: the tests cannot flake, and the bounds (a Pearson
chi-square within 5 standard deviations of its degrees of freedom) are loose enough that a correct sampler
under another seed would pass them too, and tight enough that a wrong p fails them (tested).
"""

import math

import numpy as np
import pytest

from rules.estimates.reliability.negative_binomial import (
    MAX_ROWS,
    MAX_TABLE_CELLS,
    _inverse_transform,
    _table,
    negative_binomial,
    negative_binomial_per_trial,
)

# The examples/h200-128node-pretraining.json job: job MTBF 140,625 s, 1,002 segments of 1,805.1 s, a last
# one of 1,723.5 s, restarts of 1,200 s.
H200_MTBF_S = 140_625.0
H200_SEGMENTS = -1805.1 / H200_MTBF_S
H200_REMAINDER = -1723.5 / H200_MTBF_S
H200_RESTART = -1200.0 / H200_MTBF_S


def exact_pmf(n: int, log_p: float, k: np.ndarray) -> np.ndarray:
    """NegativeBinomial(n, e^{log_p}) probabilities of ``k`` failures, from the closed form."""
    log_q = math.log(-math.expm1(log_p))
    return np.array([math.exp(math.lgamma(n + j) - math.lgamma(j + 1) - math.lgamma(n) + n * log_p + j * log_q)
                     for j in k])


def chi_square_sigmas(draws: np.ndarray, n: int, log_p: float) -> float:
    """Pearson's chi-square of ``draws`` against the exact pmf, in standard deviations above its d.o.f.

    Cells of k with at least 5 expected draws; the rest, both tails, pooled into one cell.
    """
    counts = np.bincount(draws)
    k = np.arange(max(counts.size, 1) + 64)
    counts = np.pad(counts, (0, k.size - counts.size))
    expected = exact_pmf(n, log_p, k) * draws.size
    kept = expected >= 5
    observed = np.append(counts[kept], draws.size - counts[kept].sum())
    expected = np.append(expected[kept], draws.size - expected[kept].sum())
    degrees = observed.size - 1
    statistic = float(((observed - expected) ** 2 / expected).sum())
    return (statistic - degrees) / math.sqrt(2 * max(degrees, 1))


LAWS = {
    "h200-1002-segments": (1002, H200_SEGMENTS),
    "count-1-remainder": (1, H200_REMAINDER),
    "geometric-p-0.05": (1, math.log(0.05)),  # a long table: 37 means to reach a 2^-53 tail
    "p-pow-n-underflows": (2000, math.log(0.5)),  # p^n = 2^-2000: the recurrence starts in log space
    "many-near-certain-segments": (200_000, -1e-4),
    "harsh": (50, -2.0),
}


@pytest.mark.parametrize(("n", "log_p"), list(LAWS.values()), ids=list(LAWS))
def test_draws_follow_the_exact_negative_binomial_pmf_mean_and_variance(n, log_p):
    draws = negative_binomial(np.random.default_rng(20261202), n, log_p, 200_000)
    assert draws.dtype == np.int64 and draws.min() >= 0
    mean = n * math.expm1(-log_p)  # n(1 − p)/p
    variance = mean / math.exp(log_p)  # n(1 − p)/p²
    # Mean within 5 standard errors; variance within 5 % (its standard error is below 1 % here).
    assert draws.mean() == pytest.approx(mean, abs=5 * math.sqrt(variance / draws.size) + 1e-12)
    assert draws.var() == pytest.approx(variance, rel=0.05)
    assert chi_square_sigmas(draws, n, log_p) < 5


@pytest.mark.parametrize(("n", "log_p"), [LAWS["h200-1002-segments"], LAWS["geometric-p-0.05"]])
def test_the_pmf_test_rejects_draws_of_a_segment_5_percent_longer(n, log_p):
    # Given draws of the right law, when they are tested against the law of L/M 5 % larger, then they fail.
    draws = negative_binomial(np.random.default_rng(20261202), n, log_p, 200_000)
    assert chi_square_sigmas(draws, n, log_p) < 5
    assert chi_square_sigmas(draws, n, log_p * 1.05) > 20


def test_p_pow_n_underflows_yet_the_table_is_built_and_centred_on_the_mean():
    n, log_p = LAWS["p-pow-n-underflows"]
    assert math.exp(n * log_p) == 0.0
    rows = _table(np.array([n]), log_p)
    assert rows is not None and rows[0, -1] == 1.0
    # F crosses 1/2 at the median, ≈ the mean 2,000 (the law is nearly symmetric at n = 2,000).
    assert abs(int(np.searchsorted(rows[0], 0.5)) - 2000) <= 2


def test_the_table_leaves_out_less_than_2_pow_minus_53_of_the_mass():
    for n, log_p in LAWS.values():
        rows = _table(np.array([n]), log_p)
        length = rows.shape[1]
        tail = exact_pmf(n, log_p, np.arange(length, length + 2000)).sum()
        assert tail < 2.0**-53 * 1.01, (n, log_p)
        # The table's F is the exact one to float rounding where it matters.
        k = np.arange(min(length, 200))
        assert np.allclose(rows[0, k], np.cumsum(exact_pmf(n, log_p, np.arange(length)))[k], rtol=1e-9, atol=1e-15)


def test_no_failure_is_possible_when_p_is_1_or_n_is_0():
    rng = np.random.default_rng(1)
    assert np.array_equal(negative_binomial(rng, 1002, 0.0, 10), np.zeros(10, dtype=np.int64))
    assert np.array_equal(negative_binomial(rng, 0, -0.5, 10), np.zeros(10, dtype=np.int64))
    assert np.array_equal(negative_binomial_per_trial(rng, np.zeros(10, dtype=np.int64), -0.5), np.zeros(10))
    assert negative_binomial_per_trial(rng, np.zeros(0, dtype=np.int64), -0.5).size == 0
    # A segment 1e-9 of the MTBF: a failure among 3 × 10,000 segments has odds 3e-5.
    assert negative_binomial(np.random.default_rng(2), 3, -1e-9, 10_000).sum() == 0


def test_per_trial_draws_follow_each_trials_own_law_and_trials_without_failures_draw_none():
    # Given the H200 job's failure counts per trial (≈ 13 each), when their failed restarts are drawn,
    # then the trials with n failures follow NegativeBinomial(n, e^{−R/M}), and those with none draw 0.
    failures = negative_binomial(np.random.default_rng(3), 1002, H200_SEGMENTS, 400_000)
    restarts = negative_binomial_per_trial(np.random.default_rng(4), failures, H200_RESTART)
    assert (restarts[failures == 0] == 0).all() and (failures == 0).any()
    for n in (5, 13, 20):
        assert chi_square_sigmas(restarts[failures == n], n, H200_RESTART) < 5
    # The sum over trials of NegativeBinomial(n_i, q) is NegativeBinomial(Σ n_i, q): mean Σn·(1 − q)/q.
    assert restarts.sum() == pytest.approx(failures.sum() * math.expm1(-H200_RESTART), rel=0.01)
    # A restart as long as two MTBFs: a wide table per row.
    few = np.random.default_rng(5).poisson(3.0, 300_000)
    draws = negative_binomial_per_trial(np.random.default_rng(6), few, -0.5)
    for n in (1, 3, 6):
        assert chi_square_sigmas(draws[few == n], n, -0.5) < 5


def test_the_guide_table_finds_the_same_entry_as_a_full_search():
    # One uniform per draw, inverted by the guide table, and the same uniforms searched in F directly.
    for n, log_p in LAWS.values():
        rows = _table(np.array([n]), log_p)
        guided = _inverse_transform(np.random.default_rng(7), rows, None, 50_000)
        searched = np.searchsorted(rows[0], np.random.default_rng(7).random(50_000), side="right")
        assert np.array_equal(guided, searched), (n, log_p)
    rows = _table(np.arange(31), H200_RESTART)
    row_of = np.random.default_rng(8).integers(0, 31, 50_000)
    guided = _inverse_transform(np.random.default_rng(9), rows, row_of, 50_000)
    uniforms = np.random.default_rng(9).random(50_000)
    searched = np.array([np.searchsorted(rows[r], u, side="right") for r, u in zip(row_of, uniforms, strict=True)])
    assert np.array_equal(guided, searched)


class _CountingGenerator:
    """A NumPy generator that counts the calls of its own negative binomial sampler."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.numpy_draws = 0

    def random(self, size: int) -> np.ndarray:
        return self.rng.random(size)

    def negative_binomial(self, n, p, size=None):
        self.numpy_draws += 1
        return self.rng.negative_binomial(n, p, size=size)


def test_a_table_too_long_leaves_the_draws_to_numpys_sampler_of_the_same_law():
    # Geometric with p = 1e-3: 37,000 entries for a 2^-53 tail, beyond MAX_TABLE_CELLS.
    assert _table(np.array([1]), math.log(1e-3)) is None and MAX_TABLE_CELLS < 37_000
    rng = _CountingGenerator(10)
    draws = negative_binomial(rng, 1, math.log(1e-3), 100_000)
    assert rng.numpy_draws == 1 and draws.mean() == pytest.approx(999.0, rel=0.02)
    # Per trial: more rows than MAX_ROWS (a trial with 2,000 failures), or rows too long.
    counts = np.array([0, 1, MAX_ROWS + 977] * 1000, dtype=np.int64)
    rng = _CountingGenerator(11)
    draws = negative_binomial_per_trial(rng, counts, -0.01)
    assert rng.numpy_draws == 1 and (draws[counts == 0] == 0).all()
    assert draws[counts == 2000].mean() == pytest.approx(2000 * math.expm1(0.01), rel=0.02)
    # The table itself: one uniform per draw, never NumPy's sampler.
    rng = _CountingGenerator(12)
    negative_binomial(rng, 1002, H200_SEGMENTS, 100)
    negative_binomial_per_trial(rng, np.arange(40), H200_RESTART)
    assert rng.numpy_draws == 0


def test_the_same_seed_gives_the_same_draws():
    first = negative_binomial(np.random.default_rng(13), 1002, H200_SEGMENTS, 1000)
    assert np.array_equal(first, negative_binomial(np.random.default_rng(13), 1002, H200_SEGMENTS, 1000))
    assert not np.array_equal(first, negative_binomial(np.random.default_rng(14), 1002, H200_SEGMENTS, 1000))

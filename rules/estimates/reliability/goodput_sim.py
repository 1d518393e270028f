"""Days to completion of a checkpointed training job, by Monte Carlo simulation of its failures.

Model (the one whose expectation Daly 2006 derives, FGCS 22(3), "A higher order estimate of the optimum
checkpoint interval for restart dumps", §3, the complete cost function):

- Failures form a Poisson process in wall-clock time with rate nodes / node MTBF (independent nodes with
  exponential lifetimes; the job MTBF of :func:`rules.estimates.reliability.failures.job_mtbf_h`). The process
  runs during compute, during saves and during restarts alike.
- The job's failure-free compute time ``compute_s`` is cut into segments of ``interval_s`` of compute,
  each ended by a checkpoint that blocks for ``save_s`` (the last segment holds the remainder and ends
  with the final save). A segment is done when it runs ``interval_s + save_s`` without a failure.
- A failure loses everything since the last checkpoint: the time from the segment's start to the
  failure, drawn from the exponential law of the process (given that it fell inside the segment), not
  assumed to be half a segment. Then the job restarts (``restart_s``: detection, rescheduling, reload
  of the checkpoint, warm-up); a failure during the restart begins it again.
- ``async_save``: the save overlaps the next segment's compute and costs no wall time; the checkpoint
  counts as durable when taken (the window in which its background write is still in flight, of length
  ``save_s`` ≪ the job MTBF, is neglected).

Expected wall time per segment of length L = τ + δ is M·e^{R/M}·(e^{L/M} − 1) (Daly 2006; M the job
MTBF, R the restart); :func:`daly_expected_wall_time_s` sums it over the segments, and the simulation's
mean converges to it. To first order in L/M and R/M it is the compute time divided by the goodput
1 − δ/τ − ((τ + δ)/2 + R)/M of :func:`rules.estimates.reliability.failures.job_goodput` with
``save_lost_fraction=0.5`` (Young 1974, CACM 17(9); Daly 2006 first-order model), whose optimum interval
is τ = √(2δM) (:func:`rules.estimates.reliability.checkpoint.young_daly_interval_s`).

Sampling, vectorised over trials: the failures during ``n`` identical segments, each passed with
probability p = e^{−L/M}, number NegativeBinomial(n, p) (failures before n successes); the failed
restarts after N failures number NegativeBinomial(N, e^{−R/M}). Both counts are drawn by inverse
transform, one uniform per count, from a table of the distribution function built by the pmf recurrence
(Johnson, Kemp & Kotz, *Univariate Discrete Distributions*, 3rd ed., §5.1), one row per N for the
restarts, and by NumPy's gamma-Poisson sampler of the same law where the table would exceed
:data:`rules.estimates.reliability.negative_binomial.MAX_TABLE_CELLS` entries (a job that fails thousands of times
per segment group): :mod:`rules.estimates.reliability.negative_binomial`. Each failure's lost time is an exponential
truncated to [0, L) (a failed restart's, to [0, R)), drawn by inverting its distribution function. Work
is bounded: lost times are drawn in chunks of at most :data:`MAX_DRAWS_PER_CHUNK` values, at most
:data:`EXACT_DRAWS_PER_SUM` of them for all trials of one sum, and a trial with more failures of one
kind than its share of that budget (at most :data:`EXACT_DRAWS_PER_TRIAL`; 209 at 10,000 trials) takes
the sum of its lost times from the normal law with the truncated exponential's exact mean and variance
(central limit theorem: the sum's mean and variance stay exact; the skewness the normal law drops is at
most 2/√N, below 0.14 past 209 failures, and only in the lost time given the count of failures, whose
own law is drawn exactly). A job expected to fail more than :data:`MAX_EXPECTED_FAILURES` times never
finishes as modelled: every figure is ``math.inf`` and the window probability 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rules.estimates._args import (
    require_bool,
    require_non_negative,
    require_non_negative_int,
    require_positive,
    require_positive_int,
)
from rules.estimates.reliability.negative_binomial import negative_binomial, negative_binomial_per_trial

SECONDS_PER_DAY = 86_400.0
SECONDS_PER_HOUR = 3_600.0
# Lost-time draws per chunk: 256 KiB of float64. Chunks of a million draws spent longer faulting fresh pages in
# than computing; chunks of 8,192 paid a dozen NumPy calls each (the 128-node example's ~130,000 draws took 16
# of them, ~0.15 ms more per simulation than 4; glibc's mmap threshold rises to a freed chunk's size, so later
# chunks of this size reuse heap memory). The draws and the sums do not depend on the chunk size: chunks hold
# whole trials.
MAX_DRAWS_PER_CHUNK = 1 << 15
EXACT_DRAWS_PER_TRIAL = 100_000  # above this many failures in one trial, the normal law sums its lost times
# Lost times drawn one by one for all trials of one sum (about 50 ms): a trial with more than its share
# of them takes the normal law, so that an evaluation's cost is bounded whatever the failure rate.
EXACT_DRAWS_PER_SUM = 1 << 21
MAX_EXPECTED_FAILURES = 1e12  # per trial; beyond it the job is reported as never finishing
PERCENTILES = (50.0, 90.0, 99.0)
# Below this L/M the truncated exponential's moments come from their series (the closed forms cancel).
_SERIES_BELOW = 1e-4


@dataclass(frozen=True)
class GoodputInputs:
    """A checkpointed training job on a cluster whose nodes fail at random."""

    compute_s: float  # wall time of the whole job with no failures and no checkpoints
    nodes: int  # nodes the job runs on; any node failure interrupts it
    node_mtbf_h: float  # mean time between failures of one node (every unexpected interruption)
    interval_s: float  # compute time between checkpoints
    save_s: float  # blocking time of one checkpoint save
    restart_s: float  # time from a failure to training again: detection + reschedule + reload + warm-up
    async_save: bool = False  # the save overlaps compute and costs no wall time

    def __post_init__(self) -> None:
        require_positive("compute_s", self.compute_s)
        require_positive_int("nodes", self.nodes)
        require_positive("node_mtbf_h", self.node_mtbf_h)
        require_positive("interval_s", self.interval_s)
        require_non_negative("save_s", self.save_s)
        require_non_negative("restart_s", self.restart_s)
        require_bool("async_save", self.async_save)

    @property
    def job_mtbf_s(self) -> float:
        """Mean time between failures of the whole job in seconds: node MTBF / nodes."""
        return self.node_mtbf_h * SECONDS_PER_HOUR / self.nodes

    @property
    def blocking_save_s(self) -> float:
        """Wall time one checkpoint costs: ``save_s``, or 0 with ``async_save``."""
        return 0.0 if self.async_save else self.save_s

    def segments(self) -> tuple[tuple[int, float], ...]:
        """Return (count, wall length in seconds) of the job's segments: the full ones, then the remainder."""
        full = math.floor(self.compute_s / self.interval_s)
        remainder = self.compute_s - full * self.interval_s
        groups = []
        if full:
            groups.append((full, self.interval_s + self.blocking_save_s))
        # A remainder below a microsecond of compute is floating-point noise from the division.
        if remainder > 1e-6:
            groups.append((1, remainder + self.blocking_save_s))
        return tuple(groups)

    @property
    def failure_free_s(self) -> float:
        """Wall time with no failures: compute plus one blocking save per segment."""
        return sum(count * length for count, length in self.segments())


@dataclass(frozen=True)
class GoodputDistribution:
    """Simulated days to completion of a job, with the closed-form expectation it should match."""

    trials: int
    seed: int
    compute_days: float  # no failures, no checkpoints
    failure_free_days: float  # no failures, with the blocking checkpoint saves
    expected_days: float  # Daly 2006 closed form for the same process
    days_mean: float
    days_p50: float
    days_p90: float
    days_p99: float
    failures_mean: float  # interruptions per trial, failed restarts included
    window_days: float | None  # completion window asked about, if any
    window_probability: float | None  # share of trials finished inside it

    @property
    def goodput(self) -> float:
        """Compute days over mean wall days: the fraction of wall time that did new work."""
        return self.compute_days / self.days_mean if math.isfinite(self.days_mean) else 0.0


def _truncated_exponential_moments(mean: float, limit: float) -> tuple[float, float]:
    """Return the mean and variance of an exponential with ``mean`` conditioned on falling below ``limit``."""
    x = limit / mean
    if x < _SERIES_BELOW:
        # Uniform on [0, limit) to first order: mean L(1/2 − x/12), variance L²(1/12 − x²/720).
        return limit * (0.5 - x / 12.0), limit * limit * (1.0 / 12.0 - x * x / 720.0)
    p = math.exp(-x)
    first = mean - limit * p / -math.expm1(-x)
    second = (2 * mean * mean - p * (limit * limit + 2 * limit * mean + 2 * mean * mean)) / -math.expm1(-x)
    return first, max(second - first * first, 0.0)


def exact_draws_per_trial(trials: int) -> int:
    """Return the most lost times one of ``trials`` trials draws one by one: its share of EXACT_DRAWS_PER_SUM."""
    return max(1, min(EXACT_DRAWS_PER_TRIAL, EXACT_DRAWS_PER_SUM // max(trials, 1)))


def _sum_truncated_exponentials(
    rng: np.random.Generator, counts: np.ndarray, mean: float, limit: float
) -> np.ndarray:
    """Return, per trial, the sum of ``counts[i]`` exponentials with ``mean`` truncated to [0, ``limit``).

    Inverse transform: X = −M·ln(1 − U·(1 − e^{−L/M})). Draws go in chunks of at most
    MAX_DRAWS_PER_CHUNK; trials with more draws than :func:`exact_draws_per_trial` use the normal law.
    """
    sums = np.zeros(counts.shape, dtype=np.float64)
    if limit <= 0:
        return sums
    mass = -math.expm1(-limit / mean)  # P(X < L), computed without cancellation for small L/M
    # The trials with failures, then those of them with too many to draw one by one (usually none): the
    # others' draws are laid end to end, in the order of the trials.
    failing = np.flatnonzero(counts > 0)  # (a mask: NumPy finds the nonzero flags faster than the counts)
    failed = counts[failing]
    over = failed > exact_draws_per_trial(counts.size)
    many = failing[over] if over.any() else None
    if many is not None:
        failing, failed = failing[~over], failed[~over]
    cumulative = np.cumsum(failed)
    firsts = cumulative - failed  # where each trial's draws begin
    start = 0
    while start < failing.size:
        # Take as many trials as fit in one chunk (at least one: each holds ≤ EXACT_DRAWS_PER_TRIAL draws).
        before = int(cumulative[start - 1]) if start else 0
        if int(cumulative[-1]) - before <= MAX_DRAWS_PER_CHUNK:  # the rest fit: no search
            stop = failing.size
        else:
            stop = max(start + 1, int(np.searchsorted(cumulative, before + MAX_DRAWS_PER_CHUNK, side="right")))
        chunk = failing[start:stop]
        # ln(1 − U·mass) in place, as log1p(U × (−mass)): the product U × (−mass) is (−U) × mass to the bit
        # (rounding to nearest is symmetric in sign), one pass over the draws fewer; np.add.reduceat sums
        # each trial's logs (every trial here holds at least one, so none reads its neighbour's) and the
        # sum is scaled by −M once.
        draws = rng.random(int(cumulative[stop - 1]) - before)
        draws *= -mass
        np.log1p(draws, out=draws)
        sums[chunk] = np.add.reduceat(draws, firsts[start:stop] - before) * -mean
        start = stop
    if many is not None:
        mu, variance = _truncated_exponential_moments(mean, limit)
        n = counts[many].astype(np.float64)
        sums[many] = np.clip(rng.normal(n * mu, np.sqrt(n * variance)), 0.0, n * limit)
    return sums


def _expected_failures(inputs: GoodputInputs) -> float:
    """Return the expected interruptions of one run, failed restarts included (e^{L/M} − 1 per segment)."""
    m = inputs.job_mtbf_s
    per_failure = math.exp(min(inputs.restart_s / m, 700.0))  # one restart plus its expected failed restarts
    return sum(count * math.expm1(min(length / m, 700.0)) for count, length in inputs.segments()) * per_failure


def daly_expected_wall_time_s(inputs: GoodputInputs) -> float:
    """Return the expected wall time in seconds: Σ over segments of M·e^{R/M}·(e^{L/M} − 1).

    Daly 2006 (FGCS 22(3), §3, the complete cost function) for Poisson failures of mean interval M,
    restart R (failures may strike it) and segments of L = τ + δ that a failure sends back to their
    start; his T_w = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ when the compute T_s is a whole number of
    intervals τ, and here the last, shorter segment enters with its own length. ``math.inf`` when the
    expectation overflows a float.
    """
    m = inputs.job_mtbf_s
    try:
        scale = m * math.exp(inputs.restart_s / m)
        return sum(count * scale * math.expm1(length / m) for count, length in inputs.segments())
    except OverflowError:
        return math.inf


def sample_wall_time_s(inputs: GoodputInputs, trials: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (wall seconds, interruptions) of ``trials`` independent runs, seeded by ``seed``.

    Both arrays have one entry per trial. Wall seconds are ``inf`` for every trial when more than
    MAX_EXPECTED_FAILURES interruptions are expected (the job, as modelled, never finishes).
    """
    require_positive_int("trials", trials)
    require_non_negative_int("seed", seed)
    if _expected_failures(inputs) > MAX_EXPECTED_FAILURES:
        return np.full(trials, np.inf), np.full(trials, np.inf)
    rng = np.random.default_rng(seed)
    m = inputs.job_mtbf_s
    wall = np.full(trials, inputs.failure_free_s, dtype=np.float64)
    failures = np.zeros(trials, dtype=np.int64)
    for count, length in inputs.segments():
        # A segment passes with probability e^{−L/M}: its log, −L/M, keeps 1 − p exact for L ≪ M.
        lost_in_segments = negative_binomial(rng, count, -length / m, trials)
        wall += _sum_truncated_exponentials(rng, lost_in_segments, m, length)
        failures += lost_in_segments
    # Each failure needs one restart that runs R without a failure; the failed attempts before it are
    # NegativeBinomial(failures, e^{−R/M}) (a trial without failures draws 0).
    restarts = failures.copy()
    if inputs.restart_s > 0:
        extra = negative_binomial_per_trial(rng, failures, -inputs.restart_s / m)
        wall += failures * inputs.restart_s + _sum_truncated_exponentials(rng, extra, m, inputs.restart_s)
        restarts += extra
    return wall, restarts


def finite_or_none(value: float) -> float | None:
    """Return ``value``, or None for an infinite one (a job that, as modelled, never finishes).

    Records are canonical JSON (RFC 8785), which holds no infinity: a figure of a run that never ends is
    absent rather than a made-up large number.
    """
    return value if math.isfinite(value) else None


def window_probability(wall_s: np.ndarray, window_days: float) -> float:
    """Return the share of simulated runs (wall seconds) that finish within ``window_days``."""
    require_positive("window_days", window_days)
    return float(np.count_nonzero(wall_s <= window_days * SECONDS_PER_DAY)) / wall_s.size


def linear_percentiles(values: np.ndarray, percents: tuple[float, ...]) -> tuple[float, ...]:
    """Return ``np.percentile(values, percents)`` (linear interpolation, Hyndman & Fan 1996 method 7), as floats.

    The same arithmetic as NumPy's: index h = (n − 1)·q/100 between the order statistics x[⌊h⌋] and x[⌊h⌋ + 1]
    (the last one from h ≥ n − 1 on), weight g = h − ⌊h⌋, and x[⌊h⌋] + (x[⌊h⌋ + 1] − x[⌊h⌋])·g, or from the upper
    end, x[⌊h⌋ + 1] − (x[⌊h⌋ + 1] − x[⌊h⌋])·(1 − g), when g ≥ 1/2 (numpy.lib._function_base_impl._lerp). The order
    statistics come from a sort rather than NumPy's partition, which is slow on the many equal values of runs
    without failures (10,000 days: ~100 µs against ~15 µs); they are the same values either way.
    """
    ordered = np.sort(values)
    last = ordered.size - 1
    results = []
    for percent in percents:
        index = last * (percent / 100.0)
        below = last if index >= last else math.floor(index)
        lower, upper = float(ordered[below]), float(ordered[min(below + 1, last)])
        weight = index - below
        difference = upper - lower
        results.append(upper - difference * (1.0 - weight) if weight >= 0.5 else lower + difference * weight)
    return tuple(results)


def simulate_goodput(
    inputs: GoodputInputs, *, seed: int, trials: int = 10_000, window_days: float | None = None
) -> GoodputDistribution:
    """Return the distribution of days to completion over ``trials`` seeded runs of ``inputs``.

    Percentiles are NumPy's linear-interpolation percentiles of the simulated days (:func:`linear_percentiles`); the
    same ``seed`` gives the same figures. ``window_days``, when given, adds the share of runs finished inside it.
    """
    if window_days is not None:
        require_positive("window_days", window_days)
    wall, interruptions = sample_wall_time_s(inputs, trials, seed)
    days = wall / SECONDS_PER_DAY
    if np.isfinite(days).all():
        p50, p90, p99 = linear_percentiles(days, PERCENTILES)
        mean, failures_mean = float(days.mean()), float(interruptions.mean())
    else:
        p50 = p90 = p99 = mean = failures_mean = math.inf
    return GoodputDistribution(
        trials=trials,
        seed=seed,
        compute_days=inputs.compute_s / SECONDS_PER_DAY,
        failure_free_days=inputs.failure_free_s / SECONDS_PER_DAY,
        expected_days=daly_expected_wall_time_s(inputs) / SECONDS_PER_DAY,
        days_mean=mean,
        days_p50=p50,
        days_p90=p90,
        days_p99=p99,
        failures_mean=failures_mean,
        window_days=window_days,
        window_probability=None if window_days is None else window_probability(wall, window_days),
    )

"""Negative binomial draws by inverse transform of one uniform each, from a table of the distribution function.

NegativeBinomial(n, p) counts the failures before the n-th success of independent trials that succeed with
probability p: P(k) = C(n + k − 1, k)·p^n·(1 − p)^k, mean n(1 − p)/p, variance n(1 − p)/p². Its
probabilities follow the recurrence P(0) = p^n, P(k + 1) = P(k)·(n + k)/(k + 1)·(1 − p) (Johnson, Kemp &
Kotz, *Univariate Discrete Distributions*, 3rd ed., Wiley 2005, §5.1, the negative binomial pmf
recurrence), summed here in log space, from n·ln p, so that p^n may underflow a float (2,000 segments passed
with p = 0.5 start at 2^-2000). The table runs until the mass left beyond it is below TAIL_MASS of the
whole: past the mode the ratios P(k + 1)/P(k) = (n + k)/(k + 1)·(1 − p) fall with k, so the tail after
P(K) is at most P(K)·r/(1 − r) with r that ratio at K. A draw is then the number of table entries F(k) ≤ U
for one uniform U (the inverse of the distribution function F, renormalised to the table's mass; the law
differs from the exact one by less than TAIL_MASS in every probability).

Counts with a different n per trial (the failed restarts after each trial's failures) take one table row
per n from 0 to the largest, and every trial's uniform is looked up in its own row by one search over all
rows: U's 53 bits and the row's number make an integer key, and each row's F(k) the integer thresholds
ceil(F(k)·2^53) offset by the same row number, so that a key falls among its own row's thresholds and
compares there exactly as U with F(k) (NumPy's uniforms are multiples of 2^-53).

Work is bounded: a table of more than MAX_TABLE_CELLS entries (rows times length), or more than MAX_ROWS
rows, is not built, and the counts come from NumPy's own sampler instead (a gamma then a Poisson draw per
count, the same law; ``numpy.random.Generator.negative_binomial``).
"""

from __future__ import annotations

import math

import numpy as np

TAIL_MASS = 2.0**-53  # the mass a table may leave out, relative to its own
# Table entries (rows × length) beyond which NumPy's sampler draws instead: building and searching 16,384
# entries costs about what NumPy's gamma-Poisson draws of 10,000 counts cost.
MAX_TABLE_CELLS = 1 << 14
MAX_ROWS = (1 << 10) - 1  # rows r < 1023: keys and thresholds up to (r + 1)·2^53 stay below 2^63 (int64)
GUIDE_BUCKETS_PER_ENTRY = 8  # guide-table buckets per table entry: a draw searches with odds ≲ 1/8
_UNIT = float(1 << 53)  # NumPy's float64 uniforms are k·2^-53 for integers 0 ≤ k < 2^53


def _table_length(n_max: int, failure_per_success: float, p: float) -> int:
    """Return a first guess of the table length for NegativeBinomial(n_max, p): mean + (9 + 14·skewness) sd.

    The normal law leaves 2^-53 beyond 8.2 sd; the skewness (2 − p)/√(n(1 − p)) (Johnson, Kemp & Kotz §5.1)
    stretches the tail, to ≈ 37 means for the geometric law of a small p. The caller checks the guess.
    """
    mean = n_max * failure_per_success
    if mean == 0.0:
        return 2
    sd = math.sqrt(mean / p)
    skewness = (2.0 - p) / math.sqrt(mean * p)
    return int(min(mean + (9.0 + 14.0 * skewness) * sd + 8.0, float(MAX_TABLE_CELLS + 1)))


def _distribution_rows(n_values: np.ndarray, log_p: float, log_q: float, length: int) -> np.ndarray | None:
    """Return F(k) / F(length − 1) for k < ``length``, one row per n, or None when the tail left out is too heavy.

    Log pmf by the recurrence: ln P(0) = n·ln p, ln P(k + 1) = ln P(k) + ln((n + k)/(k + 1)) + ln(1 − p).
    """
    n = n_values.astype(np.float64)[:, None]
    k = np.arange(length - 1, dtype=np.float64)
    with np.errstate(divide="ignore"):  # n = 0: P(k ≥ 1) = 0, ln 0 = −inf
        steps = np.log1p((n - 1.0) / (k + 1.0))
    steps += log_q
    log_pmf = np.empty((n.shape[0], length))
    log_pmf[:, 0] = n[:, 0] * log_p
    np.cumsum(steps, axis=1, out=log_pmf[:, 1:])
    log_pmf[:, 1:] += log_pmf[:, :1]
    log_pmf -= log_pmf.max(axis=1, keepdims=True)
    weights = np.exp(log_pmf, out=log_pmf)
    cdf = np.cumsum(weights, axis=1)
    total = cdf[:, -1:]
    last_ratio = (n[:, 0] + (length - 1)) / length * math.exp(log_q)
    if (last_ratio >= 1.0).any():
        return None
    tail = weights[:, -1] * last_ratio / (1.0 - last_ratio)
    if (tail >= TAIL_MASS * total[:, 0]).any():
        return None
    cdf /= total
    return cdf


def _table(n_values: np.ndarray, log_p: float) -> np.ndarray | None:
    """Return the rows of F for NegativeBinomial(n, e^{log_p}), n in ``n_values``, or None past MAX_TABLE_CELLS."""
    p = math.exp(log_p)
    failure_per_success = math.expm1(min(-log_p, 700.0))  # (1 − p)/p without cancellation (or too many)
    log_q = math.log(-math.expm1(log_p))
    length = max(2, _table_length(int(n_values.max()), failure_per_success, p))
    while length * n_values.size <= MAX_TABLE_CELLS:
        rows = _distribution_rows(n_values, log_p, log_q, length)
        if rows is not None:
            return rows
        length *= 2
    return None


def _inverse_transform(rng: np.random.Generator, rows: np.ndarray, row_of: np.ndarray | None, size: int) -> np.ndarray:
    """Return, per draw, the number of entries F(k) ≤ U of its row of ``rows`` (row 0 when ``row_of`` is None).

    U is one uniform of ``rng`` per draw, as its integer u = U·2^53; row r's F(k) are the integer thresholds
    r·2^53 + ceil(F(k)·2^53). A guide table (Chen & Asau 1974, AIIE Trans. 6(2); Devroye 1986, *Non-Uniform
    Random Variate Generation*, §III.2.4) holds, for each of GUIDE_BUCKETS_PER_ENTRY·length buckets of u per
    row, the count of thresholds up to the bucket's start; a draw whose bucket holds no threshold reads its
    count there, and only the others search the thresholds (the same count either way).
    """
    count, length = rows.shape
    buckets = 1 << max(6, (GUIDE_BUCKETS_PER_ENTRY * length - 1).bit_length())
    shift = 53 - (buckets.bit_length() - 1)
    thresholds = np.ceil(rows * _UNIT).astype(np.int64)
    # Bucket j of row r starts at u = j·2^shift; a threshold t counts from bucket ceil(t / 2^shift) on.
    first_bucket = (thresholds + ((1 << shift) - 1)) >> shift
    if row_of is not None:
        offsets = np.arange(count, dtype=np.int64)[:, None]
        first_bucket += offsets * (buckets + 1)
    guide = np.cumsum(np.bincount(first_bucket.ravel(), minlength=count * (buckets + 1)))
    holds = guide[1:] != guide[:-1]  # bucket b holds a threshold: its count is not the one at its start
    uniforms = rng.random(size)
    # u >> shift is U·buckets rounded down: U·2^53 and U·buckets are exact (powers of two), so the bucket comes
    # from U directly, and only the draws that search need u itself.
    bucket = (uniforms * float(buckets)).astype(np.int64)
    if row_of is not None:
        bucket += row_of * (buckets + 1)
    # guide[b]: the thresholds ≤ the start of bucket b, those of the rows before it included (all of them).
    found = guide[bucket]
    unsure = np.flatnonzero(holds[bucket])
    if unsure.size:
        keys = (uniforms[unsure] * _UNIT).astype(np.int64)
        if row_of is not None:  # the rows laid end to end: row r's keys and thresholds offset by r·2^53
            keys += row_of[unsure] << 53
            thresholds += offsets << 53
        found[unsure] = np.searchsorted(thresholds.ravel(), keys, side="right")
    if row_of is not None:
        found -= row_of * length
    return found


def negative_binomial(rng: np.random.Generator, n: int, log_p: float, size: int) -> np.ndarray:
    """Return ``size`` draws of NegativeBinomial(n, p = e^{log_p}) (failures before n successes), as int64.

    ``log_p`` < 0 is given rather than p so that 1 − p keeps its digits when p is near 1. One uniform per
    draw from ``rng``, inverted through the table of F; NumPy's sampler past MAX_TABLE_CELLS.
    """
    if n == 0 or log_p == 0.0:
        return np.zeros(size, dtype=np.int64)
    rows = _table(np.array([n], dtype=np.int64), log_p)
    if rows is None:
        return rng.negative_binomial(n, math.exp(log_p), size=size).astype(np.int64, copy=False)
    return _inverse_transform(rng, rows, None, size)


def negative_binomial_per_trial(rng: np.random.Generator, n: np.ndarray, log_p: float) -> np.ndarray:
    """Return one draw of NegativeBinomial(n[i], e^{log_p}) per entry of ``n`` (int64, ≥ 0), as int64.

    One uniform per entry, inverted through its own row of the table (rows n = 0 … max n; n = 0 draws 0).
    NumPy's sampler, for the entries with n > 0, past MAX_ROWS rows or MAX_TABLE_CELLS entries.
    """
    n_max = int(n.max()) if n.size else 0
    if n_max == 0 or log_p == 0.0:
        return np.zeros(n.shape, dtype=np.int64)
    rows = _table(np.arange(n_max + 1, dtype=np.int64), log_p) if n_max < MAX_ROWS else None
    if rows is None:
        draws = np.zeros(n.shape, dtype=np.int64)
        some = np.flatnonzero(n > 0)
        draws[some] = rng.negative_binomial(n[some], math.exp(log_p))
        return draws
    return _inverse_transform(rng, rows, n, n.size)

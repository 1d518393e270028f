"""The two bisections the memory searches run, over a predicate that is true on one side of a threshold.

Pure: each takes the predicate and the bounds and asks the predicate at the same points, in the same order,
whatever it answers, so that a faster predicate changes nothing but the time.
"""

from __future__ import annotations

from collections.abc import Callable


def fewest_fitting(fits: Callable[[int], bool], high: int) -> int | None:
    """Returns the least n in 1..``high`` with ``fits(n)`` by bisection from (0, high]; None unless ``fits(high)``.

    Asks ``high`` first, then the midpoints of (low, high] where low does not fit and high does; when the
    predicate is monotone (false below a threshold, true from it) that is the threshold.
    """
    if not fits(high):
        return None
    low = 0  # invariant: low does not fit (0 GPUs), high does
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle
    return high


def most_fitting(fits: Callable[[int], bool | None], limit: int) -> int | None:
    """Returns the largest n in 1..``limit`` with ``fits(n)``: 0 when 1 does not fit, None when ``fits(1)`` is None.

    Asks 1, then ``limit`` (at least 1), then the midpoints of [low, high) where low fits and high does not.
    """
    first = fits(1)
    if first is None:
        return None
    if not first:
        return 0
    low, high = 1, max(1, limit)
    if fits(high):
        return high
    while high - low > 1:  # invariant: low fits, high does not
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low

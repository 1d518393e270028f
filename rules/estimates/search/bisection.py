"""The bisections the memory searches run, over a predicate that is true on one side of a threshold.

:func:`most_fitting` for the micro-batch; :func:`fewest_fitting_by_class` for the GPU count, whose predicate is
monotone only among counts of one class (rules/estimates/search/fitting_counts.py); :func:`fewest_fitting`, the plain
bisection, where it is monotone over all (the GPU-count search before the classes; no search calls it now, the
tests hold the searches against it). All three narrow their bounds by one midpoint bisection. Pure: each takes
the predicate and the bounds and asks the predicate at points that depend only on its answers, so that a
faster predicate changes nothing but the time.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable


def fewest_fitting(fits: Callable[[int], bool], high: int) -> int | None:
    """Returns the least n in 1..``high`` with ``fits(n)`` by bisection from (0, high]; None unless ``fits(high)``.

    Asks ``high`` first, then the midpoints of (low, high] where low does not fit and high does; when the
    predicate is monotone (false below a threshold, true from it) that is the threshold.
    """
    if not fits(high):
        return None
    return _narrow(fits, high, 0)  # 0 GPUs do not fit


def most_fitting(fits: Callable[[int], bool | None], limit: int) -> int | None:
    """Returns the largest n in 1..``limit`` with ``fits(n)``: 0 when 1 does not fit, None when ``fits(1)`` is None.

    Asks 1, then ``limit`` (at least 1), then the midpoints of [low, high) where low fits and high does not.
    """
    first = fits(1)
    if first is None:
        return None
    if not first:
        return 0
    high = max(1, limit)
    if fits(high):
        return high
    return _narrow(fits, 1, high)


def _narrow(fits: Callable[[int], bool | None], fitting: int, failing: int) -> int:
    """Returns the fitting end once ``fitting`` (which fits) and ``failing`` (which does not) are adjacent.

    Asks the midpoint (fitting + failing) // 2 and moves the end whose answer it shares, on either side of
    the other: the one bisection each search runs once its bounds are known.
    """
    while abs(fitting - failing) > 1:
        middle = (fitting + failing) // 2
        if fits(middle):
            fitting = middle
        else:
            failing = middle
    return fitting


def fewest_fitting_by_class(fits: Callable[[int], bool], high: int, key: Callable[[int], Hashable], prefix: int,
                            period: int) -> int | None:
    """Returns the least n in 1..``high`` with ``fits(n)``, None when none fits, where ``fits`` is monotone
    (false below a threshold, true from it) only among the counts that share ``key(n)``, and ``key`` is
    periodic beyond ``prefix``: key(n) == key(n + ``period``) for every n > prefix.

    The counts 1..prefix are grouped by key; those beyond by their offset in the first period after prefix
    (the offsets of one key, and so every count of that class, found by asking ``key`` of one period). Each
    class, prefix classes first, is bisected among its members below the least fitting count found so far:
    its largest such member first (none fits if it does not), then midpoints, as :func:`fewest_fitting` does
    over 1..high. The least answer of all classes is the least fitting count: every count is in one class.
    """
    top = max(0, min(prefix, high))
    classes: list[tuple[list[int], int, int]] = []  # (sorted first members, period, members up to high)
    for first, last, step in ((1, top, 0), (top + 1, min(top + period, high), period)):
        grouped: dict[Hashable, list[int]] = {}
        for n in range(first, last + 1):
            grouped.setdefault(key(n), []).append(n)
        for offsets in grouped.values():
            count = sum((high - offset) // step + 1 for offset in offsets) if step else len(offsets)
            classes.append((offsets, step, count))
    best: int | None = None
    for offsets, step, count in classes:
        def member(index: int, offsets: list[int] = offsets, step: int = step) -> int:
            return offsets[index % len(offsets)] + (index // len(offsets)) * step
        below = count if best is None else bisect_left(range(count), best, key=member)  # members below best
        found = _least_fitting_member(fits, member, below)
        if found is not None:
            best = found
    return best


def _least_fitting_member(fits: Callable[[int], bool], member: Callable[[int], int], count: int) -> int | None:
    """Returns the least of the first ``count`` members that fits, by bisection; None unless the last fits."""
    if count == 0 or not fits(member(count - 1)):
        return None
    # Over the members' indices, as fewest_fitting over counts: index -1 (none before the first) does not fit.
    return member(_narrow(lambda index: fits(member(index)), count - 1, -1))

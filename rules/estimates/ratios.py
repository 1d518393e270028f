"""The two ratios the checks compare with policy thresholds: a share of a whole, and what a need leaves spare."""

from __future__ import annotations


def fraction_of(part: float, whole: float) -> float:
    """Returns part / whole, 0 when whole is 0 (e.g. expected days as a share of the completion window)."""
    return part / whole if whole else 0.0


def spare_fraction(need: float, available: float) -> float:
    """Returns the share of ``available`` left after ``need``: 1 − need / available (negative when need exceeds it).

    -1 when nothing is available, so that a rule "spare below its headroom" fires rather than divides by zero.
    """
    return 1 - need / available if available > 0 else -1.0

"""Tests for rules.estimates.ratios: the shares the checks compare with policy thresholds."""

from rules.estimates.ratios import fraction_of, spare_fraction


def test_fraction_of_a_window_and_of_nothing():
    # 21.3 expected days of a 30-day window is 71 %; a share of nothing is 0, not a division error.
    assert fraction_of(21.3, 30) == 21.3 / 30
    assert fraction_of(5, 0) == 0.0


def test_spare_fraction_of_usable_memory():
    # 32 GiB needed of 71.7 GiB usable leaves 1 − 32/71.7 = 55.4 % spare; a need above it is negative.
    assert spare_fraction(32, 71.7) == 1 - 32 / 71.7
    assert spare_fraction(90, 72) == 1 - 90 / 72 < 0
    assert spare_fraction(1, 0) == -1.0

"""The argument checks of rules/estimates/_args.py: their fast paths accept and refuse exactly what the general
tests do (a finite int or float that is not a bool, in range)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rules.errors import InconsistentInput
from rules.estimates import _args

VALUES = [0, 1, -1, 2, 10**300, -(10**300), 1 << 1000, 10**400, -(10**400), 0.0, -0.0, 0.5, 1.0, 1.5, -2.5,
          5e-324, 1.7976931348623157e308, -1.7976931348623157e308, math.inf, -math.inf, math.nan, True, False,
          np.float64(0.5), np.int64(3), "1", None]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


REFERENCE = {
    "require_positive": lambda v: _number(v) and v > 0,
    "require_non_negative": lambda v: _number(v) and v >= 0,
    "require_fraction": lambda v: _number(v) and 0 < v <= 1,
    "require_unit_interval": lambda v: _number(v) and 0 <= v <= 1,
    "require_positive_int": lambda v: _integer(v) and v >= 1,
    "require_non_negative_int": lambda v: _integer(v) and v >= 0,
}


def _outcome(check, value: object) -> object:
    try:
        return check(value)
    except OverflowError:  # math.isfinite of an int beyond a float's range, in the general test too
        return OverflowError


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_is_number_agrees_with_the_general_test(value: object) -> None:
    assert _outcome(_args.is_number, value) == _outcome(_number, value)


@pytest.mark.parametrize("name", sorted(REFERENCE))
@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_each_check_accepts_exactly_what_the_general_test_accepts(name: str, value: object) -> None:
    expected = _outcome(REFERENCE[name], value)

    def accepted(v: object) -> bool:
        try:
            getattr(_args, name)("x", v)
        except InconsistentInput:
            return False
        return True

    assert _outcome(accepted, value) == expected
    if name == "require_positive_int":
        assert _outcome(lambda v: _accepts_ints(x=v), value) == expected


def _accepts_ints(**values: object) -> bool:
    try:
        _args.require_positive_ints(**values)
    except InconsistentInput:
        return False
    return True

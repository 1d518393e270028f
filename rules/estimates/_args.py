"""Argument validation shared by the estimators.

Every estimator rejects out-of-range arguments with an InconsistentInput (a ValueError) whose message names
the argument, the value it got and what was expected, so that valid inputs can never produce NaN or negative
outputs, and so that an evaluation can tell a refused input from a defect.
``bool`` is never accepted as a number (``True`` is an ``int`` in Python).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Collection
from typing import Any

from rules.errors import InconsistentInput

# The checks below take a fast path for a plain float or int (the estimators see millions of them) and fall
# back to the general test for anything else; an int beyond _SMALL_INT goes the general way, as before.
_FLOAT_MAX = sys.float_info.max
_SMALL_INT = 1 << 1000


def is_number(value: object) -> bool:
    """Return True for a finite int or float that is not a bool; never raises."""
    kind = type(value)
    if kind is float:
        return -_FLOAT_MAX <= value <= _FLOAT_MAX  # False for NaN and the infinities
    if kind is int and -_SMALL_INT < value < _SMALL_INT:
        return True
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: object) -> bool:
    """Return True for an int that is not a bool; never raises."""
    return isinstance(value, int) and not isinstance(value, bool)


def require_positive(name: str, value: float) -> None:
    """Raise InconsistentInput unless ``value`` is a finite number > 0."""
    kind = type(value)
    if (kind is float and 0.0 < value <= _FLOAT_MAX) or (kind is int and 0 < value < _SMALL_INT):
        return
    if not is_number(value) or value <= 0:
        raise InconsistentInput(f"{name} must be a positive finite number, got {value!r}")


def require_non_negative(name: str, value: float) -> None:
    """Raise InconsistentInput unless ``value`` is a finite number >= 0."""
    kind = type(value)
    if (kind is float and 0.0 <= value <= _FLOAT_MAX) or (kind is int and 0 <= value < _SMALL_INT):
        return
    if not is_number(value) or value < 0:
        raise InconsistentInput(f"{name} must be a non-negative finite number, got {value!r}")


def require_fraction(name: str, value: float) -> None:
    """Raise InconsistentInput unless ``value`` is a finite number in (0, 1]."""
    if type(value) is float and 0.0 < value <= 1.0:
        return
    if not is_number(value) or not 0 < value <= 1:
        raise InconsistentInput(f"{name} must be in (0, 1], got {value!r}")


def require_unit_interval(name: str, value: float) -> None:
    """Raise InconsistentInput unless ``value`` is a finite number in [0, 1]."""
    if not is_number(value) or not 0 <= value <= 1:
        raise InconsistentInput(f"{name} must be in [0, 1], got {value!r}")


def require_positive_int(name: str, value: int) -> None:
    """Raise InconsistentInput unless ``value`` is an int (not a bool) >= 1."""
    if type(value) is int and value >= 1:
        return
    if not _is_int(value) or value < 1:
        raise InconsistentInput(f"{name} must be an integer >= 1, got {value!r}")


def require_positive_ints(**values: int) -> None:
    """Raise InconsistentInput, as :func:`require_positive_int`, for the first keyword argument not an int >= 1."""
    for name, value in values.items():
        if type(value) is not int or value < 1:
            require_positive_int(name, value)


def require_non_negative_int(name: str, value: int) -> None:
    """Raise InconsistentInput unless ``value`` is an int (not a bool) >= 0."""
    if type(value) is int and value >= 0:
        return
    if not _is_int(value) or value < 0:
        raise InconsistentInput(f"{name} must be an integer >= 0, got {value!r}")


def require_bool(name: str, value: bool) -> None:
    """Raise InconsistentInput unless ``value`` is True or False."""
    if not isinstance(value, bool):
        raise InconsistentInput(f"{name} must be True or False, got {value!r}")


def require_at_most(name: str, value: float, limit_name: str, limit: float) -> None:
    """Raise InconsistentInput when ``value`` exceeds ``limit`` (another argument, named ``limit_name``)."""
    if value > limit:
        raise InconsistentInput(f"{name} ({value!r}) exceeds {limit_name} ({limit!r})")


def require_choice(name: str, value: Any, allowed: Collection[Any], *, ignore_case: bool = False) -> Any:
    """Return ``value`` (lower-cased if ``ignore_case`` and a str); raise InconsistentInput unless in ``allowed``."""
    key = value.lower() if ignore_case and isinstance(value, str) else value
    if key not in allowed:
        raise InconsistentInput(f"unknown {name} {value!r}; allowed: {', '.join(map(str, allowed))}")
    return key

"""schemas.canonical_json writes what the rfc8785 package writes, byte for byte, or raises what it raises."""

from __future__ import annotations

import json
import math
import struct
from datetime import UTC, datetime
from enum import IntEnum, StrEnum
from pathlib import Path

import pytest
import rfc8785
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rules.evaluate import evaluate
from schemas.canonical_json import canonical_json, canonical_json_with, digest_of, placeholder

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.json"))


def _same(value: object) -> None:
    try:
        expected = rfc8785.dumps(value)
    except Exception as error:  # noqa: BLE001 - whatever the package raises, the fast path raises too
        with pytest.raises(type(error)):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


def _doubles() -> st.SearchStrategy[float]:
    """Every kind of double: any bit pattern, integral ones around 2^53 and 1e21, tiny and huge magnitudes."""
    bits = st.integers(0, 2**64 - 1).map(lambda n: struct.unpack("<d", n.to_bytes(8, "little"))[0])
    return st.one_of(bits, st.floats(), st.integers(-(2**70), 2**70).map(float),
                     st.builds(lambda m, e: m * 10.0**e, st.floats(-10, 10), st.integers(-12, 25)))


_KEYS = st.text(alphabet=st.characters(codec="utf-16", exclude_categories=["Cs"]) | st.sampled_from(
    ["\ue000", "\uffff", "\U0001f600", "\U00010000", "é", "\x00", "\x1f", '"', "\\"]), max_size=6)
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**60), 2**60), _doubles(),
                     st.text(max_size=12), st.sampled_from(["\u2028", "\x7f", "\ud800", "a\nb\tc\x01"]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(_KEYS, inner, max_size=4)), max_leaves=30)


@settings(max_examples=1500, deadline=None)
@given(_VALUES)
def test_any_json_value_is_written_as_rfc8785_writes_it(value):
    _same(value)


@settings(max_examples=3000, deadline=None)
@given(_doubles())
def test_every_double_is_written_as_ecmascript_writes_it(value):
    _same(value)
    _same([value, {"x": -value}])


@pytest.mark.parametrize("value", [
    0.0, -0.0, 5.0, -5.0, 0.5, 1e-4, 9.99e-5, 1e-7, 123456.789, 2.0**53 - 1, 2.0**53, 2.0**53 + 2, 1e16, 1e20,
    1.2345e17, 1e21, 7.31620122624e23, 1.7976931348623157e308, 5e-324, math.inf, -math.inf, math.nan,
    2**53 - 1, -(2**53 - 1), 2**53, 10**30, True, False, None, "", [], {}, (), {"b": 1, "a": [1, (2, 3)]},
    {"\ue000": 1, "\U0001f600": 2}, {"é": 1, "e": 2, "z": 3}, "\ud83d", {"\ud83d": 1}, {1: "int key"},
    object(), {"a": {1, 2}}, b"bytes",
])
def test_edge_values_are_written_or_refused_as_rfc8785_does(value):
    _same(value)


class _Colour(StrEnum):
    RED = "red"


class _Size(IntEnum):
    BIG = 7


class _Mapping(dict):
    def __missing__(self, key: str) -> None:
        raise KeyError(key)


def test_enum_members_and_dict_subclasses_are_written_as_the_values_they_hold():
    value = {"colour": _Colour.RED, "size": _Size.BIG, "nested": _Mapping(b=1, a=2), "list": [_Colour.RED]}
    _same(value)
    assert canonical_json(value) == b'{"colour":"red","list":["red"],"nested":{"a":2,"b":1},"size":7}'


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_and_its_record_hash_as_with_rfc8785(path):
    document = json.loads(path.read_text())
    record = evaluate(document, now=datetime(2026, 1, 1, tzinfo=UTC))
    for value in (document, record):
        assert canonical_json(value) == rfc8785.dumps(value)
    assert digest_of(document) == record["submission"]["digest"]


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=4), st.lists(_VALUES, max_size=4))
def test_spliced_parts_give_the_bytes_of_the_whole_value(members, parts):
    try:
        canonical = [canonical_json(part) for part in parts]
    except ValueError:
        assume(False)
    template = {**members, "parts": [placeholder(index) for index in range(len(parts))]}
    try:
        expected = canonical_json({**members, "parts": parts})
    except ValueError:
        with pytest.raises(ValueError):
            canonical_json_with(template, canonical)
        return
    assert canonical_json_with(template, canonical) == expected


def test_a_placeholder_held_by_a_string_of_the_value_is_refused():
    part = canonical_json({"a": 1.0})
    assert canonical_json_with({"x": placeholder(0), "y": "\x00"}, [part]) == b'{"x":{"a":1},"y":"\\u0000"}'
    assert canonical_json_with({"x": placeholder(0), "y": [placeholder(0)]}, [part]) is None
    assert canonical_json_with({"x": placeholder(0), "y": '"' + placeholder(0)}, [part]) is None
    # A part is spliced in as it is, placeholders and all.
    assert canonical_json_with({"x": placeholder(0), "y": placeholder(1)}, [canonical_json(placeholder(1)), part]) \
        == canonical_json({"x": placeholder(1), "y": {"a": 1.0}})

"""jsonschema-rs (the fast path for valid documents) gives jsonschema's answer on every document we have.

schemas.validate lets jsonschema-rs say "valid" and jsonschema find and word every problem; that is sound
only when whatever jsonschema-rs accepts, jsonschema accepts too. Held here on every example, base and
fixture (the same answer both ways), the records of the examples, the bundled policy and catalogue, and on
mutations of the examples aimed at where the two differ (formats, patterns, numbers, Python-only values).
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from checks.fixture_support import base_paths, fixture_paths, load_fixture
from hypothesis import given, settings
from hypothesis import strategies as st

import schemas
from rules.catalogue import load_catalogue
from rules.evaluate import evaluate
from rules.policy import default_policy

jsonschema_rs = pytest.importorskip("jsonschema_rs")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.json"))


def _answers(name: str, document: Any) -> tuple[bool, bool]:
    """Returns (jsonschema-rs says valid, jsonschema says valid) for ``document`` under schema ``name``."""
    return schemas._fast_says_valid(name, document), schemas.validate(name, document, fast=False) == []


def _documents() -> list[tuple[str, str, Any]]:
    found = [(f"example {p.name}", "submission", json.loads(p.read_text())) for p in EXAMPLES]
    found += [(f"base {p.name}", "submission", json.loads(p.read_text())) for p in base_paths()]
    found += [(f"fixture {p.parent.name}/{p.name}", "submission", load_fixture(p)) for p in fixture_paths()]
    found.append(("the bundled policy", "policy", default_policy().document))
    found.append(("the bundled catalogue", "catalogue", load_catalogue().document))
    return found


@pytest.mark.parametrize(("label", "name", "document"), _documents(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_document_we_ship_gets_the_same_answer_on_both_paths(label, name, document):
    fast, full = _answers(name, document)
    assert fast == full, f"{label}: jsonschema-rs says {fast}, jsonschema says {full}"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_record_of_every_example_gets_the_same_answer_on_both_paths(path):
    record = evaluate(json.loads(path.read_text()), now=datetime(2026, 1, 1, tzinfo=UTC))
    record = json.loads(json.dumps(record))  # as stored and read back
    assert _answers("record", record) == (True, True)


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    """Returns the path of every member and item of ``value``, containers included."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _replaced(document: Any, path: tuple, value: Any) -> Any:
    changed = copy.deepcopy(document)
    if not path:
        return value
    parent = changed
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return changed


# Values where Python's jsonschema and jsonschema-rs might part: formats (year 0000, week dates, a trailing
# newline), the pattern of a currency code ($ before a final newline in Python's re), integral doubles,
# booleans for numbers, NaN and huge numbers, tuples, enum members, empty and oversized containers.
_AWKWARD = st.sampled_from([
    "0000-01-01", "2024-02-29", "2023-02-29", "2024-W01-1", "20240101", "2024-01-01\n", "2024-01-01T00:00:00Z",
    "EUR", "EUR\n", "eur", "EU", "E\u0301UR", "", "x" * 70, 0, -1, 1.0, 1.5, -0.0, 2**53, 10**30, float("nan"),
    float("inf"), 1e308, True, False, None, [], {}, (1, 2), ("a",), [None], {"unknown": 1},
])
_VALUES = st.one_of(_AWKWARD, st.integers(-10, 10**6), st.floats(allow_nan=False), st.text(max_size=8),
                    st.lists(st.integers(0, 3), max_size=3))


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(EXAMPLES), st.data())
def test_what_jsonschema_rs_accepts_jsonschema_accepts_too(example, data):
    document = json.loads(example.read_text())
    path = data.draw(st.sampled_from(_paths(document)))
    mutated = _replaced(document, path, data.draw(_VALUES))

    fast, full = _answers("submission", mutated)

    assert full or not fast, f"jsonschema-rs accepts what jsonschema refuses at {path}"
    assert schemas.is_valid("submission", mutated) == full


def test_a_date_jsonschema_refuses_is_refused_although_rfc3339_allows_it():
    # jsonschema-rs alone takes year 0000; the FormatChecker it is given (jsonschema's) does not.
    document = json.loads(EXAMPLES[0].read_text())
    document["quote"]["issued"] = "0000-01-01"
    assert _answers("submission", document)[1] is False
    assert schemas.validate("submission", document)

"""Property: whatever single value of a signed record changes, verification fails and names both digests."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.record import SigningKeys, record_digest, sign_record, verify_record


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, (*path, key))]
    if isinstance(value, list):
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, (*path, i))]
    return [path]


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 + 1  # + 1 alone is lost on a float above 2**53
    if isinstance(value, str):
        return value + "x"
    return 0  # None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pick=st.integers(min_value=0))
def test_any_changed_leaf_is_detected(approved: dict[str, Any], keys: SigningKeys, pick: int) -> None:
    envelope = sign_record(approved, keys)
    leaves = _leaves(approved)
    path = leaves[pick % len(leaves)]
    tampered = copy.deepcopy(envelope)
    parent = tampered["record"]
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = _changed(parent[path[-1]])

    result = verify_record(tampered, keys.trusted())

    assert not result.ok
    assert result.reasons == [f"record digest {record_digest(tampered['record'])} does not match signed digest "
                              f"{envelope['signature']['record_digest']}"]

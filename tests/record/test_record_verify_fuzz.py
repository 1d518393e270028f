"""Fuzzed records and PDFs: verification ends valid, invalid with reasons, or unreadable; it never raises.

Each case starts from a record the service signed (the JSON envelope, or the signed PDF) and damages it the
ways files are damaged in transit or by hand: truncated, bits flipped, bytes inserted, a member replaced by
any JSON value. ``verify_document`` must return a Verification or raise UnreadableDocument; the CLI must
exit 0, 1 or 2 without a traceback; the endpoint (tests/api) answers 200 or 422.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.cli import main as quotecheck
from service.record import SigningKeys, UnreadableDocument, sign_record
from service.record.verify import verify_document

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)


def damaged(data: bytes, draw: Any) -> bytes:
    """Returns ``data`` truncated, with bits flipped, or with bytes inserted (chosen by ``draw``)."""
    kind = draw(st.sampled_from(["truncate", "flip", "insert", "flip-and-truncate"]))
    if kind in ("truncate", "flip-and-truncate"):
        data = data[:draw(st.integers(min_value=0, max_value=len(data) - 1))]
    if kind in ("flip", "flip-and-truncate") and data:
        mutable = bytearray(data)
        for _ in range(draw(st.integers(min_value=1, max_value=16))):
            position = draw(st.integers(min_value=0, max_value=len(mutable) - 1))
            mutable[position] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        data = bytes(mutable)
    if kind == "insert":
        position = draw(st.integers(min_value=0, max_value=len(data)))
        data = data[:position] + draw(st.binary(min_size=1, max_size=64)) + data[position:]
    return data


def replaced_member(envelope: dict[str, Any], draw: Any) -> dict[str, Any]:
    """Returns ``envelope`` with one member, anywhere in it, replaced by any JSON value."""
    tampered = copy.deepcopy(envelope)
    containers = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            containers.extend((node, key) for key in node)
            for item in node.values():
                walk(item)
        elif isinstance(node, list):
            containers.extend((node, index) for index in range(len(node)))
            for item in node:
                walk(item)

    walk(tampered)
    parent, key = draw(st.sampled_from(containers))
    parent[key] = draw(JSON_VALUES)
    return tampered


def assert_ends_cleanly(data: bytes, keys: SigningKeys) -> None:
    try:
        result = verify_document(data, keys.trusted())
    except UnreadableDocument:
        return
    assert isinstance(result.ok, bool)
    assert result.ok or result.all_reasons(), "an invalid document must say why"
    json.dumps(result.as_dict())  # what the endpoint and --format json print


@pytest.fixture(scope="module")
def envelope(approved: dict[str, Any], instance_keys: SigningKeys) -> dict[str, Any]:
    return sign_record(approved, instance_keys)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_json_records_verify_or_are_refused(envelope: dict[str, Any], instance_keys: SigningKeys,
                                                   data: st.DataObject) -> None:
    raw = json.dumps(envelope).encode()
    assert_ends_cleanly(damaged(raw, data.draw), instance_keys)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_records_with_any_member_replaced_verify_invalid(envelope: dict[str, Any], instance_keys: SigningKeys,
                                                        data: st.DataObject) -> None:
    tampered = replaced_member(envelope, data.draw)
    raw = json.dumps(tampered).encode()
    assert_ends_cleanly(raw, instance_keys)
    if tampered != envelope:
        assert not verify_document(raw, instance_keys.trusted()).ok


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_pdfs_verify_or_are_refused(signed_pdf: bytes, instance_keys: SigningKeys,
                                           data: st.DataObject) -> None:
    assert_ends_cleanly(damaged(signed_pdf, data.draw), instance_keys)


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9, 0.999])
def test_the_cli_reports_a_truncated_pdf_without_a_traceback(signed_pdf: bytes, instance: Path, tmp_path: Path,
                                                             cut: float) -> None:
    path = tmp_path / "record.pdf"
    path.write_bytes(signed_pdf[:int(len(signed_pdf) * cut)])
    result = CliRunner().invoke(quotecheck, ["verify", str(path), "--instance", str(instance)])
    assert result.exit_code in (1, 2), result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output


@pytest.mark.parametrize("member", ["record", "signature", "decisions", "checks", "submission", "verdict"])
@pytest.mark.parametrize("value", [None, [], {}, "x", 1e308, [[[]]], {"-1": 0}], ids=repr)
def test_the_cli_reports_a_record_of_the_wrong_shape_as_invalid(envelope: dict[str, Any], instance: Path,
                                                                tmp_path: Path, member: str, value: Any) -> None:
    tampered = copy.deepcopy(envelope)
    (tampered if member in tampered else tampered["record"])[member] = value
    path = tmp_path / "record.json"
    path.write_text(json.dumps(tampered))
    for fmt in ("text", "json"):
        result = CliRunner().invoke(quotecheck, ["verify", str(path), "--instance", str(instance), "--format", fmt])
        assert result.exit_code == 1, result.output
        assert isinstance(result.exception, SystemExit | None), result.exception

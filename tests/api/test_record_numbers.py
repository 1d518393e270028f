"""Numbers in a signed record survive being served and read back by readers that take every number as a double.

I-JSON (RFC 7493) and JavaScript's JSON.parse read every JSON number as an IEEE 754 double, so a record whose
evidence holds 9.11068987392e20 comes back from ``911068987392000000000`` as a double in JavaScript and as an
int in Python. Whatever the service signs must verify after either reading, and must not verify once any one
of its numbers is changed.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import subprocess
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from api_support import Caller, url, waive_all
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.persistence.db import get_db
from service.persistence.models import Record
from service.record import TrustedKeys
from service.record.verify import verify_json

# Doubles over the whole range, with the regions readers disagree on weighted in: subnormals, integral values
# at and beyond 2^53 (exact as doubles, not as I-JSON integers), and 1e20-1e22, where ECMAScript's number
# formatting switches from plain digits to an exponent at 1e21.
DOUBLES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e-307, max_value=1e-307, allow_nan=False),
    st.integers(min_value=2**53 - 4, max_value=2**64).map(float),
    st.integers(min_value=-(2**70), max_value=-(2**53)).map(float),
    st.floats(min_value=1e20, max_value=1e22),
    st.floats(min_value=-1e22, max_value=-1e20),
    st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e21,
                     999999999999999999999.0, 2.0**53, 2.0**53 + 2, 911068987392000000000.0]),
)
# Numbers placed where evaluations put theirs: a check's evidence, nested lists and objects included.
EVIDENCE = st.dictionaries(st.from_regex(r"[a-z_]{1,12}_(gib|flops|s|w)", fullmatch=True),
                           st.one_of(DOUBLES, st.lists(DOUBLES, min_size=1, max_size=4),
                                     st.dictionaries(st.sampled_from(["value", "low", "high"]), DOUBLES, min_size=1)),
                           min_size=1, max_size=6)


def read_as_doubles(body: bytes) -> Any:
    """The reader of a JavaScript client: every number a double (RFC 7493 §2.2)."""
    return json.loads(body, parse_int=float, parse_float=float)


def number_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in number_paths(item, (*path, key))]
    if isinstance(value, list):
        return [leaf for index, item in enumerate(value) for leaf in number_paths(item, (*path, index))]
    return [path] if isinstance(value, int | float) and not isinstance(value, bool) else []


def another_double(value: float) -> float:
    """Returns the next double away from ``value``: a different JSON number (-0 and 0 are one number)."""
    changed = math.nextafter(value, math.inf if value < 1e308 else -math.inf)
    return changed if changed != value else math.nextafter(value, -math.inf)


@pytest.fixture
def final_record(as_role: Callable[..., Caller], submitted: tuple[Caller, dict[str, Any]]) -> tuple[Caller, Record]:
    """An approver and the final record of a quote approved over HTTP."""
    _, view = submitted
    view = waive_all(as_role("reviewer"), view)
    approver = as_role("approver")
    decided = approver.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"])
    assert decided.status_code == 201, decided.get_json()
    with get_db(approver.app).session() as session:
        record = session.get(Record, decided.get_json()["final_record_id"])
        session.expunge(record)
    return approver, record


def issue_with(app: Flask, final: Record, evidence: dict[str, Any]) -> str:
    """Stores a final record like ``final`` whose first check carries ``evidence``, unsigned: the service signs it
    when it is first read, as it does for records issued before signing existed. Returns its id."""
    document = copy.deepcopy(final.document)
    document["checks"][0]["evidence"].update(evidence)
    record_id = str(uuid.uuid4())
    with get_db(app).session() as session:
        session.add(Record(id=record_id, submission_id=final.submission_id, evaluation_id=final.evaluation_id,
                           kind="final", document=document, digest="sha256:" + "0" * 64,
                           created_at=final.created_at))
        session.commit()
    return record_id


def served_keys(client: Any) -> TrustedKeys:
    return TrustedKeys.from_pem(client.get("/api/v1/keys").get_json()["keys"][0]["certificate_pem"].encode())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(evidence=EVIDENCE, pick=st.integers(min_value=0))
def test_served_records_verify_when_read_as_doubles_and_fail_when_one_number_changes(
        final_record: tuple[Caller, Record], evidence: dict[str, Any], pick: int) -> None:
    # Given a record whose evidence holds numbers from the whole double range, signed and served by the API
    approver, final = final_record
    record_id = issue_with(approver.app, final, evidence)
    response = approver.get(f"/api/v1/records/{record_id}.json")
    assert response.status_code == 200 and response.headers["Record-Status"] == "signed"
    trusted = served_keys(approver.app.test_client())

    # When it is read back by a reader that takes every number as a double, Then it verifies
    envelope = read_as_doubles(response.data)
    result = verify_json(envelope, trusted)
    assert result.ok, result.reasons
    # and so it does read by Python's own json (big integers as ints) and through the verify endpoint
    assert verify_json(json.loads(response.data), trusted).ok
    checked = approver.app.test_client().post("/api/v1/records/verify", data=response.data)
    assert checked.status_code == 200 and checked.get_json()["ok"] is True

    # When any one of its numbers is changed to another double, Then it no longer verifies
    paths = number_paths(envelope["record"])
    path = paths[pick % len(paths)]
    parent = envelope["record"]
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = another_double(float(parent[path[-1]]))
    changed = verify_json(envelope, trusted)
    assert not changed.ok
    assert any("does not match signed digest" in reason for reason in changed.reasons), changed.reasons


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed; the Python double reader "
                                                          "above stands in for JavaScript's JSON.parse")
def test_a_record_read_and_written_by_javascript_still_verifies(final_record: tuple[Caller, Record], tmp_path):
    # Given a served record holding the numbers where JSON writers differ most
    approver, final = final_record
    evidence = {"hardware_flops": 911068987392000000000.0, "tiny_s": 5e-324, "big_w": 1.7976931348623157e308,
                "exact_flops": 2.0**53 + 2, "negative_gib": -1e21, "zero_s": -0.0, "plain_gib": 71.7,
                "series_flops": [1e20, 1e21, 1e22, 123456789012345680000.0]}
    record_id = issue_with(approver.app, final, evidence)
    served = tmp_path / "record.json"
    served.write_bytes(approver.get(f"/api/v1/records/{record_id}.json").data)

    # When a JavaScript program parses it and writes it out again (as a browser or Node.js client saves it)
    rewritten = tmp_path / "rewritten.json"
    subprocess.run(["node", "-e", "const fs = require('fs');"
                    "fs.writeFileSync(process.argv[2], JSON.stringify(JSON.parse(fs.readFileSync(process.argv[1], "
                    "'utf8')), null, 2));", str(served), str(rewritten)], check=True, timeout=60)

    # Then the rewritten file verifies, by the endpoint and offline
    trusted = served_keys(approver.app.test_client())
    assert verify_json(json.loads(rewritten.read_bytes()), trusted).ok
    checked = approver.app.test_client().post("/api/v1/records/verify", data=rewritten.read_bytes())
    assert checked.status_code == 200 and checked.get_json()["ok"] is True, checked.get_json()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(min_value=0.0, max_value=1.0), flips=st.lists(st.integers(min_value=0), max_size=8),
       suffix=st.sampled_from([".json", ".pdf"]))
def test_the_verify_endpoint_answers_damaged_records_with_200_or_422(final_record: tuple[Caller, Record],
                                                                     cut: float, flips: list[int], suffix: str):
    # Given a signed record as served (JSON or PDF; the PDF is rendered once, then served as stored),
    # truncated and with bits flipped
    approver, final = final_record
    served = approver.get(f"/api/v1/records/{final.id}{suffix}").data
    body = bytearray(served[:max(1, int(len(served) * cut))])
    for flip in flips:
        body[flip % len(body)] ^= 1 << (flip % 8)
    # When it is posted to the verify endpoint, Then the answer is a verification or a problem, never a 500
    response = approver.app.test_client().post("/api/v1/records/verify", data=bytes(body))
    assert response.status_code in (200, 422), response.get_data(as_text=True)[:500]
    if bytes(body) == served:
        assert response.get_json()["ok"] is True

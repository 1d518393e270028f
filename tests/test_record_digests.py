"""workflow.record_digests gives, byte for byte, the digests of a record and of its check results hashed one by one."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rules.evaluate import evaluate
from schemas.canonical_json import digest_of, placeholder
from service.approval.workflow import record_digests, result_digest
from tests.golden.golden_support import load_golden

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.json"))


def _assert_as_hashed_whole(record: dict) -> None:
    assert record_digests(record) == (digest_of(record), {check["id"]: result_digest(check)
                                                          for check in record["checks"]})


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_record_as_evaluated(path):
    # The engine's own record: enum members, integral doubles and all, as the submission path stores it.
    record = evaluate(json.loads(path.read_text()), now=datetime(2026, 1, 1, tzinfo=UTC))
    _assert_as_hashed_whole({**record, "record_id": "r-1", "submission": {**record["submission"], "id": "s-1"}})


def test_every_golden_record():
    for record in load_golden().values():
        _assert_as_hashed_whole(record)


def test_a_record_whose_strings_hold_a_placeholder():
    record = evaluate(json.loads(EXAMPLES[0].read_text()), now=datetime(2026, 1, 1, tzinfo=UTC))
    checks = [dict(check) for check in record["checks"]]
    checks[0]["id"] = placeholder(1)
    checks[1]["evidence"] = {**checks[1]["evidence"], "note": placeholder(0)}
    _assert_as_hashed_whole({**record, "checks": checks})

"""The example table of docs/examples.md is true: each example gets the verdict and failing checks stated there."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rules.evaluate import evaluate

ROOT = Path(__file__).parent.parent
ROW = re.compile(r"^\| `(examples/[^`]+\.json)` \| \*\*(\w+)\*\* \| ([^|]+) \|", re.MULTILINE)
STATED = {path: (verdict, set() if failing.strip() == "none" else {c.strip() for c in failing.split(",")})
          for path, verdict, failing in ROW.findall((ROOT / "docs" / "examples.md").read_text())}


def test_every_example_is_described_in_the_examples_page() -> None:
    on_disk = {f"examples/{p.name}" for p in (ROOT / "examples").glob("*.json")}

    assert on_disk == set(STATED)


@pytest.mark.parametrize("path", sorted(STATED))
def test_example_gets_the_verdict_the_examples_page_states(path: str) -> None:
    verdict, failing = STATED[path]

    record = evaluate(json.loads((ROOT / path).read_text()))

    assert record["verdict"] == verdict
    assert {c["id"] for c in record["checks"] if c["status"] == "fail"} == failing

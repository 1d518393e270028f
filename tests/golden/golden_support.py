"""The golden records: every check fixture and every example evaluated at a fixed moment under the default policy (a
fixture that names a policy patch, under that policy).

``tests/golden/records.json.gz`` holds, per document, the record ``evaluate`` produced when the file was
last regenerated, less the ``engine`` member (it names the installed version). A change to the checks, the
estimators or the record that alters any record shows up as a difference here; a change that is meant to
alter records regenerates the file (``python -m tests.golden.golden_support --update``) and explains each
difference in its commit message.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rules.policy import Policy
from tests.checks.fixture_support import fixture_paths, load_fixture, load_fixture_policy

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_FILE = Path(__file__).with_name("records.json.gz")
# Every record is evaluated at this moment, so evaluated_at and date-dependent figures do not move.
EVALUATED_AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def golden_documents() -> Iterator[tuple[str, dict[str, Any], Policy | None]]:
    """Yields (name, submission, policy) of every check fixture (base and patch applied, its policy or None for the
    default) and example (the default policy), in a stable order."""
    for path in fixture_paths():
        yield f"checks/{path.parent.name}/{path.name}", load_fixture(path), load_fixture_policy(path)
    for path in sorted((ROOT / "examples").glob("*.json")):
        yield f"examples/{path.name}", json.loads(path.read_text()), None


def record_of(submission: dict[str, Any], policy: Policy | None = None) -> dict[str, Any]:
    """Returns the record of ``submission`` under ``policy`` (None: the default) at EVALUATED_AT, as JSON reads it
    back, without ``engine``."""
    from rules.evaluate import evaluate

    record = evaluate(submission, policy, now=EVALUATED_AT)
    record.pop("engine", None)
    return json.loads(json.dumps(record))


def load_golden() -> dict[str, dict[str, Any]]:
    """Returns the stored golden records by document name."""
    with gzip.open(GOLDEN_FILE, "rt", encoding="utf-8") as stream:
        return json.load(stream)


def differences(expected: Any, found: Any, path: str = "") -> Iterator[str]:
    """Yields one line per JSON Pointer at which ``found`` differs from ``expected``."""
    if isinstance(expected, dict) and isinstance(found, dict):
        for key in sorted(set(expected) | set(found)):
            pointer = f"{path}/{key}"
            if key not in found:
                yield f"{pointer}: removed (was {json.dumps(expected[key])[:120]})"
            elif key not in expected:
                yield f"{pointer}: added ({json.dumps(found[key])[:120]})"
            else:
                yield from differences(expected[key], found[key], pointer)
    elif isinstance(expected, list) and isinstance(found, list) and len(expected) == len(found):
        for index, (was, now) in enumerate(zip(expected, found, strict=True)):
            yield from differences(was, now, f"{path}/{index}")
    elif expected != found or type(expected) is not type(found):
        yield f"{path or '/'}: {json.dumps(expected)[:120]} -> {json.dumps(found)[:120]}"


def update() -> None:
    """Regenerates the golden file from the current code."""
    records = {name: record_of(document, policy) for name, document, policy in golden_documents()}
    with gzip.GzipFile(GOLDEN_FILE, "wb", mtime=0) as stream:
        stream.write(json.dumps(records, sort_keys=True, separators=(",", ":")).encode("utf-8"))
    print(f"wrote {len(records)} records to {GOLDEN_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python -m tests.golden.golden_support --update")
    sys.path.insert(0, str(ROOT))
    update()

"""Helpers shared by the record tests: the example, an approval as the workflow makes it, poppler tools."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rules.evaluate import verdict_of

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "h200-128node-pretraining.json"
RECORD_ID = "5b0e6a52-8d1c-4c57-9a0e-2f3c1d7e9b41"
WAIVER_JUSTIFICATION = "Host RAM headroom accepted: the dataloader runs with 1 worker per GPU on this cluster."


def require_tool(name: str) -> str:
    """Returns the path of a command-line tool; skips the test without it, except under CI where it must exist."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed; .ci/run installs poppler-utils")
        pytest.skip(f"{name} is not installed (apt-get install -y poppler-utils)")
    return path


def pdftotext(pdf: bytes, tmp_path: Path, *args: str) -> str:
    """Returns the text poppler's pdftotext reads from ``pdf`` (layout order)."""
    tool = require_tool("pdftotext")
    source = tmp_path / "in.pdf"
    source.write_bytes(pdf)
    return subprocess.run([tool, *args, str(source), "-"], capture_output=True, text=True, check=True,
                          timeout=60).stdout


def approve(record: dict[str, Any], *, waive: str | None = None) -> dict[str, Any]:
    """Returns ``record`` as the workflow issues it on approval: an id, a waiver on ``waive``, the decisions."""
    record = copy.deepcopy(record)
    if waive is not None:
        check = next(c for c in record["checks"] if c["id"] == waive)
        waiver = {"check_id": waive, "justification": WAIVER_JUSTIFICATION, "actor": "rita.reviewer",
                  "at": "2026-11-29T16:10:00Z", "expires": "2027-05-31", "result_digest": "sha256:" + "ab" * 32}
        check.update({"original_status": check["status"], "status": "waived", "waiver": waiver})
        record["waivers"] = [waiver]
    statuses = [c["status"] for c in record["checks"]]
    record.update({
        "record_id": RECORD_ID,
        "verdict": verdict_of(statuses),
        "summary": {s: statuses.count(s) for s in dict.fromkeys([*record["summary"], *statuses])},
        "decisions": [{"action": "approve", "actor": "ada.approver", "role": "approver",
                       "at": "2026-11-29T16:20:00Z", "comment": "Approved for PO 4711"}],
    })
    return record

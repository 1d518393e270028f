"""Helpers shared by the record tests: the example, an approval as the workflow makes it, poppler tools and the
pages with their word boxes as poppler reads them."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

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


def justification_for(check_id: str) -> str:
    """Returns the justification ``approve`` gives a waiver of ``check_id`` (WAIVER_JUSTIFICATION for host-ram)."""
    if check_id == "host-ram":
        return WAIVER_JUSTIFICATION
    return f"Accepted for {check_id}: the vendor confirmed in writing (mail of 2026-11-20) that it is met on site."


def approve(record: dict[str, Any], *, waive: str | Sequence[str] | None = None) -> dict[str, Any]:
    """Returns ``record`` as the workflow issues it on approval: an id, a waiver on each check of ``waive``, the
    decisions."""
    record = copy.deepcopy(record)
    for check_id in [waive] if isinstance(waive, str) else waive or []:
        check = next(c for c in record["checks"] if c["id"] == check_id)
        waiver = {"check_id": check_id, "justification": justification_for(check_id), "actor": "rita.reviewer",
                  "at": "2026-11-29T16:10:00Z", "expires": "2027-05-31", "result_digest": "sha256:" + "ab" * 32}
        check.update({"original_status": check["status"], "status": "waived", "waiver": waiver})
        record["waivers"] = [*record.get("waivers", []), waiver]
    statuses = [c["status"] for c in record["checks"]]
    record.update({
        "record_id": RECORD_ID,
        "verdict": verdict_of(statuses),
        "summary": {s: statuses.count(s) for s in dict.fromkeys([*record["summary"], *statuses])},
        "decisions": [{"action": "approve", "actor": "ada.approver", "role": "approver",
                       "at": "2026-11-29T16:20:00Z", "comment": "Approved for PO 4711"}],
    })
    return record


PURCHASE_ORDER = {"po_number": "PO-2026/0042", "system": "SAP S/4HANA", "actor": "ada.approver", "role": "approver",
                  "linked_at": "2026-11-30T09:05:00Z"}


def with_purchase_order(record: dict[str, Any]) -> dict[str, Any]:
    """Returns an approved ``record`` re-issued with a purchase order linked (issue 2, superseding issue 1)."""
    return {**copy.deepcopy(record), "issue": 2, "purchase_orders": [dict(PURCHASE_ORDER)],
            "supersedes": {"record_id": "0d6f1c2e-3b4a-4d5e-8f70-9a1b2c3d4e5f", "digest": "sha256:" + "cd" * 32}}


def blocking(record: dict[str, Any]) -> list[str]:
    """Returns the ids of the checks that block approval (fail or warn)."""
    return [c["id"] for c in record["checks"] if c["status"] in ("fail", "warn")]


# --- the pages as poppler lays them out -------------------------------------------------------------------

MM = 72 / 25.4  # PDF points per millimetre
STYLESHEET = ROOT / "templates" / "record.css"


@dataclass(frozen=True)
class Word:
    """A word as ``pdftotext -bbox-layout`` places it: its box in points from the page's top left corner."""

    text: str
    x_min: float
    y_min: float
    x_max: float
    y_max: float


@dataclass(frozen=True)
class Page:
    width: float
    height: float
    words: list[Word]


@dataclass(frozen=True)
class Margins:
    """The @page margins of the record's stylesheet, in points."""

    top: float
    right: float
    bottom: float
    left: float


def page_margins() -> Margins:
    """Returns the margins of the @page rule of templates/record.css (``margin: T R B L`` in mm)."""
    rule = re.search(r"@page\s*\{.*?\bmargin:\s*([\d.]+)mm\s+([\d.]+)mm\s+([\d.]+)mm\s+([\d.]+)mm",
                     STYLESHEET.read_text(), re.DOTALL)
    assert rule, "templates/record.css has no @page margin of four lengths in mm"
    return Margins(*(float(value) * MM for value in rule.groups()))


def pdf_pages(pdf: bytes, tmp_path: Path) -> list[Page]:
    """Returns every page of ``pdf`` with its words and their boxes, as ``pdftotext -bbox-layout`` reads them."""
    namespace = "{http://www.w3.org/1999/xhtml}"
    root = ElementTree.fromstring(pdftotext(pdf, tmp_path, "-bbox-layout"))
    return [Page(float(page.get("width")), float(page.get("height")),
                 [Word(word.text or "", *(float(word.get(name)) for name in ("xMin", "yMin", "xMax", "yMax")))
                  for word in page.iter(namespace + "word")])
            for page in root.iter(namespace + "page")]

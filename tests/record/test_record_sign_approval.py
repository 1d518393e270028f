"""Signing means approved: what `quotecheck sign` and `pdf` make of an unapproved evaluation, run as processes.

`evaluate --out` writes an evaluation record, which carries no decision. `sign` signs it as it is, and
because the empty decisions list is part of the signed record, `verify` reports it NOT APPROVED first and
nobody can make it look approved without breaking the signature. `pdf` renders it as a DRAFT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parent.parent.parent
EXAMPLE = ROOT / "examples" / "dgx-h100-70b-finetune.json"


def quotecheck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Returns the finished `quotecheck ARGS` process, run the way a user runs it (a new Python process)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "service.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with `record.json` from `quotecheck evaluate --out` and its envelope from `quotecheck sign`."""
    folder = tmp_path_factory.mktemp("unapproved")
    evaluated = quotecheck("evaluate", str(EXAMPLE), "--out", "record.json", cwd=folder)
    assert evaluated.returncode == 0, evaluated.stderr
    signed = quotecheck("sign", "record.json", "--instance", "instance", "--out", "record.signed.json", cwd=folder)
    assert signed.returncode == 0, signed.stderr
    (folder / "sign.stderr").write_text(signed.stderr)
    return folder


def test_signing_an_evaluation_warns_that_it_is_not_approved(workdir: Path) -> None:
    warning = (workdir / "sign.stderr").read_text()

    assert warning.startswith("warning: NOT APPROVED: the record carries no approval decision")
    assert "`quotecheck verify` will report it NOT APPROVED first" in warning
    assert json.loads((workdir / "record.signed.json").read_text())["record"]["decisions"] == []


def test_verify_says_not_approved_first_and_still_reports_the_signature(workdir: Path) -> None:
    result = quotecheck("verify", "record.signed.json", "--instance", "instance", cwd=workdir)

    assert result.returncode == 0, result.stdout + result.stderr
    first, second = result.stdout.splitlines()[:2]
    assert first == ("NOT APPROVED: the record carries no approval decision (its decisions list is empty): it is "
                     "an evaluation that nobody approved through the approval workflow")
    assert second == "VALID  record.signed.json (record envelope)"


def test_verify_as_json_says_approved_false(workdir: Path) -> None:
    result = quotecheck("verify", "record.signed.json", "--instance", "instance", "--format", "json", cwd=workdir)

    assert result.returncode == 0
    verification = json.loads(result.stdout)
    assert verification["ok"] is True and verification["approved"] is False


def test_adding_an_approval_to_the_signed_evaluation_breaks_its_signature(workdir: Path, tmp_path: Path) -> None:
    # Given the signed evaluation, When someone appends an approval decision to make it look approved
    envelope: dict[str, Any] = json.loads((workdir / "record.signed.json").read_text())
    envelope["record"]["decisions"] = [{"action": "approve", "actor": "mallory", "role": "approver",
                                        "at": "2026-12-01T10:00:00Z"}]
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(envelope))

    # Then it no longer verifies: the NOT APPROVED marking is covered by the signature
    result = quotecheck("verify", str(forged), "--instance", str(workdir / "instance"), cwd=workdir)
    assert result.returncode == 1
    assert result.stdout.startswith(f"INVALID  {forged} (record envelope)")
    assert "does not match signed digest" in result.stdout


def test_pdf_of_the_evaluation_is_a_draft_that_verify_reports_not_approved(workdir: Path) -> None:
    rendered = quotecheck("pdf", "record.json", "--instance", "instance", "--out", "record.pdf", cwd=workdir)
    assert rendered.returncode == 0, rendered.stderr
    assert rendered.stderr.startswith("DRAFT PDF (not approved) -> record.pdf")

    result = quotecheck("verify", "record.pdf", "--instance", "instance", cwd=workdir)

    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("NOT APPROVED: the record carries no approval decision")
    assert lines[1] == "INVALID  record.pdf (PDF)"
    assert "unsigned DRAFT record" in result.stdout


def test_an_approved_record_signed_and_verified_says_nothing_of_the_sort(approved: dict[str, Any],
                                                                        tmp_path: Path) -> None:
    (tmp_path / "approved.json").write_text(json.dumps(approved))
    signed = quotecheck("sign", "approved.json", "--instance", "instance", "--out", "approved.signed.json",
                        cwd=tmp_path)
    assert signed.returncode == 0 and "NOT APPROVED" not in signed.stderr

    result = quotecheck("verify", "approved.signed.json", "--instance", "instance", cwd=tmp_path)

    assert result.returncode == 0
    assert result.stdout.startswith("VALID  approved.signed.json (record envelope)")
    assert "NOT APPROVED" not in result.stdout

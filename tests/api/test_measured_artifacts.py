"""Raw diagnostics over HTTP: a paste its parser cannot read is a 422 naming the field and the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DATA = Path(__file__).parents[1] / "data"


def test_a_truncated_nccl_tests_run_is_a_422_naming_its_pointer_and_line(as_role, submission_document: dict[str, Any]):
    # Given nccl-tests output cut before its "# Avg bus bandwidth" line, as a paste that stopped early
    lines = (DATA / "nccl" / "all_reduce_a3mega_2x8_h100.txt").read_text(encoding="utf-8").splitlines()
    submission_document["measurements"] = {"nccl_tests": [{"nodes": 2, "raw": "\n".join(lines[:60])}]}
    submitter = as_role("submitter")

    response = submitter.post("/api/v1/submissions", json=submission_document)

    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    assert response.get_json()["errors"] == [{
        "pointer": "/measurements/nccl_tests/0/raw",
        "message": "nccl-tests output cannot be read: line 60: expected '# Avg bus bandwidth' after the last row, "
                   "found end of input"}]


def test_a_real_topology_matrix_is_accepted(as_role, submission_document: dict[str, Any]):
    matrix = (DATA / "topology" / "princeton_della_2x_a100_two_sockets.txt").read_text(encoding="utf-8")
    submission_document["measurements"] = {"topology": {"nvidia_smi_topo_m": matrix}}
    submitter = as_role("submitter")

    response = submitter.post("/api/v1/submissions", json=submission_document)

    assert response.status_code == 201, response.get_json()

"""GPU ids over HTTP: a node group whose GPU only an id the catalogue lacks describes is a 422 naming the pointer and
the closest catalogued ids; the same id with its figures is evaluated (tests/test_gpu_ids.py: the command line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-128node-pretraining.json"


def with_gpu(gpu: dict[str, Any]) -> dict[str, Any]:
    submission = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    submission["quote"]["node_groups"][0]["gpu"] = gpu
    return submission


def test_an_unknown_gpu_id_alone_is_a_422_naming_the_pointer_and_the_closest_ids(as_role):
    response = as_role("submitter").post("/api/v1/submissions", json=with_gpu({"model": "H200", "count": 8}))

    assert response.status_code == 422 and response.mimetype == "application/problem+json", response.get_json()
    [error] = response.get_json()["errors"]
    assert error["pointer"] == "/quote/node_groups/0/gpu/model"
    assert "did you mean H200-SXM-141GB" in error["message"]


def test_an_unknown_gpu_id_with_its_figures_is_evaluated(as_role):
    gpu = {"model": "H200-NVL", "count": 8, "memory_gib": 131.0, "hbm_tbs": 4.8, "bf16_tflops": 835.5, "tdp_w": 600}
    response = as_role("submitter").post("/api/v1/submissions", json=with_gpu(gpu))

    assert response.status_code == 201, response.get_json()

"""Models by name over HTTP: a submission that names a catalogued model alone is evaluated with the catalogue's
parameters; one whose name the catalogue lacks, with nothing else to describe the model, is a 422 naming the
pointer (tests/test_models_by_name.py holds the catalogue and the command line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dgx-h100-70b-finetune.json"
POINTER = "/workload/training/model/name"


def named(model: dict[str, Any]) -> dict[str, Any]:
    submission = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    submission["workload"]["training"]["model"] = model
    return submission


def test_an_unknown_name_alone_is_a_422_naming_the_pointer_and_the_closest_names(as_role):
    response = as_role("submitter").post("/api/v1/submissions", json=named({"name": "Llama-3-9B"}))

    assert response.status_code == 422 and response.mimetype == "application/problem+json", response.get_json()
    problem = response.get_json()
    assert problem["type"].endswith("/invalid-submission")
    [error] = problem["errors"]
    assert error["pointer"] == POINTER
    assert "did you mean Llama-3-8B" in error["message"]


def test_a_catalogued_name_alone_is_evaluated_with_the_catalogue_s_parameters(as_role):
    response = as_role("submitter").post("/api/v1/submissions", json=named({"name": "Llama-3-70B"}))

    assert response.status_code == 201, response.get_json()
    evaluation = response.get_json()["evaluation"]
    objective = next(c for c in evaluation["checks"] if c["id"] == "training-objective")
    evidence = objective["evidence"]
    assert evidence["parameters"] == 70_553_706_496 == evidence["parameters_from_architecture"]

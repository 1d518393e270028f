"""A figure in the wrong unit over HTTP: 422 problem+json at its pointer (tests/test_units_plausibility.py)."""

from __future__ import annotations

import json
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dgx-h100-70b-finetune.json"


def test_kilowatts_in_max_power_w_is_a_422_at_the_pointer(as_role):
    submission = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    submission["quote"]["node_groups"][0]["max_power_w"] = 10.2

    response = as_role("submitter").post("/api/v1/submissions", json=submission)

    assert response.status_code == 422 and response.mimetype == "application/problem+json", response.get_json()
    [error] = response.get_json()["errors"]
    assert error["pointer"] == "/quote/node_groups/0/max_power_w"
    assert "10.2 kW is 10,200 W" in error["message"]

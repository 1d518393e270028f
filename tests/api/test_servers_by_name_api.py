"""Servers by name over HTTP: a node group whose GPUs only a server id the catalogue lacks describes is a 422 naming
the pointer and the closest catalogued ids, and nothing is stored; a catalogued server named by an alias is evaluated
with the server's figures (tests/test_servers_by_name.py: the catalogue and the command line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-128node-pretraining.json"
POINTER = "/quote/node_groups/0/server_model"


def with_server(server_model: str) -> dict[str, Any]:
    """Returns the example with its training group described by ``server_model`` alone."""
    submission = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    group = submission["quote"]["node_groups"][0]
    for member in ("gpu", "nics"):
        group.pop(member)
    group["server_model"] = server_model
    return submission


def test_an_unknown_server_alone_is_a_422_naming_the_pointer_and_nothing_is_stored(as_role):
    submitter = as_role("submitter")

    response = submitter.post("/api/v1/submissions", json=with_server("HGX-H20"))

    assert response.status_code == 422 and response.mimetype == "application/problem+json", response.get_json()
    problem = response.get_json()
    assert problem["type"].endswith("/invalid-submission") and problem["status"] == 422
    [error] = problem["errors"]
    assert error["pointer"] == POINTER
    assert "server 'HGX-H20' is not in the catalogue" in error["message"]
    assert "did you mean HGX-H200-8GPU" in error["message"]
    assert submitter.get("/api/v1/submissions").get_json()["total"] == 0


def test_a_server_named_by_an_alias_is_evaluated_with_the_server_s_figures(as_role):
    submitter = as_role("submitter")

    response = submitter.post("/api/v1/submissions", json=with_server("HGX H200"))

    assert response.status_code == 201, response.get_json()
    evaluation = response.get_json()["evaluation"]
    memory = next(check for check in evaluation["checks"] if check["id"] == "peak-memory")
    assert memory["evidence"]["capacity_gib"] == 140.4  # nvidia-smi 143,771 MiB, the catalogue's H200 memory_gib
    # and the record, as served, names the server's id among its catalogue fills
    record = json.loads(submitter.get(f"/api/v1/records/{evaluation['record_id']}.json").data)
    fills = {fill["pointer"]: fill["value"] for fill in record["catalogue_fills"]}
    assert fills[POINTER] == "HGX-H200-8GPU" and fills["/quote/node_groups/0/gpu/model"] == "H200-SXM-141GB"

"""Helpers of the task tests: the example comparison, direct evaluations to check it against, polling a task."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

from rules.advice.compare import merge_patch
from rules.evaluate import evaluate

EXAMPLE = Path(__file__).parents[2] / "examples" / "dgx-h100-70b-finetune.json"


def example() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text())


def half_the_nodes_patch(submission: dict[str, Any]) -> dict[str, Any]:
    """Returns the merge patch that quotes half the nodes: node count, racks, line items and the job's GPUs.

    Arrays are replaced whole by a merge patch (RFC 7396), so the patch carries the changed arrays in full.
    """
    quote = copy.deepcopy(submission["quote"])
    quote["node_groups"][0]["count"] //= 2
    quote["racks"][0]["count"] //= 2
    quote["line_items"][0]["quantity"] //= 2
    gpus = submission["workload"]["training"]["gpus"] // 2
    return {"quote": {k: quote[k] for k in ("node_groups", "racks", "line_items")},
            "workload": {"training": {"gpus": gpus}}}


def three_variants(submission: dict[str, Any]) -> list[dict[str, Any]]:
    """The as-quoted configuration (fsdp-full, 16 nodes), the same with DDP, and half the nodes."""
    return [{"name": "fsdp-full, 16 nodes", "patch": {}},
            {"name": "ddp", "patch": {"workload": {"training": {"parallelism": {"sharding": "ddp"}}}}},
            {"name": "fsdp-full, 8 nodes", "patch": half_the_nodes_patch(submission)}]


def direct_evaluation(submission: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Returns the record evaluate() gives the patched submission, and its time-to-result evidence."""
    record = evaluate(merge_patch(submission, patch))
    timing = next(c for c in record["checks"] if c["id"] == "time-to-result")
    return {"record": record, "timing": timing["evidence"],
            "failing": [c["id"] for c in record["checks"] if c["status"] == "fail"]}


def poll(get: Any, location: str, timeout_s: float = 25, interval_s: float = 0.02) -> tuple[dict[str, Any], list]:
    """Returns the task once it ended, and every (state, progress) seen on the way; AssertionError past the timeout."""
    seen: list[tuple[str, int, int]] = []
    deadline = time.monotonic() + timeout_s
    while True:
        response = get(location)
        assert response.status_code == 200, response.get_json()
        view = response.get_json()
        seen.append((view["state"], view["progress"]["current"], view["progress"]["total"]))
        if view["state"] in ("SUCCESS", "FAILURE"):
            return view, seen
        assert time.monotonic() < deadline, f"task {location} did not end within {timeout_s} s: {seen[-5:]}"
        time.sleep(interval_s)


class QueueWithoutWorkers:
    """A task queue that takes every message and runs none: the tasks it was sent stay queued (PENDING)."""

    in_background = True

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, name: str, args: list[Any], task_id: str) -> None:
        self.sent.append(task_id)

    def forget(self, task_id: str) -> None:
        pass

    def state(self, task_id: str) -> tuple[str | None, Any]:
        return "PENDING", None

"""Stored quotes side by side over HTTP: each at the best layout of its quoted GPUs, ranked by days then cost."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from api_support import Caller

from rules.advice.best_layout import layout_patch
from rules.advice.compare import merge_patch
from rules.advice.search import search_submission
from rules.evaluate import evaluate

ROOT = Path(__file__).parent.parent.parent
COMPARISONS = "/api/v1/comparisons"
EXAMPLE = ROOT / "examples" / "fail-70b-ddp-one-rack.json"


def _stored(submitter: Caller, document: dict[str, Any]) -> str:
    created = submitter.post("/api/v1/submissions", json=document)
    assert created.status_code == 201, created.get_json()
    return created.get_json()["id"]


def _quotes() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The 70B example on 4 nodes, the same on 8 nodes at twice the price, and on 2 nodes, where 16 H100s cannot
    hold the 70B model's training state in any layout (the job runs on all GPUs of each)."""
    small = json.loads(EXAMPLE.read_text())
    small["workload"]["training"].pop("gpus", None)
    large, tiny = copy.deepcopy(small), copy.deepcopy(small)
    large["quote"]["node_groups"][0]["count"] *= 2
    tiny["quote"]["node_groups"][0]["count"] //= 2
    for document, vendor in ((small, "Small Systems"), (large, "Large Systems"), (tiny, "Tiny Systems")):
        document["quote"]["vendor"] = vendor
    return small, large, tiny


def _days_at_best(document: dict[str, Any]) -> float:
    """Returns the days to result of ``document`` evaluated at the best layout the search finds (the reference)."""
    best = search_submission(document)["best"]
    record = evaluate(merge_patch(document, layout_patch(document, best)[0]))
    (timing,) = [c for c in record["checks"] if c["id"] == "time-to-result"]
    return timing["evidence"]["days"]


def test_stored_quotes_are_ranked_by_days_at_their_best_layouts(as_role):
    # Given three stored quotes for the same job, a reviewer who only reads
    submitter, reviewer = as_role("submitter"), as_role("reviewer")
    small, large, tiny = _quotes()
    ids = [_stored(submitter, document) for document in (small, large, tiny)]

    # When the reviewer compares them
    response = reviewer.post(COMPARISONS, json={"submissions": ids})

    # Then the task ranks them fastest first, each evaluated at its own best layout
    assert response.status_code == 202, response.get_json()
    task = reviewer.get(response.headers["Location"]).get_json()
    assert task["state"] == "SUCCESS" and task["kind"] == "quote-comparison", task
    assert task["progress"] == {"current": 3, "total": 3}
    rows = task["result"]["quotes"]
    assert [row["rank"] for row in rows] == [1, 2, 3]
    by_name = {row["name"]: row for row in rows}
    for submission_id, document in zip(ids[:2], (small, large), strict=True):
        row = by_name[submission_id]
        assert row["layout"] == "best" and row["best_layout"] == search_submission(document)["best"]
        assert row["days"] == _days_at_best(document)
    ranked = [row["days_p50"] for row in rows[:2]]
    assert ranked == sorted(ranked)
    # The quote where nothing fits is compared as submitted, has no days to rank by, and ranks last
    tiny_row = by_name[ids[2]]
    assert tiny_row["layout"] == "submitted" and tiny_row["best_layout"] is None
    assert tiny_row["submitted_vs_best"] == "no layout of the quoted GPUs fits memory"
    assert tiny_row["days"] is None and tiny_row["rank"] == 3 and "peak-memory" in tiny_row["failing_checks"]
    assert rows[0]["name"] == ids[1]  # twice the GPUs: fastest
    assert [row["vendor"] for row in rows] == ["Large Systems", "Small Systems", "Tiny Systems"]


def test_quotes_for_another_job_are_refused_naming_the_member(as_role):
    submitter = as_role("submitter")
    small, large, _ = _quotes()
    large["workload"]["training"]["completion_window_days"] = 30
    ids = [_stored(submitter, small), _stored(submitter, large)]

    response = submitter.post(COMPARISONS, json={"submissions": ids})

    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    problems = response.get_json()["errors"]
    assert problems == [{"pointer": "/submissions/1", "message": f"submission {ids[1]!r} is for another job than "
                         f"{ids[0]!r}: /workload/training/completion_window_days differs"}]


def test_a_quote_the_token_may_not_see_is_not_found_and_both_forms_at_once_are_refused(as_role):
    submitter = as_role("submitter")
    small, large, _ = _quotes()
    ids = [_stored(submitter, small), "no-such-submission"]

    missing = submitter.post(COMPARISONS, json={"submissions": ids})
    both = submitter.post(COMPARISONS, json={"submissions": [ids[0], ids[0] + "x"], "submission": small,
                                             "variants": [{"name": "a", "patch": {}}]})

    assert missing.status_code == 404
    assert both.status_code == 422 and both.get_json()["errors"][0]["pointer"] == "/submissions"


def test_what_if_variants_still_need_a_role_that_submits(as_role):
    reviewer = as_role("reviewer")

    response = reviewer.post(COMPARISONS, json={"submission": json.loads(EXAMPLE.read_text()),
                                                "variants": [{"name": "as is", "patch": {}}]})

    assert response.status_code == 403 and "submit quotes" in response.get_json()["detail"]

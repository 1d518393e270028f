"""Stored quotes side by side over HTTP: each at the best layout of its quoted GPUs (or at its own, where it states its
throughput); those that pass after waivers ranked by days, the others listed apart; the comparison as CSV."""

from __future__ import annotations

import copy
import csv
import io
import json
from pathlib import Path
from typing import Any

from api_support import Caller, waive_all

from rules.advice.best_layout import layout_patch
from rules.advice.compare import merge_patch
from rules.advice.search import search_submission
from rules.evaluate import evaluate

ROOT = Path(__file__).parent.parent.parent
COMPARISONS = "/api/v1/comparisons"
EXAMPLE = ROOT / "examples" / "fail-70b-ddp-one-rack.json"
PRICED_EXAMPLE = ROOT / "examples" / "dgx-h100-70b-finetune.json"


def _stored(submitter: Caller, document: dict[str, Any]) -> str:
    created = submitter.post("/api/v1/submissions", json=document)
    assert created.status_code == 201, created.get_json()
    return created.get_json()["id"]


def _quotes() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The 70B example on 4 nodes, the same on 8 nodes at twice the price, and on 2 nodes, where 16 H100s cannot
    hold the 70B model's training state in any layout (the job runs on all GPUs of each). None states its
    throughput, so each is compared at the best layout the search finds."""
    small = json.loads(EXAMPLE.read_text())
    small["workload"]["training"].pop("gpus", None)
    small["workload"]["training"].pop("throughput", None)
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


def _decided_quotes() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Three quotes for the DGX H100 example's job, each stating its MFU (so each is compared at its own layout):
    one that passes (the example at a higher MFU: the soonest); one whose racks have too small a power budget
    (rack-power fails; to be waived) but whose servers are cheaper (the cheapest to run); and one that keeps a
    full DDP replica on each GPU (peak-memory fails). The second's vendor name starts with "=", as a formula
    would."""
    passing = json.loads(PRICED_EXAMPLE.read_text())
    waived, failing = copy.deepcopy(passing), copy.deepcopy(passing)
    passing["quote"]["vendor"] = "Swift Compute"
    passing["workload"]["training"]["throughput"]["mfu"] = 0.45
    waived["quote"]["vendor"] = "=Budget Racks"
    waived["quote"]["racks"][0]["power_budget_kw"]["value"] = 20
    waived["quote"]["line_items"][0]["unit_price"] = 200000
    failing["quote"]["vendor"] = "Overcommitted Inc"
    failing["workload"]["training"]["parallelism"]["sharding"] = "ddp"
    return passing, waived, failing


def _stored_view(submitter: Caller, document: dict[str, Any]) -> dict[str, Any]:
    created = submitter.post("/api/v1/submissions", json=document)
    assert created.status_code == 201, created.get_json()
    return created.get_json()


def test_only_quotes_that_pass_after_waivers_are_ranked_and_the_comparison_exports_as_csv(as_role):
    # Given three stored quotes for one job: one passing, one failing whose failure a reviewer waived, one failing
    submitter, reviewer = as_role("submitter"), as_role("reviewer")
    passing, waived, failing = (_stored_view(submitter, d) for d in _decided_quotes())
    assert [c["id"] for c in waived["evaluation"]["checks"] if c["status"] == "fail"] == ["rack-power"]
    waive_all(reviewer, waived)
    ids = [failing["id"], waived["id"], passing["id"]]

    # When the reviewer compares them and reads the task, then its CSV
    response = reviewer.post(COMPARISONS, json={"submissions": ids})
    assert response.status_code == 202, response.get_json()
    task = reviewer.get(response.headers["Location"]).get_json()
    as_csv = reviewer.get(response.headers["Location"], headers={"Accept": "text/csv"})

    # Then the failing quote is listed apart with the check that stops it, and its message
    assert task["state"] == "SUCCESS", task
    result = task["result"]
    assert result["waived"] == {failing["id"]: [], waived["id"]: ["rack-power"], passing["id"]: []}
    (stopped,) = result["not_ranked"]
    assert stopped["name"] == failing["id"] and stopped["rank"] is None and stopped["passes"] is False
    (peak,) = [c for c in failing["evaluation"]["checks"] if c["id"] == "peak-memory"]
    assert {"id": "peak-memory", "status": "fail", "message": peak["message"]} in stopped["stopped_by"]
    # the waived quote is ranked, each at its own layout with its stated MFU kept
    ranked = {row["name"]: row for row in result["passing"]}
    assert set(ranked) == {waived["id"], passing["id"]}
    assert ranked[waived["id"]]["waived_checks"] == ["rack-power"] and ranked[waived["id"]]["stopped_by"] == []
    for row in ranked.values():
        assert row["layout"] == "submitted" and row["throughput_from"] == "mfu"
        assert row["assumed_layout"]["sharding"] == "fsdp-full" and row["assumed_layout"]["data"] == 128
        assert row["days_p50"] <= row["days_p90"] and row["currency"] == "EUR"
    # the higher MFU is the soonest; the cheaper servers the cheapest to run
    assert ranked[passing["id"]]["rank"] == 1 and result["soonest"]["name"] == passing["id"]
    assert ranked[waived["id"]]["cost_per_run"] < ranked[passing["id"]]["cost_per_run"]
    assert result["cheapest"]["name"] == waived["id"] and result["cheapest_by"] == ["cost_per_run", "rank"]
    assert task["links"]["csv"].endswith("?format=csv")

    # And the CSV has one row per quote, the ranked ones first, numbers that parse, and no formula
    assert as_csv.status_code == 200 and as_csv.mimetype == "text/csv", as_csv.get_data(as_text=True)
    table = list(csv.DictReader(io.StringIO(as_csv.get_data(as_text=True))))
    assert [row["submission_id"] for row in table] == [passing["id"], waived["id"], failing["id"]]
    assert [row["rank"] for row in table] == ["1", "2", ""]
    assert table[1]["vendor"] == "'=Budget Racks" and table[1]["cheapest_that_passes"] == "true"
    assert table[2]["stopped_by"].startswith("peak-memory: ") and table[2]["stopped_by"] != ""
    for row in table[:2]:
        for column in ("days_p50", "days_p90", "days_expected", "quote_total_in_currency", "cost_per_run_in_currency",
                       "cost_per_million_tokens_in_currency", "tensor_parallel", "data_parallel", "micro_batch"):
            float(row[column])
        assert float(row["cost_per_run_in_currency"]) == ranked[row["submission_id"]]["cost_per_run"]
        assert row["currency"] == "EUR"


def test_csv_is_refused_for_another_kind_of_task_and_offered_only_once_a_comparison_succeeded(as_role):
    submitter = as_role("submitter")
    response = submitter.post(COMPARISONS, json={"submission": json.loads(EXAMPLE.read_text()),
                                                "variants": [{"name": "as is", "patch": {}}]})
    location = response.headers["Location"]

    refused = submitter.get(location + "?format=csv")
    negotiated = submitter.get(location, headers={"Accept": "text/csv"})

    assert refused.status_code == 422 and refused.get_json()["errors"][0]["parameter"] == "format"
    assert negotiated.status_code == 200 and negotiated.mimetype == "application/json"

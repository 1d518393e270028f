"""The layout search of a submission: chunks by tensor degree, merged; the submitted layout beside the best."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rules.estimates.search.layout_search import SearchSpace
from rules.search import NothingToSearch, chunks_of, merge_chunks, search_chunk, search_submission

EXAMPLE = Path(__file__).parent.parent / "examples" / "h200-128node-pretraining.json"


def test_the_chunks_together_are_the_whole_search_and_the_best_is_no_slower_than_the_submitted():
    submission = json.loads(EXAMPLE.read_text())
    progress: list[tuple[int, int]] = []
    whole = search_submission(submission, on_progress=lambda done, total: progress.append((done, total)))
    assert progress[-1] == (len(chunks_of(SearchSpace())), len(chunks_of(SearchSpace())))
    assert whole["layouts_searched"] >= 5000 and 0 < whole["fitting"] <= whole["layouts_searched"]
    assert [entry["step_s"] for entry in whole["top"]] == sorted(entry["step_s"] for entry in whole["top"])
    assert whole["best"] == whole["top"][0]
    # the submitted layout (TP 8 x PP 4 x DP 32, selective recompute, ZeRO-1) is in the searched space, so the
    # best that fits is at least as fast
    assert (whole["submitted"]["tensor"], whole["submitted"]["pipeline"], whole["submitted"]["data"]) == (8, 4, 32)
    assert whole["best"]["step_s"] <= whole["submitted"]["step_s"]
    assert whole["submitted_vs_best"].startswith("the submitted layout is ")
    # one chunk per tensor degree, merged, gives the same answer
    parts = [search_chunk(submission, chunk) for chunk in chunks_of(SearchSpace())]
    assert merge_chunks(submission, parts) == whole


def test_a_submission_without_a_training_workload_has_nothing_to_search():
    submission = json.loads((EXAMPLE.parent / "l40s-8b-serving.json").read_text())
    with pytest.raises(NothingToSearch, match="no training workload"):
        search_submission(submission)


def test_the_submitted_layout_carries_the_submitted_context_parallel_degree():
    # 1,024 H200 at TP 8 × PP 4 × CP 2 leave 1,024 / 64 = 16 data-parallel ranks.
    submission = json.loads(EXAMPLE.read_text())
    submission["workload"]["training"]["parallelism"]["context"] = 2
    submitted = merge_chunks(submission, [])["submitted"]
    assert (submitted["tensor"], submitted["pipeline"], submitted["context"], submitted["data"]) == (8, 4, 2, 16)


def test_a_gpu_count_the_layout_does_not_divide_has_nothing_to_search():
    submission = json.loads(EXAMPLE.read_text())
    submission["workload"]["training"]["parallelism"]["context"] = 3
    with pytest.raises(NothingToSearch, match="not a whole number of model replicas"):
        merge_chunks(submission, [])

"""The layout search of a submission: chunks by tensor degree, merged; the submitted layout beside the best."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest

from rules.advice.best_layout import layout_patch
from rules.advice.compare import merge_patch
from rules.advice.search import NothingToSearch, chunks_of, merge_chunks, prepare, search_chunk, search_submission
from rules.estimates.memory.activations import ActivationSaving
from rules.estimates.memory.step_memory import StepMemoryModel, TrainingBatch
from rules.estimates.model.layout import training_layout
from rules.estimates.search.layout_search import SearchSpace, search_layouts
from rules.evaluate import evaluate

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


def test_the_search_sizes_memory_as_peak_memory_does_at_the_best_layout():
    """No second memory model: the best layout's memory is the peak-memory check's total when the submission is
    evaluated at that layout (the layout search's patch applied), to the bit."""
    submission = json.loads(EXAMPLE.read_text())
    best = search_submission(submission)["best"]

    patch, _ = layout_patch(submission, best)
    record = evaluate(merge_patch(submission, patch))

    peak = next(check for check in record["checks"] if check["id"] == "peak-memory")
    assert peak["status"] in ("pass", "warn")
    assert best["memory_gib_per_gpu"] == peak["evidence"]["total_gib"]


def test_a_layout_the_memory_model_refuses_is_skipped_and_counted_by_reason():
    """A job whose optimizer the model-state estimator does not know: every candidate is refused
    (InconsistentInput), and the search counts each under the refusal's reason instead of raising."""
    submission = json.loads(EXAMPLE.read_text())
    found, memory = prepare(submission)
    unknown = replace(memory, job=replace(memory.job, model=replace(memory.job.model, optimizer="lion")))
    space = SearchSpace(tensor=(8,), pipeline=(4,), virtual_stages=(1,), context=(1,), micro_batch=(1,),
                        recompute=("selective",), sharding=("zero1", "zero3"), precisions=("bf16-mixed",))

    result = search_layouts(found.model, found.layout.gpus, found.layout.global_batch, unknown, space)

    assert (result.searched, result.fitting, result.best, result.skipped_count) == (2, 0, None, 2)
    [(reason, count)] = result.skipped.items()
    assert count == 2 and "optimizer" in reason and "lion" in reason


def test_every_candidate_is_sized_as_a_fresh_estimate_of_its_job_sizes_it():
    """The search's kept terms and its one sum per candidate give what a fresh StepMemoryModel's estimate of the
    candidate's job gives: the same fit for every candidate, the same total bytes (to the bit) for every one ranked."""
    submission = json.loads(EXAMPLE.read_text())
    found, memory = prepare(submission)
    space = SearchSpace(tensor=(4, 8), pipeline=(2, 4), virtual_stages=(1, 2), context=(1, 2), micro_batch=(1, 2))
    result = search_layouts(found.model, found.layout.gpus, found.layout.global_batch, memory, space, top_n=10_000)

    fits = 0
    ranked = {(entry.layout.tensor, entry.layout.pipeline, entry.layout.virtual_stages, entry.layout.context,
               entry.layout.micro_batch, entry.layout.recompute, entry.layout.sharding, entry.layout.precision):
              entry.memory_bytes for entry in result.top}
    for key in itertools.product(space.tensor, space.pipeline, space.virtual_stages, space.context, space.micro_batch,
                                 space.recompute, space.sharding, space.precisions):
        t, p, v, c, b, recompute, sharding, precision = key
        data = found.layout.gpus // (t * p * c)
        if found.layout.global_batch % (b * data) or (v > 1 and (found.layout.global_batch // (b * data)) % p):
            continue
        job = replace(memory.job, model=replace(memory.job.model, precision=precision), offload="none",
                      saving=ActivationSaving(recompute, t > 1, True), virtual_stages=v,
                      batch=TrainingBatch(memory.job.batch.sequence_length, None, found.layout.global_batch))
        layout = training_layout(found.layout.gpus, memory.gpus_per_node, 0, tensor=t, pipeline=p, sharding=sharding,
                                 context=c)
        estimate = StepMemoryModel(job, memory.gpu_memory_gib, memory.settings).estimate(layout, micro_batch=b)
        fits += bool(estimate.fits)
        assert ranked.get(key) == (estimate.total_bytes if estimate.fits else None)
    assert fits == result.fitting == len(result.top)


@pytest.mark.parametrize("precision", ["bf16-mixed", "fp8-mixed"])
def test_the_search_changes_the_layout_only_never_the_precision(precision):
    """H200s have FP8: the search of a bf16 job still ranks bf16 layouts only, and of an fp8 job fp8 ones (a change of
    precision is a numerics decision the job makes, not a layout); the patch writes the job's precision back."""
    submission = json.loads(EXAMPLE.read_text())
    submission["workload"]["training"]["precision"] = precision
    result = search_submission(submission)
    assert {row["precision"] for row in result["top"]} == {precision}
    assert result["best"]["precision"] == precision
    patch, _ = layout_patch(submission, result["best"])
    assert patch["workload"]["training"].get("precision", precision) == precision

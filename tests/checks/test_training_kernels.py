"""The kernels and the fp8 recipe a training job states, as a submission carries them: into the modelled rate and its
evidence, kept by the layout search, refused where they cannot apply.

Base: 4 × DGX H200 pretraining Llama-3-8B (ZeRO-3/FSDP, full recompute, FlashAttention, 512 sequences of 8192) on
20 billion tokens, whose time-to-result runs on the modelled rate (rules/estimates/training_time/step_time.py).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rules.advice.search import prepare, search_chunk
from rules.errors import InvalidSubmission
from rules.estimates.model.layout import training_layout
from rules.estimates.search.layout_search import SearchSpace
from rules.evaluate import evaluate, validate_submission
from tests.checks.fixture_support import load_base

BASE = "4x-dgx-h200-llama3-8b-pretraining"


def _training(**fields: Any) -> dict[str, Any]:
    submission = copy.deepcopy(load_base(BASE))
    submission["workload"]["training"].update(dataset_tokens=20e9, **fields)
    return submission


def _evidence(submission: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in evaluate(submission)["checks"] if c["id"] == "time-to-result")["evidence"]


def test_the_modelled_rate_names_its_kernels_and_eager_is_slower():
    fused, compiled, eager = (_evidence(_training(kernels=k)) for k in ("fused", "compiled", "eager"))
    assert _evidence(_training())["modelled_tokens_per_s_per_gpu"] == fused["modelled_tokens_per_s_per_gpu"]
    assert (fused["modelled_kernels"], compiled["modelled_kernels"], eager["modelled_kernels"]) == (
        "fused", "compiled", "eager")
    assert eager["modelled_tokens_per_s_per_gpu"] < fused["modelled_tokens_per_s_per_gpu"]
    assert eager["modelled_mfu"] < fused["modelled_mfu"]
    assert "modelled_fp8_recipe" not in fused  # a bf16 job has no fp8 recipe


def test_an_fp8_job_names_its_recipe_and_current_scaling_costs_more_than_delayed():
    delayed = _evidence(_training(precision="fp8-mixed"))
    current = _evidence(_training(precision="fp8-mixed", fp8_recipe="current"))
    assert delayed["modelled_fp8_recipe"] == "delayed" and current["modelled_fp8_recipe"] == "current"
    assert current["modelled_tokens_per_s_per_gpu"] < delayed["modelled_tokens_per_s_per_gpu"]


@pytest.mark.parametrize("precision", ["bf16-mixed", None])
def test_an_fp8_recipe_without_fp8_is_refused_at_its_pointer(precision: str | None):
    submission = _training(fp8_recipe="current")
    if precision is None:
        del submission["workload"]["training"]["precision"]
    with pytest.raises(InvalidSubmission) as refused:
        validate_submission(submission)
    problem = refused.value.problems[0]
    assert problem.pointer == "/workload/training/fp8_recipe"
    assert "only precision fp8-mixed runs FP8 GEMMs" in problem.message
    assert ("precision bf16-mixed" if precision else "no precision (bf16-mixed is assumed)") in problem.message


def test_mxfp8_is_refused_on_hopper_and_runs_on_blackwell():
    hopper = _training(precision="fp8-mixed", fp8_recipe="mxfp8")
    with pytest.raises(InvalidSubmission) as refused:
        validate_submission(hopper)
    problem = refused.value.problems[0]
    assert problem.pointer == "/workload/training/fp8_recipe"
    assert "needs MXFP8 Tensor Cores, which only blackwell GPUs have" in problem.message
    assert "H200-SXM-141GB is hopper" in problem.message

    blackwell = copy.deepcopy(hopper)
    blackwell["quote"]["node_groups"][0]["server_model"] = "DGX-B200"
    assert _evidence(blackwell)["modelled_fp8_recipe"] == "mxfp8"


def test_unknown_kernels_are_refused_by_the_schema():
    with pytest.raises(InvalidSubmission) as refused:
        validate_submission(_training(kernels="jit"))
    assert refused.value.problems[0].pointer == "/workload/training/kernels"


def test_the_layout_search_keeps_the_jobs_kernels():
    submission = _training(kernels="eager")
    found, _ = prepare(submission)
    assert found.layout.kernels == "eager" and found.step.kernels == "eager"
    top = search_chunk(submission, SearchSpace(tensor=(1,)), top_n=3)["top"]
    assert top
    for entry in top:  # each ranked step is the eager one of its layout
        layout = training_layout(32, 8, 0, tensor=entry["tensor"], pipeline=entry["pipeline"],
                                 sharding=entry["sharding"], context=entry["context"],
                                 virtual_stages=entry["virtual_stages"], micro_batch=entry["micro_batch"],
                                 global_batch=entry["global_batch"], recompute=entry["recompute"],
                                 sequence_parallel=entry["sequence_parallel"],
                                 flash_attention=entry["flash_attention"], precision=entry["precision"],
                                 kernels="eager")
        assert entry["step_s"] == found.model.evaluate(layout).step_s
        assert entry["step_s"] > found.model.evaluate(training_layout(
            32, 8, 0, tensor=layout.tensor, pipeline=layout.pipeline, sharding=layout.sharding,
            context=layout.context, virtual_stages=layout.virtual_stages, micro_batch=layout.micro_batch,
            global_batch=layout.global_batch, recompute=layout.recompute,
            sequence_parallel=layout.sequence_parallel, flash_attention=layout.flash_attention,
            precision=layout.precision)).step_s

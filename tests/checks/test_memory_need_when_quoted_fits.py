"""time-to-result's memory need agrees with peak-memory: where the quoted layout's step fits, a GPU count fits.

The fewest fitting count is searched over counts on which the step's memory is not monotone (a second
replica adds NCCL communicators), so the search that asked the largest count first could answer "none fits"
of a job that fits as quoted (rules/estimates/search/fitting_counts.py).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from rules.advice.compare import merge_patch
from rules.checks import CHECKS
from rules.checks.base import Context
from rules.checks.facts.memory import memory_estimate, memory_inputs
from rules.errors import InconsistentInput
from rules.evaluate import evaluate
from rules.job.inputs import Inputs
from rules.policy import default_policy
from tests.checks.fixture_support import load_base
from tests.checks.test_training_properties import training_submissions


def _context(submission: dict[str, Any]) -> Context:
    return Context(Inputs(submission), default_policy(), {}, CHECKS[0])


def _time_to_result(submission: dict[str, Any]) -> dict[str, Any]:
    return next(check for check in evaluate(submission)["checks"] if check["id"] == "time-to-result")


def _one_node_ddp_tensor_8(parameters: float) -> dict[str, Any]:
    """Returns a DGX H100 node training ``parameters`` under ddp with tensor parallel 8: one replica."""
    patch = {"quote": {"storage": {"kind": "parallel-fs", "capacity_tb": 500, "read_gbs": 60, "write_gbs": 40}},
             "workload": {"training": {"model": {"parameters": parameters}, "dataset_tokens": 1e9,
                                       "parallelism": {"sharding": "ddp", "tensor": 8},
                                       "checkpoint": {"interval_min": 60, "max_save_s": 300},
                                       "reliability": {"node_mtbf_h": 5000, "restart_min": 15}}},
             "measurements": None}
    return merge_patch(load_base("1x-dgx-h100-llama2-7b-zero3-fine-tune"), patch)


def test_a_step_that_fits_on_its_one_replica_is_the_memory_need_though_two_replicas_do_not_fit():
    # Given one node of ddp × tensor 8 whose step fits with less to spare than two more communicators take
    # (a second replica adds the gradient group's and the world's NCCL buffers; ddp shards nothing),
    submission = _one_node_ddp_tensor_8(21_093_000_000)
    quoted, doubled = memory_estimate(_context(submission)), memory_estimate(_context(submission), gpus=16)
    assert quoted.fits and not doubled.fits
    assert (quoted.communication.communicators, doubled.communication.communicators) == (1, 3)
    # when it is evaluated, then time-to-result needs the quoted 8 GPUs (the search from the largest count,
    # which does not fit, answered "none fits" and warned no-gpu-count-fits).
    check = _time_to_result(submission)
    assert check["evidence"]["memory_need"] == 8
    assert check["evidence"]["no_gpu_count_fits"] is False
    assert check["rule"] != "no-gpu-count-fits"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(training_submissions())
def test_a_quoted_layout_that_fits_never_has_time_to_result_say_none_fits(submission: dict[str, Any]) -> None:
    ctx = _context(submission)
    try:
        quoted = memory_estimate(ctx)
    except InconsistentInput:
        return
    if quoted is None or not quoted.fits:
        return
    placement = memory_inputs(ctx).layout
    if placement.gpus % placement.whole_unit_gpus:
        return  # on part of a node: the search counts whole nodes and replicas only
    check = _time_to_result(submission)
    if "memory_need" not in check["evidence"]:
        return
    # Given a submission whose step fits on the quoted whole nodes, then time-to-result's memory need is a count
    # no larger than the quoted one.
    need = check["evidence"]["memory_need"]
    assert isinstance(need, int) and need <= placement.gpus, need
    assert check["evidence"]["no_gpu_count_fits"] is False

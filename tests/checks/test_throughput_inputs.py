"""Throughput as people publish it: a rate measured at scale, hardware TFLOP/s per GPU, the peak an MFU used.

Figures are checked by hand from the fixture's own numbers: Llama-2-7B (N = 6,738,415,616 parameters,
32 layers, hidden 4,096, sequence 4,096) trains at 6·N + 12·L·s·h = 4.6875e10 model FLOPs per token, and
with selective recompute 6·N + 16·L·s·h = 4.8024e10 hardware FLOPs per token (rules/estimates/training_time/compute.py).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from rules.evaluate import evaluate
from tests.checks.fixture_support import load_fixture

HERE = Path(__file__).parent
L40S_FSDP = HERE / "gpu_nic_topology" / "fail_l40s_two_200g_nics_for_8_gpus.json"
H100_ZERO1 = HERE / "time_to_result" / "pass_2x_dgx_h100_llama2_7b_finetune_6b_tokens.json"
N, L, S, H = 6_738_415_616, 32, 4096, 4096


def check(submission: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in evaluate(submission)["checks"] if c["id"] == check_id)


def with_throughput(path: Path, **throughput: Any) -> dict[str, Any]:
    """Returns the fixture with ``throughput`` and the schedule inputs of the H100 time-to-result fixture."""
    submission = copy.deepcopy(load_fixture(path))
    schedule = load_fixture(H100_ZERO1)
    submission["quote"]["storage"] = schedule["quote"]["storage"]
    for name in ("dataset_tokens", "epochs", "checkpoint", "reliability"):
        submission["workload"]["training"][name] = schedule["workload"]["training"][name]
    submission["workload"]["training"]["throughput"] = throughput
    return submission


def test_a_rate_measured_at_the_quoted_scale_is_not_reduced_again() -> None:
    # Given a quote whose modelled scaling efficiency is well below 1 (two 200G NICs for eight L40S)
    base = with_throughput(L40S_FSDP, tokens_per_s_per_gpu=2000)
    gpus = base["workload"]["training"]["gpus"]
    modelled = check(base, "interconnect-scaling")["evidence"]["efficiency"]
    assert modelled < 0.9
    # When the same tokens/s is stated as measured at the quoted GPU count, and then without a scale
    at_scale = check(with_throughput(L40S_FSDP, tokens_per_s_per_gpu=2000, measured_at_gpus=gpus), "time-to-result")
    unscaled = check(with_throughput(L40S_FSDP, tokens_per_s_per_gpu=2000), "time-to-result")
    # Then the measured rate runs at efficiency 1 and the other at the modelled efficiency
    assert at_scale["evidence"]["efficiency"] == 1.0 and at_scale["evidence"]["efficiency_basis"] == "measured"
    assert unscaled["evidence"]["efficiency"] == pytest.approx(modelled)
    assert unscaled["evidence"]["compute_days"] == pytest.approx(at_scale["evidence"]["compute_days"] / modelled)


def _at_scale(gpus: int, global_batch: int) -> dict[str, Any]:
    """Returns the L40S job with 2,000 tokens/s per GPU run on ``gpus`` GPUs of the same quote."""
    submission = with_throughput(L40S_FSDP, tokens_per_s_per_gpu=2000)
    submission["workload"]["training"].update(gpus=gpus, global_batch=global_batch)
    return submission


def _modelled_efficiency(gpus: int, global_batch: int) -> float:
    result = check(_at_scale(gpus, global_batch), "interconnect-scaling")
    assert result["basis"] == "estimated"
    return result["evidence"]["efficiency"]


@pytest.mark.parametrize(("measured_at", "global_batch"), [
    (16, 256),  # half the quoted 32 GPUs (4 nodes of 8), on 2 nodes
    (8, 128),  # one node: the measured rate carries no cross-node communication
    (64, 1024),  # twice the quoted count, on 8 nodes: the ratio exceeds 1
])
def test_a_rate_measured_at_another_scale_is_carried_by_the_ratio_of_modelled_efficiencies(
        measured_at: int, global_batch: int) -> None:
    # Given the modelled efficiency of the quoted job (32 GPUs, 16 sequences per rank) and of the same job on
    # measured_at GPUs, each rank keeping its 16 sequences (global batch 16 × data-parallel ranks),
    at_quoted = _modelled_efficiency(32, 512)
    at_measured = _modelled_efficiency(measured_at, global_batch)
    # when the 2,000 tokens/s per GPU is stated as measured at that count,
    measured = with_throughput(L40S_FSDP, tokens_per_s_per_gpu=2000, measured_at_gpus=measured_at)
    result = check(measured, "time-to-result")
    unscaled = check(with_throughput(L40S_FSDP, tokens_per_s_per_gpu=2000), "time-to-result")
    # then the schedule applies E(quoted) / E(measured), not E(quoted) on top of the measured scale's own.
    evidence = result["evidence"]
    assert evidence["efficiency"] == pytest.approx(at_quoted / at_measured, rel=1e-12)
    assert evidence["efficiency_at_quoted_scale"] == pytest.approx(at_quoted, rel=1e-12)
    assert evidence["efficiency_at_measured_scale"] == pytest.approx(at_measured, rel=1e-12)
    assert evidence["efficiency_basis"] == f"modelled ratio from {measured_at} to 32 GPUs"
    assert f"({evidence['efficiency_basis']})" in result["message"]
    assert evidence["compute_days"] == pytest.approx(unscaled["evidence"]["compute_days"] * at_measured)
    assert (evidence["efficiency"] > 1) == (measured_at > 32)
    assert check(measured, "interconnect-scaling")["evidence"]["efficiency"] == pytest.approx(at_quoted)


def test_measured_scaling_points_at_both_counts_decide_the_ratio() -> None:
    # 16 GPUs at 36,000 tokens/s (2,250 per GPU) and 32 at 64,000 (2,000 per GPU): E(32) / E(16) = 2000 / 2250.
    submission = with_throughput(L40S_FSDP, tokens_per_s_per_gpu=2250, measured_at_gpus=16)
    points = [{"gpus": 16, "tokens_per_s": 36_000}, {"gpus": 32, "tokens_per_s": 64_000}]
    submission["measurements"] = {"scaling": points}
    evidence = check(submission, "time-to-result")["evidence"]
    assert evidence["efficiency"] == pytest.approx(2000 / 2250)
    assert evidence["efficiency_basis"] == "measured ratio from 16 to 32 GPUs (measurements.scaling)"
    # Points that miss the measured count leave the model to decide, and the record says why.
    submission["measurements"]["scaling"][0]["gpus"] = 8
    assert check(submission, "time-to-result")["evidence"]["efficiency_basis"] == "modelled ratio from 16 to 32 GPUs"


def test_a_rate_measured_on_fewer_gpus_than_one_model_replica_is_inconsistent() -> None:
    # Tensor 2 × pipeline 2 makes 4-GPU replicas: a rate measured on 2 GPUs was not measured with this layout.
    submission = with_throughput(L40S_FSDP, tokens_per_s_per_gpu=2000, measured_at_gpus=2)
    submission["workload"]["training"]["parallelism"].update(tensor=2, pipeline=2)
    result = check(submission, "time-to-result")
    assert (result["status"], result["rule"]) == ("fail", "inconsistent")
    assert "/workload/training/throughput/measured_at_gpus" in result["message"]
    assert "2 GPUs are not a whole number of model replicas of tensor 2 × pipeline 2 × context 1" in result["message"]


def test_hardware_tflops_per_gpu_is_read_with_recompute_counted() -> None:
    # 400 TFLOP/s of hardware FLOPs at 4.8024e10 FLOPs per token (selective recompute) is 8,329 tokens/s.
    hardware_flops_per_token = 6 * N + 16 * L * S * H
    result = check(with_throughput(H100_ZERO1, hardware_tflops_per_gpu=400), "time-to-result")
    assert result["evidence"]["throughput_from"] == "hardware_tflops_per_gpu"
    assert result["evidence"]["tokens_per_s_per_gpu"] == pytest.approx(400e12 / hardware_flops_per_token)
    assert result["evidence"]["implied_hardware_tflops_per_gpu"] == pytest.approx(400)


def test_an_mfu_is_read_against_the_peak_it_was_divided_by() -> None:
    # MFU 0.4 of a 900 TFLOP/s peak: 0.4 × 900e12 / (6N + 12Lsh) tokens/s, not of the H100's 989.4.
    model_flops_per_token = 6 * N + 12 * L * S * H
    result = check(with_throughput(H100_ZERO1, mfu=0.4, mfu_peak_tflops=900), "time-to-result")
    assert result["evidence"]["tokens_per_s_per_gpu"] == pytest.approx(0.4 * 900e12 / model_flops_per_token)
    assert result["evidence"]["peak_bf16_tflops"] == 900


def test_without_a_stated_rate_the_checks_use_the_modelled_one_and_say_so() -> None:
    submission = with_throughput(H100_ZERO1)
    del submission["workload"]["training"]["throughput"]
    for check_id in ("time-to-result", "interconnect-scaling"):
        evidence = check(submission, check_id)["evidence"]
        assert evidence["throughput_from"] == "modelled"
        assert evidence["tokens_per_s_per_gpu"] == evidence["modelled_tokens_per_s_per_gpu"]
    assert "modelled" in check(submission, "time-to-result")["message"]

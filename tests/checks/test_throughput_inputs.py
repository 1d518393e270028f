"""Throughput as people publish it: a rate measured at scale, hardware TFLOP/s per GPU, the peak an MFU used.

Figures are checked by hand from the fixture's own numbers: Llama-2-7B (N = 6,738,415,616 parameters,
32 layers, hidden 4,096, sequence 4,096) trains at 6·N + 12·L·s·h = 4.6875e10 model FLOPs per token, and
with selective recompute 6·N + 16·L·s·h = 4.8024e10 hardware FLOPs per token (rules/estimates/compute.py).
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

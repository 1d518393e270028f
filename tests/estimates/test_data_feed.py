"""Tests for rules.estimates.communication.data_feed: each quotes the figure or source it reproduces."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.estimates.communication.data_feed import (
    cluster_tokens_per_s,
    cores_left_after_workers,
    decode_cores_needed,
    required_read_gbs,
)


def test_seed_004_step2_throughput_3000_tps_times_8_gpus():
    # Seed 004 step 2: 3,000 tokens/s per GPU × 8 GPUs = 24,000 tokens/s.
    assert cluster_tokens_per_s(3000.0, 8) == 24_000.0


def test_read_bandwidth_for_llama3_scale_pretokenised_uint16():
    # Given 16,384 GPUs at 3,000 tokens/s each (~49M tokens/s), uint16 token ids (2 B/token):
    # 49.152e6 × 2 / 1e9 = 0.098 GB/s; raw UTF-8 text at ~4 B/token doubles it.
    tps = cluster_tokens_per_s(3000.0, 16_384)
    assert required_read_gbs(tps, 2) == pytest.approx(0.098304)
    assert required_read_gbs(tps, 4) == pytest.approx(0.196608)


def test_decode_cores_per_node():
    # 1.2M tokens/s at 50k tokens/s per core = 24 cores, 6 per node on 4 nodes; 5 nodes → ⌈4.8⌉ = 5.
    result = decode_cores_needed(1.2e6, 50_000.0, 4)
    assert result.cluster_cores == pytest.approx(24.0)
    assert result.cores_per_node == 6
    assert decode_cores_needed(1.2e6, 50_000.0, 5).cores_per_node == 5


def test_cores_left_after_dataloader_workers():
    # Given a 112-core DGX H100 (2 × 56), 8 GPUs × 8 workers and 8 trainer cores reserved: 40 left.
    budget = cores_left_after_workers(112, 8, 8, reserved_cores=8)
    assert budget.dataloader_worker_cores == 64
    assert budget.cores_left == 40 and budget.shortfall_cores == 0
    # 8 GPUs × 16 workers + 8 reserved on 112 cores: 24 cores short, none left.
    over = cores_left_after_workers(112, 8, 16, reserved_cores=8)
    assert over.cores_left == 0 and over.shortfall_cores == 24


def test_invalid_inputs_raise():
    with pytest.raises(ValueError):
        required_read_gbs(0, 2)
    with pytest.raises(ValueError):
        decode_cores_needed(1e6, 1e4, 0)
    with pytest.raises(ValueError):
        cores_left_after_workers(112, 8, -1)


@given(
    tps=st.floats(1.0, 1e9),
    per_core=st.floats(1.0, 1e7),
    nodes=st.integers(1, 4096),
    cores=st.integers(1, 512),
    workers=st.integers(0, 64),
)
def test_results_are_finite_and_non_negative(tps, per_core, nodes, cores, workers):
    assert required_read_gbs(tps, 4.0) > 0
    decode = decode_cores_needed(tps, per_core, nodes)
    assert math.isfinite(decode.cluster_cores) and decode.cores_per_node >= 1
    budget = cores_left_after_workers(cores, 8, workers)
    assert budget.cores_left >= 0 and budget.shortfall_cores >= 0


def test_decode_capacity_is_the_workers_capped_by_unreserved_cores() -> None:
    # PyTorch DataLoader: decoding runs in num_workers processes per training process (torch.utils.data docs).
    from rules.estimates.communication.data_feed import decode_capacity_cores

    few_workers = decode_capacity_cores(112, 8, 2, reserved_cores=16)  # 16 workers on 96 free cores
    many_workers = decode_capacity_cores(64, 8, 10, reserved_cores=8)  # 80 workers on 56 free cores

    assert (few_workers.capacity_cores, few_workers.oversubscribed_cores) == (16, 0)
    assert (many_workers.capacity_cores, many_workers.oversubscribed_cores) == (56, 24)

"""Tests for rules.estimates.memory.host_memory: each quotes the published figure it reproduces."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.estimates.memory.host_memory import (
    checkpoint_staging_bytes_per_node,
    dataloader_prefetch_bytes_per_gpu,
    host_memory_per_node,
    host_to_gpu_memory_ratio,
    offload_bytes_per_node,
)
from rules.estimates.reliability.checkpoint import checkpoint_size

GIB = 2**30


def test_host_memory_sums_every_term():
    # Given 8 GPUs, 8 workers/GPU at 2 GiB RSS, 4 GiB pinned/GPU, 6 GiB trainer RSS/GPU, 64 GiB OS,
    # a 70B bf16+Adam checkpoint (980 GB) sharded over 4 nodes staged for async save.
    staging = checkpoint_staging_bytes_per_node(checkpoint_size(70e9).total_bytes, 4)
    result = host_memory_per_node(
        8,
        8,
        2 * GIB,
        4 * GIB,
        64 * GIB,
        trainer_rss_bytes_per_gpu=6 * GIB,
        checkpoint_staging_bytes_per_node=staging,
    )
    assert result.dataloader_workers_bytes == 128 * GIB
    assert result.pinned_buffers_bytes == 32 * GIB
    assert result.trainer_processes_bytes == 48 * GIB
    assert result.checkpoint_staging_bytes == pytest.approx(245e9)
    assert result.offload_bytes == 0.0
    assert result.total_bytes == pytest.approx((128 + 32 + 48 + 64) * GIB + 245e9)
    assert result.total_gib == pytest.approx(272 + 245e9 / GIB)


def test_zero_offload_14_bytes_per_param_on_cpu_ren_2021():
    # ZeRO-Offload (arXiv 2101.06840): fp16 params stay on GPU (2 B); fp16 grads (2) + fp32 params,
    # momentum, variance (12) on CPU = 14 B/param. A 13B model on one 8-GPU node, ZeRO-2 over 8 ranks:
    # all of it on this node: 182 GB.
    assert offload_bytes_per_node(13e9, gpus_per_node=8, model_state_shards=8) == pytest.approx(182e9)
    # Over 4 nodes (32 shards) each node holds a quarter.
    assert offload_bytes_per_node(13e9, 8, 32) == pytest.approx(182e9 / 4)
    # Single GPU (the paper's headline case): all 14 B/param on that host.
    assert offload_bytes_per_node(13e9, 1, 1) == pytest.approx(182e9)


def test_prefetch_bytes_per_pytorch_dataloader_docs():
    # torch.utils.data.DataLoader: prefetch_factor=2 → 2 * num_workers batches in flight.
    assert dataloader_prefetch_bytes_per_gpu(256e6, 8) == pytest.approx(2 * 8 * 256e6)
    assert dataloader_prefetch_bytes_per_gpu(256e6, 0) == 0.0


def test_dgx_h200_host_ratio_is_1_8():
    # DGX H200: 2 TB host RAM for 8 × 141 GB = 1.128 TB of GPU memory → 1.77×, below the 2× rule of thumb.
    assert host_to_gpu_memory_ratio(2e12, 8 * 141e9) == pytest.approx(1.773, abs=0.001)


def test_invalid_inputs_raise():
    with pytest.raises(ValueError):
        host_memory_per_node(0, 8, GIB, GIB, GIB)
    with pytest.raises(ValueError):
        host_memory_per_node(8, -1, GIB, GIB, GIB)
    with pytest.raises(ValueError):
        offload_bytes_per_node(1e9, 8, 0)


@given(
    gpus=st.integers(1, 16),
    workers=st.integers(0, 32),
    rss=st.floats(0, 1e11),
    pinned=st.floats(0, 1e11),
    os_reserve=st.floats(0, 1e12),
)
def test_total_is_finite_and_non_negative(gpus, workers, rss, pinned, os_reserve):
    total = host_memory_per_node(gpus, workers, rss, pinned, os_reserve).total_bytes
    assert math.isfinite(total) and total >= 0


def test_a_dgx_h200_training_node_by_hand() -> None:
    # Given 128 DGX H200 nodes (8 GPUs of 140 GiB, 2 TiB of host RAM), 4 dataloader workers of 2 GiB and
    # 1 GiB of pinned buffers per GPU, a 32 GiB OS reserve and a 1.12e12-byte checkpoint staged in 128 shares,
    from rules.estimates.memory.host_memory import Dataloader, training_node_host_ram
    from rules.estimates.model.layout import training_layout

    node = training_node_host_ram(training_layout(None, 8, 128), 2048, 140, Dataloader(4, 2.0, 1.0), 32, 0.0,
                                  1.12e12)

    # then a node needs 64 + 8 + 32 GiB + 8.75e9 B = 112.15 GiB, and holds 2048 / 1120 = 1.83× its GPU memory.
    assert node.need.dataloader_workers_bytes == 64 * GIB and node.need.pinned_buffers_bytes == 8 * GIB
    assert node.need.checkpoint_staging_bytes == 8.75e9
    assert node.need.total_gib == pytest.approx(104 + 8.75e9 / GIB)
    assert node.gpu_memory_per_node_gib == 1120
    assert node.host_to_gpu_memory_ratio == pytest.approx(2048 / 1120)
    assert node.spare_fraction == pytest.approx(1 - node.need.total_gib / 2048)

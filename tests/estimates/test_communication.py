"""Tests for rules.estimates.communication.collectives: ZeRO's and FSDP's collectives per optimizer step."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.estimates.communication.collectives import (
    communication_bytes_per_step,
    communication_time_s,
    step_communication,
)
from rules.estimates.communication.interconnect import allreduce_time_s
from rules.estimates.memory.model_state import TrainedModel
from rules.estimates.model.layout import training_layout


def test_zero_paper_section_7_communication_volumes():
    # ZeRO (arXiv 1910.02054) §7: DDP all-reduce 2Ψ; ZeRO-1/2 reduce-scatter + all-gather = 2Ψ (same);
    # ZeRO-3 all-gather fwd + all-gather bwd + reduce-scatter = 3Ψ (1.5×).
    psi, n = 7e9, 64
    ddp = communication_bytes_per_step("ddp", psi, n, ranks_per_node=8)
    zero2 = communication_bytes_per_step("zero2", psi, n, ranks_per_node=8)
    zero3 = communication_bytes_per_step("zero3", psi, n, ranks_per_node=8)
    assert ddp.gradient_bytes == pytest.approx(2 * psi)  # bf16 gradients: 2Ψ bytes
    assert ddp.bus_bytes_per_gpu == pytest.approx(2 * (n - 1) / n * 2 * psi)
    assert zero2.bus_bytes_per_gpu == pytest.approx(ddp.bus_bytes_per_gpu)
    assert zero3.bus_bytes_per_gpu == pytest.approx(1.5 * ddp.bus_bytes_per_gpu)
    assert ddp.allreduce_equivalents == pytest.approx(1.0)
    assert zero2.allreduce_equivalents == pytest.approx(1.0)
    assert zero3.allreduce_equivalents == pytest.approx(1.5)
    assert {c.scope for c in zero3.collectives} == {"cluster"}


def test_fsdp_hybrid_is_zero3_in_node_plus_shard_allreduce_across_nodes():
    # PyTorch FSDP HYBRID_SHARD: shard within the node, replicate (all-reduce the shard) across nodes.
    psi, g, nodes = 7e9, 8, 4
    step = communication_bytes_per_step("fsdp-hybrid", psi, g * nodes, ranks_per_node=g)
    intra = [c for c in step.collectives if c.scope == "node"]
    inter = [c for c in step.collectives if c.scope == "cluster"]
    assert [c.kind for c in intra] == ["all-gather", "all-gather", "reduce-scatter"]
    assert len(inter) == 1 and inter[0].kind == "all-reduce"
    assert inter[0].size_bytes == pytest.approx(2 * psi / g)
    assert inter[0].ranks == nodes and inter[0].parallel_groups == g
    # Time: intra at NVLink busbw, shard all-reduce with the 8 groups sharing 8 × 48 GB/s of NICs.
    t = communication_time_s(step, node_busbw_gbs=370.0, cluster_busbw_gbs=8 * 48.0)
    expected = 3 * 7 / 8 * 2 * psi / 370e9 + 2 * 3 / 4 * (2 * psi / g) / 48e9
    assert t == pytest.approx(expected)


def test_single_node_strategies_stay_in_node_scope():
    step = communication_bytes_per_step("fsdp-hybrid", 7e9, 8, ranks_per_node=8)
    assert {c.scope for c in step.collectives} == {"node"}
    assert step.allreduce_equivalents == pytest.approx(1.5)


def test_hybrid_needs_whole_nodes():
    with pytest.raises(ValueError, match="multiple"):
        communication_bytes_per_step("fsdp-hybrid", 7e9, 12, ranks_per_node=8)


@given(
    size=st.floats(1.0, 1e13),
    ranks=st.integers(1, 100_000),
    busbw=st.floats(0.1, 1e4),
    strategy=st.sampled_from(["ddp", "zero1", "zero2", "zero3", "fsdp-full", "fsdp-hybrid"]),
)
def test_times_are_finite_and_non_negative(size, ranks, busbw, strategy):
    assert 0 <= allreduce_time_s(size, ranks, busbw) < math.inf
    step = communication_bytes_per_step(strategy, size, ranks * 8, ranks_per_node=8)
    t = communication_time_s(step, busbw, busbw)
    assert math.isfinite(t) and t >= 0


def test_gradient_accumulation_repeats_what_cannot_wait_for_the_last_micro_batch():
    # ZeRO §7.2.2 and PyTorch FSDP: ZeRO-3/FSDP gather parameters for every micro-batch's forward and
    # backward and reduce-scatter every micro-batch; DDP (no_sync) and ZeRO-1 communicate once per step;
    # ZeRO-2 reduce-scatters every micro-batch (DeepSpeed stage_1_and_2.py) and gathers once.
    psi, n, k = 7e9, 64, 8
    one = {s: communication_bytes_per_step(s, psi, n, 8) for s in ("ddp", "zero1", "zero2", "zero3", "fsdp-full")}
    acc = {s: communication_bytes_per_step(s, psi, n, 8, accumulation_steps=k) for s in one}
    assert acc["ddp"].bus_bytes_per_gpu == pytest.approx(one["ddp"].bus_bytes_per_gpu)
    assert acc["zero1"].bus_bytes_per_gpu == pytest.approx(one["zero1"].bus_bytes_per_gpu)
    assert acc["zero2"].bus_bytes_per_gpu == pytest.approx((k + 1) / 2 * one["zero2"].bus_bytes_per_gpu)
    assert acc["zero3"].bus_bytes_per_gpu == pytest.approx(k * one["zero3"].bus_bytes_per_gpu)
    assert acc["fsdp-full"].allreduce_equivalents == pytest.approx(1.5 * k)
    t1 = communication_time_s(one["zero3"], 370.0, 370.0)
    assert communication_time_s(acc["zero3"], 370.0, 370.0) == pytest.approx(k * t1)


def test_adapter_training_communicates_only_trainable_gradients():
    # A LoRA run on a 7B base with 40M trainable parameters: DDP all-reduces 40M gradients, while
    # ZeRO-3 still gathers all 7B frozen and trainable weights forward and backward.
    psi, trainable, n = 7e9, 4e7, 8
    ddp = communication_bytes_per_step("ddp", psi, n, 8, trainable_parameters=trainable)
    zero3 = communication_bytes_per_step("zero3", psi, n, 8, trainable_parameters=trainable)
    assert ddp.bus_bytes_per_gpu == pytest.approx(2 * 7 / 8 * 2 * trainable)
    assert zero3.bus_bytes_per_gpu == pytest.approx(7 / 8 * (2 * 2 * psi + 2 * trainable))
    with pytest.raises(ValueError, match="exceeds"):
        communication_bytes_per_step("ddp", psi, n, 8, trainable_parameters=2 * psi)


def test_invalid_strategy_names_allowed_values():
    with pytest.raises(ValueError, match="ddp, zero1, zero2, zero3, fsdp-full, fsdp-hybrid"):
        communication_bytes_per_step("zero4", 7e9, 8, 8)


def test_a_tensor_parallel_job_communicates_one_model_shard_per_data_parallel_group():
    # Llama-2-70B-like 70e9 parameters, bf16 AdamW, TP 8 × PP 4 on 128 nodes (DP 32): each data-parallel
    # group all-reduces 70e9 / 32 = 2.1875e9 bf16 gradients, 4.375e9 B, 2 × 31/32 × 4.375e9 bus bytes.
    model = TrainedModel(70e9, 70e9, "bf16-mixed", "adamw")
    layout = training_layout(None, 8, 128, tensor=8, pipeline=4, sharding="ddp")

    step = step_communication(model, layout, accumulation_steps=4, convention="zero-paper")

    assert step.gradient_bytes == pytest.approx(4.375e9)
    assert step.bus_bytes_per_gpu == pytest.approx(2 * 31 / 32 * 4.375e9)
    assert step_communication(model, layout, 4, "zero-paper", sharding="zero3").strategy == "zero3"


def test_context_parallel_ranks_reduce_their_gradients_with_the_data_parallel_ranks():
    # Megatron-LM reduces gradients over get_data_parallel_group(with_context_parallel=True): 7e9 parameters
    # on 64 GPUs at cp 4 (DP 16) all-reduce 1.4e10 bf16 bytes over 16 × 4 = 64 ranks, 8 of them per node.
    model = TrainedModel(7e9, 7e9, "bf16-mixed", "adamw")
    layout = training_layout(64, 8, 8, context=4, sharding="ddp")

    step = step_communication(model, layout, accumulation_steps=1, convention="zero-paper")

    assert [(c.kind, c.ranks, c.scope) for c in step.collectives] == [("all-reduce", 64, "cluster")]
    assert step.bus_bytes_per_gpu == pytest.approx(2 * 63 / 64 * 1.4e10)

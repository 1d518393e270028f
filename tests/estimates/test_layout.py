"""Tests for rules.estimates.model.layout: the data-parallel size and node counts of Megatron-LM's rank layout."""

import pytest

from rules.estimates.model.layout import NotWholeReplicas, hybrid_shard_group, resized, training_layout, with_sharding


def test_megatron_layout_128_nodes_tp8_pp4_leaves_32_data_parallel_ranks():
    # Megatron-LM parallel_state.initialize_model_parallel: data_parallel_size = world // (tp × pp):
    # 128 nodes × 8 GPUs = 1024; 1024 // (8 × 4) = 32.
    layout = training_layout(None, 8, 128, tensor=8, pipeline=4, sharding="zero1")

    assert (layout.gpus, layout.nodes, layout.data_parallel) == (1024, 128, 32)
    assert layout.model_parallel == 32
    # tp 8 fills each node, so one data-parallel rank per node; the job grows by lcm(8, 32) = 32 GPUs.
    assert layout.dp_ranks_per_node == 1
    assert layout.whole_unit_gpus == 32
    assert layout.gpus_on_node == 8


def test_a_job_on_part_of_a_node_occupies_one_node():
    layout = training_layout(4, 8, 2)
    assert (layout.gpus, layout.nodes, layout.data_parallel, layout.gpus_on_node) == (4, 1, 4, 4)
    assert layout.dp_ranks_per_node == 4


def test_fsdp_hybrid_shards_over_one_nodes_data_parallel_ranks_by_default():
    # PyTorch FSDP HYBRID_SHARD: shard within a node, replicate across nodes. 64 GPUs at tp 2 give 32
    # data-parallel ranks, 4 per node; gcd(32, 4) = 4.
    assert hybrid_shard_group(32, 8, 2) == 4
    assert training_layout(64, 8, 8, tensor=2, sharding="fsdp-hybrid").shard_group == 4
    assert training_layout(64, 8, 8, tensor=2, sharding="fsdp-hybrid", shard_group=8).shard_group == 8
    assert training_layout(64, 8, 8, sharding="zero3").shard_group is None


def test_resizing_keeps_model_parallelism_and_drops_a_shard_group_that_no_longer_divides():
    layout = training_layout(None, 8, 128, tensor=8, pipeline=4, sharding="zero1")
    half = resized(layout, 512)
    assert (half.gpus, half.nodes, half.data_parallel, half.tensor, half.pipeline) == (512, 64, 16, 8, 4)
    hybrid = training_layout(64, 8, 8, sharding="fsdp-hybrid", shard_group=16)
    assert resized(hybrid, 128).shard_group == 16  # 16 divides the 128 ranks
    assert resized(hybrid, 8).shard_group is None  # 16 exceeds the 8 ranks


def test_switching_to_fsdp_hybrid_fills_the_default_shard_group():
    layout = training_layout(64, 8, 8, sharding="zero3")
    assert with_sharding(layout, "fsdp-hybrid").shard_group == 8
    assert with_sharding(layout, "zero2").sharding == "zero2"


def test_context_parallelism_takes_its_ranks_before_data_parallelism():
    # Megatron-LM initialize_model_parallel: data_parallel_size = world // (tp × pp × cp): 64 // (2 × 1 × 4) = 8.
    layout = training_layout(64, 8, 8, tensor=2, context=4, sharding="zero1")

    assert (layout.data_parallel, layout.context, layout.replica_gpus) == (8, 4, 8)
    # Context-parallel ranks hold the same parameter shard: the parameters split over t × p = 2 only, and
    # gradients and optimizer state go over the 8 × 4 = 32 ranks of get_data_parallel_group(with_context_parallel=True).
    assert (layout.model_parallel, layout.shard_ranks) == (2, 32)
    # Ranks ordered tensor, context, data (fastest first): a node of 8 GPUs holds 8 / 2 = 4 of those 32 ranks.
    assert layout.dp_ranks_per_node == 4
    assert layout.whole_unit_gpus == 8
    doubled = resized(layout, 128)
    assert (doubled.data_parallel, doubled.context, doubled.shard_ranks) == (16, 4, 64)


def test_a_gpu_count_that_tensor_pipeline_context_does_not_divide_is_refused_as_megatron_does():
    # Megatron-LM initialize_model_parallel raises "world_size (…) is not divisible by tensor_model_parallel_size
    # (…) x pipeline_model_parallel_size (…) x context_parallel_size (…)".
    with pytest.raises(NotWholeReplicas, match=r"64 GPUs .* tensor 2 × pipeline 1 × context 3 = 6 GPUs"):
        training_layout(64, 8, 8, tensor=2, context=3)
    with pytest.raises(NotWholeReplicas, match=r"tensor 3 × pipeline 1 × context 1 = 3 GPUs"):
        training_layout(None, 8, 8, tensor=3)
    with pytest.raises(NotWholeReplicas):
        training_layout(4, 8, 1, tensor=8)  # fewer GPUs than one replica
    assert training_layout(64, 8, 8, tensor=2, pipeline=4, context=8).data_parallel == 1


def test_fsdp_hybrid_shards_over_one_nodes_data_and_context_ranks():
    # 64 GPUs at tp 2, cp 2: 16 data-parallel ranks × 2 context ranks = 32 holding each shard, 4 per node.
    assert training_layout(64, 8, 8, tensor=2, context=2, sharding="fsdp-hybrid").shard_group == 4
    assert with_sharding(training_layout(64, 8, 8, context=8, sharding="zero3"), "fsdp-hybrid").shard_group == 8

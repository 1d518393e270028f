"""Tests for rules.estimates.layout: the data-parallel size and node counts of Megatron-LM's rank layout."""

from rules.estimates.layout import hybrid_shard_group, resized, training_layout, with_sharding


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

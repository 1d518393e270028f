"""Tests for rules.estimates.memory.comm_buffers: each framework default is quoted with its source and sized by hand."""

from dataclasses import replace

import pytest

from rules.errors import InconsistentInput
from rules.estimates.memory.activations import ActivationSaving
from rules.estimates.memory.comm_buffers import (
    NCCL_CONNECTION_BYTES,
    BufferInputs,
    CommunicationSettings,
    communication_buffers,
    framework_of,
    nccl_communicator_bytes,
    process_groups,
)
from rules.estimates.memory.model_state import TrainedModel
from rules.estimates.memory.step_memory import MemorySettings, TrainingBatch, TrainingJob, training_memory
from rules.estimates.model.layout import training_layout
from rules.estimates.model.shapes import ModelShape

NCCL_32 = CommunicationSettings(nccl_channels=32)
# NCCL src/init.cc + src/include/device.h defaults: Simple NCCL_BUFFSIZE 4 MiB; LL 8 lines × 512 threads ×
# 8 steps × 16 B; LL128 120 elements × 640 threads × 8 steps × 8 B.
SIMPLE, LL, LL128 = 4_194_304, 524_288, 4_915_200
# HF meta-llama/Meta-Llama-3-70B config.json
LLAMA3_70B = ModelShape(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128256, mlp="swiglu",
                        norm="rmsnorm", dropout=False)


def _inputs(sharding: str, gpus: int = 64, convention: str = "zero-paper", **layout: int) -> BufferInputs:
    return BufferInputs(layout=training_layout(gpus, 8, gpus // 8, sharding=sharding, **layout), convention=convention,
                        gradients_on_gpu_bytes=14e9, working_bytes_per_param=2, largest_unit_parameters=None)


def test_one_communicator_holds_2_ring_connections_of_the_three_protocol_buffers_per_channel():
    # 4,194,304 + 524,288 + 4,915,200 = 9,633,792 B per connection (9.1875 MiB); × 2 × 32 channels
    # = 616,562,688 B = 588 MiB per communicator.
    assert NCCL_CONNECTION_BYTES == SIMPLE + LL + LL128 == 9_633_792
    assert nccl_communicator_bytes(NCCL_32) == 32 * 2 * 9_633_792 == 616_562_688
    assert nccl_communicator_bytes(CommunicationSettings(nccl_channels=0)) == 0
    with pytest.raises(InconsistentInput, match="nccl_channels"):
        nccl_communicator_bytes(CommunicationSettings(nccl_channels=-1))


def test_each_process_group_of_more_than_one_rank_is_a_communicator():
    # Pure data parallelism: the gradient group is all GPUs, the default group is the same communicator.
    assert process_groups(training_layout(64, 8, 8, sharding="zero3")) == (64,)
    # Megatron-LM t = 8, p = 4 on 64 GPUs: data 2, tensor 8, pipeline 4, and the default group of all 64.
    assert process_groups(training_layout(64, 8, 8, tensor=8, pipeline=4)) == (2, 8, 4, 64)
    # Context parallelism 4: the data × context group spans all 64 GPUs; the context group is another.
    assert process_groups(training_layout(64, 8, 8, sharding="zero3", context=4)) == (64, 4)
    # FSDP HYBRID_SHARD on 16 nodes of 8: the intra-node shard group, the inter-node replicate group, the world.
    assert process_groups(training_layout(128, 8, 16, sharding="fsdp-hybrid")) == (8, 16, 128)
    # One GPU talks to nobody.
    assert process_groups(training_layout(1, 8, 1)) == ()


def test_the_sharding_and_convention_name_the_framework():
    assert framework_of("ddp", "zero-paper") == "pytorch-ddp"
    assert framework_of("ddp", "megatron") == "megatron-core"
    assert framework_of("zero1", "megatron-distributed-optimizer") == "megatron-core"
    assert framework_of("zero1", "zero-paper") == framework_of("zero3", "megatron") == "deepspeed-zero"
    assert framework_of("fsdp-full", "zero-paper") == framework_of("fsdp-hybrid", "megatron") == "pytorch-fsdp"


def test_pytorch_ddp_buckets_copy_every_gradient_unless_they_are_the_gradients():
    # PyTorch DistributedDataParallel docs, gradient_as_bucket_view: "the saved memory size will be equal
    # to the total gradients size", so without it the buckets hold 7e9 × 2 B = 14e9 B more.
    found = communication_buffers(_inputs("ddp"), NCCL_32)
    assert found.framework == "pytorch-ddp"
    assert found.bucket_bytes == 14e9
    assert found.nccl_bytes == 616_562_688
    assert found.total_bytes == 14e9 + 616_562_688
    as_views = communication_buffers(replace(_inputs("ddp"), gradient_as_bucket_view=True), NCCL_32)
    assert as_views.bucket_bytes == 0


def test_deepspeed_zero_keeps_one_reduce_bucket_of_5e8_working_elements():
    # DeepSpeedZeroConfig.reduce_bucket_size 5e8 with contiguous_gradients: 5e8 × 2 B (bf16) = 1e9 B, at every
    # stage and whatever the model size (stage_1_and_2.py ipg_buffer, stage3.py __ipg_bucket_flat_buffer).
    for sharding in ("zero1", "zero2", "zero3"):
        assert communication_buffers(_inputs(sharding), NCCL_32).bucket_bytes == 1e9
    fp32 = replace(_inputs("zero3"), working_bytes_per_param=4)
    assert communication_buffers(fp32, NCCL_32).bucket_bytes == 2e9


def test_megatron_buckets_are_views_into_the_buffers_the_model_state_counts():
    # megatron/core/distributed/param_and_grad_buffer.py: param.main_grad and the buckets are views into grad_data.
    for sharding, convention in (("ddp", "megatron"), ("zero1", "megatron-distributed-optimizer")):
        found = communication_buffers(_inputs(sharding, convention=convention, tensor=8), NCCL_32)
        assert found.framework == "megatron-core"
        assert found.bucket_bytes == 0
        assert found.communicators == 3  # data 8, tensor 8 and the default group of all 64
        assert found.nccl_bytes == found.communicators * 616_562_688


def test_fsdp_holds_two_sharded_communication_buffers_of_its_largest_unit():
    # PyTorch "FSDP Notes", FSDP buffers sizes: 2 × unit params × dtype bytes / num_gpus. Llama-3-70B's largest
    # unit is the root (untied embedding and output 2 × 128256 × 8192 + final norm 8192 = 2,101,354,496
    # parameters); in bf16 on 128 ranks: 2 × 2,101,354,496 × 2 / 128 = 65,667,328 B.
    inputs = replace(_inputs("fsdp-full", gpus=128), largest_unit_parameters=2 * 128256 * 8192 + 8192)
    assert communication_buffers(inputs, NCCL_32).bucket_bytes == 65_667_328
    # HYBRID_SHARD shards a unit over one node's 8 ranks only: 16 times more.
    hybrid = replace(inputs, layout=training_layout(128, 8, 16, sharding="fsdp-hybrid"))
    assert communication_buffers(hybrid, NCCL_32).bucket_bytes == 65_667_328 * 16
    assert communication_buffers(replace(inputs, largest_unit_parameters=None), NCCL_32).bucket_bytes == 0


def test_training_memory_adds_the_buffers_and_fragments_only_the_allocators_share():
    # Given ZeRO's 7.5B on 64 GPUs under zero3 with Llama-2-7B's shape (ZeRO §5: 16 × 7.5e9 / 64 = 1.875e9 B of
    # state), the defaults add one communicator's 616,562,688 B of NCCL buffers and DeepSpeed's 1e9 B bucket,
    shape = ModelShape(layers=32, hidden=4096, heads=32, ffn_hidden=11008, vocab=32000, mlp="swiglu", norm="rmsnorm",
                       dropout=False)
    job = TrainingJob(TrainedModel(7.5e9, 7.5e9, "bf16-mixed", "adamw"), shape,
                      TrainingBatch(sequence_length=4096, micro_batch=1, global_batch=512),
                      ActivationSaving("selective", False, True), virtual_stages=1, offload="none")
    bare = MemorySettings(convention="zero-paper", cuda_context_gib=0.0, fragmentation_fraction=0.05,
                          headroom_fraction=0.1, gathered_layers=2)
    layout = training_layout(64, 8, 8, sharding="zero3")

    without = training_memory(job, layout, 79.65, bare)
    counted = training_memory(job, layout, 79.65, replace(bare, communication=NCCL_32))

    # then the total grows by 616,562,688 + 1e9 × (1 + 5 % fragmentation) = 1,666,562,688 B; NCCL's buffers are
    # cudaMalloc'd by NCCL, outside the caching allocator, so they carry no fragmentation.
    assert counted.communication_bytes == 616_562_688 + 1e9
    assert counted.total_bytes - without.total_bytes == pytest.approx(1_666_562_688)
    assert counted.other_bytes - without.other_bytes == pytest.approx(1_666_562_688)
    assert without.communication is None and without.communication_bytes == 0

"""Tests for rules.estimates.memory.offload: what leaves the GPU, what ZeRO-3 keeps gathered, what the host holds."""

import pytest

from rules.estimates.memory.offload import (
    NO_HOST_MODEL_STATE,
    RankState,
    ZeroSettings,
    from_buffered_total,
    offload_rank_state,
    offloaded_host_state,
    persistent_parameters,
    zero3_working_set_bytes,
)
from rules.estimates.model.shapes import ModelShape

LLAMA2_7B = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=32, ffn_hidden=11008, vocab=32000, mlp="swiglu",
                       norm="rmsnorm", dropout=False)
GPT2_SMALL = ModelShape(layers=12, hidden=768, heads=12, ffn_hidden=3072, vocab=50257, mlp="gelu", norm="layernorm",
                        tied_embeddings=True, linear_biases=True)
DEEPSPEED_DEFAULTS = ZeroSettings()  # deepspeed/runtime/zero/config.py: 5e7, 1e9, 1e5


def _rank(fp32_gradient_bytes: float = 0.0, partitioned: bool = True) -> RankState:
    # 1e9 parameters of one rank under ZeRO-2 on 4 ranks: 2 B weights whole, 2 B gradients and 12 B optimizer / 4.
    gradients = 0.5e9 if partitioned else 2e9
    return RankState(weights_bytes=2e9, gradients_bytes=gradients, gradient_partition_bytes=0.5e9,
                     fp32_gradient_bytes=fp32_gradient_bytes, optimizer_bytes=3e9, gradients_partitioned=partitioned)


def test_nothing_offloaded_leaves_everything_on_the_gpu():
    held = offload_rank_state(_rank(), offload_optimizer=False, offload_parameters=False)
    assert (held.gpu_weights_bytes, held.gpu_gradients_bytes, held.gpu_optimizer_bytes) == (2e9, 0.5e9, 3e9)
    assert held.host_bytes == 0


def test_zero_offload_moves_the_gradient_partition_with_the_optimizer_ren_2021():
    # ZeRO-Offload: fp16 gradients and the fp32 optimizer state go to the CPU, fp16 parameters stay.
    held = offload_rank_state(_rank(), offload_optimizer=True, offload_parameters=False)
    assert (held.gpu_weights_bytes, held.gpu_gradients_bytes, held.gpu_optimizer_bytes) == (2e9, 0.0, 0.0)
    assert (held.host_gradients_bytes, held.host_optimizer_bytes) == (0.5e9, 3e9)


def test_an_fp32_gradient_copy_receives_the_gradients_on_the_host_deepspeed_stage_1_and_2():
    # DeepSpeed copies the 16-bit partition into the pinned fp32 buffer: the host holds 4 B, not 2 + 4 B.
    held = offload_rank_state(_rank(fp32_gradient_bytes=1e9), offload_optimizer=True, offload_parameters=False)
    assert held.host_gradients_bytes == 1e9 and held.host_bytes == 4e9
    assert held.gpu_gradients_bytes == 0


def test_unpartitioned_gradients_stay_on_the_gpu_under_zero1():
    held = offload_rank_state(_rank(partitioned=False), offload_optimizer=True, offload_parameters=False)
    assert held.gpu_gradients_bytes == 2e9 and held.host_gradients_bytes == 0.5e9


def test_parameter_offload_moves_the_weights_too():
    held = offload_rank_state(_rank(), offload_optimizer=True, offload_parameters=True)
    assert held.gpu_weights_bytes == 0 and held.host_weights_bytes == 2e9
    assert held.host_bytes == 5.5e9


def test_persistent_parameters_of_llama2_7b_are_its_rms_norms():
    # 32 layers × 2 RMSNorms + the final one, 4,096 each: 65 × 4,096 = 266,240 (every matrix exceeds 1e5).
    assert persistent_parameters(LLAMA2_7B, 100_000) == 266_240


def test_persistent_parameters_of_gpt2_small_are_its_layer_norms_and_biases():
    # Per layer: 2 LayerNorms (weight + bias) 4 × 768, biases q, k, v, o 4 × 768, fc 3,072, proj 768:
    # 3,072 + 6,912 = 9,984; × 12 layers + the final LayerNorm 1,536 = 121,344 (HF gpt2's ln_*, c_attn, c_proj,
    # c_fc biases). The 768² matrices (589,824) and the embedding stay partitioned.
    assert persistent_parameters(GPT2_SMALL, 100_000) == 121_344
    assert persistent_parameters(GPT2_SMALL, 0) == 0


def test_zero3_working_set_of_llama2_7b_by_hand():
    # (2 × 131,072,000 largest module and its gradient + 5e7 prefetch + 266,240 persistent) × 2 B
    # = 312,410,240 × 2 = 624,820,480.
    working = zero3_working_set_bytes(131_072_000, 266_240, 2, DEEPSPEED_DEFAULTS)
    assert working == 624_820_480
    # It is DeepSpeed's estimator figure 4 × largest_layer_params plus the bucket and the small tensors.
    assert working - 4 * 131_072_000 == 2 * (50_000_000 + 266_240)


def test_zero3_stops_prefetching_when_the_largest_module_fills_max_live_parameters():
    # Llama-3-70B's 1,050,673,152-parameter embedding exceeds stage3_max_live_parameters (1e9): no prefetch room.
    assert zero3_working_set_bytes(1_050_673_152, 0, 2, DEEPSPEED_DEFAULTS) == 4 * 1_050_673_152
    no_bucket = ZeroSettings(stage3_prefetch_bucket_size=0)
    assert zero3_working_set_bytes(1000, 10, 2, no_bucket) == 2 * (2000 + 10)


def test_the_host_holds_its_ranks_offloaded_state_and_half_of_it_again_in_buffers():
    # 8 ranks × 2e9 B; DeepSpeed's additional_buffer_factor 1.5 adds 8e9 B of pinned and staging buffers.
    host = offloaded_host_state(2e9, 8, 1.5)
    assert (host.state_bytes, host.buffer_bytes, host.total_bytes) == (16e9, 8e9, 24e9)
    assert offloaded_host_state(0.0, 8, 1.5) == NO_HOST_MODEL_STATE
    split = from_buffered_total(24e9, 1.5, "DeepSpeed")
    assert (split.state_bytes, split.buffer_bytes) == (16e9, 8e9)


def test_invalid_inputs_raise():
    with pytest.raises(ValueError, match="ranks_on_node"):
        offloaded_host_state(1e9, 0, 1.5)
    with pytest.raises(ValueError, match="bytes_per_param"):
        zero3_working_set_bytes(1e6, 0, 0, DEEPSPEED_DEFAULTS)
    with pytest.raises(ValueError, match="offload_optimizer"):
        offload_rank_state(_rank(), offload_optimizer=1, offload_parameters=False)

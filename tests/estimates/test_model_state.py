"""Tests for rules.estimates.memory.model_state: each published number is quoted with its source."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.estimates.memory.model_state import (
    BYTE_CONVENTIONS,
    DEEPSPEED_STAGE3,
    OPTIMIZERS,
    PRECISIONS,
    SHARDINGS,
    ModelStatePerGpu,
    StateBytesPerParam,
    TrainedModel,
    effective_sharding,
    gathered_parameters_bytes,
    model_state_bytes_per_param,
    model_state_on_gpu,
    model_state_per_gpu_bytes,
)
from rules.estimates.model.layout import training_layout

GB = 1e9  # the ZeRO paper's GB


def _zero_paper() -> StateBytesPerParam:
    return model_state_bytes_per_param("bf16-mixed", "adamw", "zero-paper")

# ---------------------------------------------------------------------------------------------------
# 1. Byte conventions
# ---------------------------------------------------------------------------------------------------
def test_conventions_totals_match_reference_readme():
    # ZeRO §3.1: 2 + 2 + K, K = 12; Megatron/HF: 18; seed guide: 2 + 2 + 8 = 12 (no master weights).
    assert BYTE_CONVENTIONS["zero-paper"].total_bytes_per_param == 16
    assert BYTE_CONVENTIONS["megatron"].total_bytes_per_param == 18
    assert BYTE_CONVENTIONS["megatron-distributed-optimizer"].total_bytes_per_param == 18
    assert BYTE_CONVENTIONS["megatron-distributed-optimizer"].optimizer_sharded_over_data_parallel
    assert BYTE_CONVENTIONS["seed-rough"].total_bytes_per_param == 12
    assert BYTE_CONVENTIONS["seed-rough"].master_weights_bytes_per_param == 0
    # DeepSpeed stage_1_and_2.py: 2 + 18 (2 + 4 fp32 gradients + 12) = 20; stage3.py: 18.
    assert BYTE_CONVENTIONS["deepspeed"].total_bytes_per_param == 20
    assert BYTE_CONVENTIONS["deepspeed"].fp32_gradient_bytes_per_param == 4
    assert DEEPSPEED_STAGE3.total_bytes_per_param == 18
    for conv in BYTE_CONVENTIONS.values():
        assert conv.citation


def test_default_convention_is_zero_paper_16_bytes():
    assert model_state_bytes_per_param("bf16-mixed", "adamw") == _zero_paper()
    assert _zero_paper().total_bytes_per_param == 16


@pytest.mark.parametrize(
    ("precision", "optimizer", "convention", "expected"),
    [
        ("bf16-mixed", "adamw", "zero-paper", (2, 2, 12)),
        ("fp16-mixed", "adam", "zero-paper", (2, 2, 12)),
        ("bf16-mixed", "adamw", "megatron", (2, 4, 12)),  # 18 B/param
        ("bf16-mixed", "adamw", "seed-rough", (2, 2, 8)),  # 12 B/param
        ("fp32", "adamw", "zero-paper", (4, 4, 8)),  # pure fp32 AdamW = 4 + 4 + 8
        ("fp32", "adamw", "megatron", (4, 4, 8)),  # conventions only differ in mixed precision
        ("bf16-mixed", "adamw-8bit", "zero-paper", (2, 2, 6)),  # 8-bit moments 2 + master 4
        ("fp32", "adamw-8bit", "zero-paper", (4, 4, 2)),
        ("bf16-mixed", "sgd-momentum", "zero-paper", (2, 2, 8)),  # momentum 4 + master 4
        ("fp32", "sgd-momentum", "zero-paper", (4, 4, 4)),
        ("bf16-mixed", "sgd", "zero-paper", (2, 2, 4)),  # master only
        ("fp32", "sgd", "zero-paper", (4, 4, 0)),
        ("bf16-mixed", "adafactor", "zero-paper", (2, 2, 8)),  # approximate
        ("bf16-pure", "adamw", "zero-paper", (2, 2, 4)),
        ("bf16-pure", "adamw-8bit", "megatron", (2, 2, 2)),
        ("bf16-mixed", "adamw", "deepspeed", (2, 2, 12)),  # + 4 B/param fp32 gradient copy: 20 B/param
        ("fp32", "adamw", "deepspeed", (4, 4, 8)),
    ],
)
def test_bytes_per_param_table(precision, optimizer, convention, expected):
    got = model_state_bytes_per_param(precision, optimizer, convention)
    assert (
        got.weights_bytes_per_param,
        got.gradients_bytes_per_param,
        got.optimizer_bytes_per_param,
    ) == expected
    assert got.citation


@pytest.mark.parametrize(("sharding", "expected"), [("zero1", (2, 2, 4, 12)), ("zero2", (2, 2, 4, 12)),
                                                    ("zero3", (2, 4, 0, 12)), ("fsdp-full", (2, 4, 0, 12))])
def test_deepspeed_convention_counts_as_its_stage_does(sharding, expected):
    # stage_1_and_2.py: 2 + 2 + 4 (fp32 gradient partition) + 12 = 20; stage3.py: 18 = 2 + 4 + 12 (memory.rst).
    got = model_state_bytes_per_param("bf16-mixed", "adamw", "deepspeed", sharding)
    assert (got.weights_bytes_per_param, got.gradients_bytes_per_param, got.fp32_gradient_bytes_per_param,
            got.optimizer_bytes_per_param) == expected


@pytest.mark.parametrize(
    ("kwargs", "unknown", "allowed"),
    [
        ({"precision": "fp8", "optimizer": "adamw"}, "'fp8'", "bf16-mixed"),
        ({"precision": "fp32", "optimizer": "lion"}, "'lion'", "adamw-8bit"),
        ({"precision": "fp32", "optimizer": "adamw", "convention": "nope"}, "'nope'", "seed-rough"),
    ],
)
def test_unknown_enum_names_value_and_allowed(kwargs, unknown, allowed):
    with pytest.raises(ValueError, match="allowed") as info:
        model_state_bytes_per_param(**kwargs)
    assert unknown in str(info.value) and allowed in str(info.value)


# ---------------------------------------------------------------------------------------------------
# 2. Model state per GPU
# ---------------------------------------------------------------------------------------------------
def test_zero_stages_7_5b_64gpus_match_zero_paper_figure1():
    # Rajbhandari et al. SC'20, Figure 1: Ψ = 7.5B, Nd = 64, K = 12 -> 120 / 31.4 / 16.6 / 1.9 GB.
    psi, nd, bpp = 7.5e9, 64, _zero_paper()
    expected_gb = {"ddp": 120.0, "zero1": 31.40625, "zero2": 16.640625, "zero3": 1.875, "fsdp-full": 1.875}
    for sharding, gb in expected_gb.items():
        state = model_state_per_gpu_bytes(psi, psi, bpp, sharding, nd)
        assert state.gpu_total_bytes / GB == pytest.approx(gb, rel=1e-12), sharding
        assert state.host_offload_bytes == 0
    # Paper rounding: 31.4, 16.6, 1.9 GB.
    assert round(model_state_per_gpu_bytes(psi, psi, bpp, "zero1", nd).gpu_total_bytes / GB, 1) == 31.4
    assert round(model_state_per_gpu_bytes(psi, psi, bpp, "zero2", nd).gpu_total_bytes / GB, 1) == 16.6
    assert round(model_state_per_gpu_bytes(psi, psi, bpp, "zero3", nd).gpu_total_bytes / GB, 1) == 1.9


def test_7b_ddp_bf16_adamw_zero_paper_is_112_gb():
    # 16 B/param (ZeRO §3.1) × 7e9 = 112e9 bytes.
    state = model_state_per_gpu_bytes(7e9, 7e9, _zero_paper(), "ddp", data_parallel=8)
    assert state == ModelStatePerGpu(14e9, 14e9, 84e9, 0.0)
    assert state.gpu_total_bytes == 112e9


def test_tensor_and_pipeline_split_parameters_first():
    base = model_state_per_gpu_bytes(7e9, 7e9, _zero_paper(), "zero1", data_parallel=4)
    split = model_state_per_gpu_bytes(
        7e9, 7e9, _zero_paper(), "zero1", data_parallel=4, tensor_parallel=2, pipeline_parallel=4
    )
    assert split.gpu_total_bytes == pytest.approx(base.gpu_total_bytes / 8)


def test_fsdp_hybrid_shards_within_group_only():
    # Given 64 DP ranks on 8 nodes of 8 GPUs, HYBRID_SHARD shards over 8 and replicates across nodes.
    psi, bpp = 70e9, _zero_paper()
    hybrid = model_state_per_gpu_bytes(psi, psi, bpp, "fsdp-hybrid", data_parallel=64, shard_group=8)
    assert hybrid.gpu_total_bytes == pytest.approx(16 * psi / 8)
    full = model_state_per_gpu_bytes(psi, psi, bpp, "fsdp-full", data_parallel=64)
    assert full.gpu_total_bytes == pytest.approx(16 * psi / 64)
    with pytest.raises(ValueError, match="shard_group"):
        model_state_per_gpu_bytes(psi, psi, bpp, "fsdp-hybrid", data_parallel=64)
    with pytest.raises(ValueError, match="divisible"):
        model_state_per_gpu_bytes(psi, psi, bpp, "fsdp-hybrid", data_parallel=60, shard_group=8)


def test_frozen_parameters_carry_weights_only():
    # LoRA: 7e9 frozen base + 40e6 trainable adapters, DDP: 2 B for every weight, 2 + 12 for adapters.
    total, trainable = 7.04e9, 40e6
    state = model_state_per_gpu_bytes(total, trainable, _zero_paper(), "ddp", data_parallel=1)
    assert state.weights_bytes == pytest.approx(2 * total)
    assert state.gradients_bytes == pytest.approx(2 * trainable)
    assert state.optimizer_bytes == pytest.approx(12 * trainable)
    # Under ZeRO-3 the frozen weights are sharded too.
    z3 = model_state_per_gpu_bytes(total, trainable, _zero_paper(), "zero3", data_parallel=8)
    assert z3.weights_bytes == pytest.approx(2 * total / 8)


def test_zero_offload_13b_on_one_gpu_keeps_2_bytes_per_param_on_gpu_and_14_on_host_ren_2021():
    # Ren et al., ZeRO-Offload (USENIX ATC'21): fp16 parameters on the GPU (2M), fp16 gradients, fp32 master
    # weights, momentum and variance on the CPU (2 + 12 = 14M). M = 13e9 on one GPU: 26 GB and 182 GB.
    state = model_state_per_gpu_bytes(13e9, 13e9, _zero_paper(), "zero2", data_parallel=1, offload_optimizer=True)
    assert (state.weights_bytes, state.gradients_bytes, state.optimizer_bytes) == (26e9, 0.0, 0.0)
    assert state.host_offload_bytes == 182e9
    assert state.host_gradients_bytes == 26e9


def test_offload_moves_gradients_with_the_optimizer_and_parameters_under_zero3():
    # Given 13e9 parameters under ZeRO-3 on 8 ranks, zero-paper bytes (2 + 2 + 12),
    psi, bpp = 13e9, _zero_paper()
    opt = model_state_per_gpu_bytes(psi, psi, bpp, "zero3", data_parallel=8, offload_optimizer=True)
    both = model_state_per_gpu_bytes(psi, psi, bpp, "zero3", data_parallel=8, offload_optimizer=True,
                                     offload_parameters=True)
    # then ZeRO-Offload leaves the 2Ψ/8 weight shard on the GPU and moves (2 + 12)Ψ/8 to the host,
    assert (opt.weights_bytes, opt.gradients_bytes, opt.optimizer_bytes) == (2 * psi / 8, 0.0, 0.0)
    assert opt.host_offload_bytes == pytest.approx(14 * psi / 8)
    # and ZeRO-Infinity's offload_param moves the weight shard too: (2 + 2 + 12)Ψ/8 on the host, nothing stays.
    assert both.gpu_total_bytes == 0
    assert both.host_offload_bytes == pytest.approx(16 * psi / 8)
    with pytest.raises(ValueError, match="offload_parameters"):
        model_state_per_gpu_bytes(psi, psi, bpp, "zero2", data_parallel=8, offload_parameters=True)
    with pytest.raises(ValueError, match="offload_optimizer"):
        model_state_per_gpu_bytes(psi, psi, bpp, "ddp", data_parallel=8, offload_optimizer=True)


def test_zero1_offload_keeps_every_gradient_on_the_gpu_for_the_all_reduce():
    # ZeRO-1 does not partition gradients (ZeRO §5.1): the GPU keeps (2 + 2)Ψ and the host its (2 + 12)Ψ/N share.
    psi = 1e9
    state = model_state_per_gpu_bytes(psi, psi, _zero_paper(), "zero1", data_parallel=4, offload_optimizer=True)
    assert (state.weights_bytes, state.gradients_bytes, state.optimizer_bytes) == (2e9, 2e9, 0.0)
    assert state.host_offload_bytes == pytest.approx(14e9 / 4)


def test_deepspeed_convention_keeps_an_fp32_gradient_copy_that_offload_moves_without_the_16_bit_one():
    # DeepSpeed stage_1_and_2.py: 2 (16-bit params) + 18/N (2 16-bit grads + 4 fp32 grads + 12); offloaded, the
    # 16-bit partition is copied into the pinned fp32 buffer: the host holds (4 + 12)Ψ/N, the GPU 2Ψ.
    psi, deepspeed = 1e9, model_state_bytes_per_param("bf16-mixed", "adamw", "deepspeed", sharding="zero2")
    plain = model_state_per_gpu_bytes(psi, psi, deepspeed, "zero2", data_parallel=8)
    offloaded = model_state_per_gpu_bytes(psi, psi, deepspeed, "zero2", data_parallel=8, offload_optimizer=True)
    assert plain.gpu_total_bytes == 2e9 + 18e9 / 8
    assert plain.gradients_bytes == 6e9 / 8
    assert offloaded.gpu_total_bytes == 2e9
    assert offloaded.host_offload_bytes == 16e9 / 8 and offloaded.host_gradients_bytes == 4e9 / 8


def test_megatron_conventions_per_gpu_give_18_and_6_plus_12_over_dp():
    # Megatron theoretical_memory_usage.py: 18 B/param; distributed optimizer 6 + 12/DP B/param.
    psi, dp = 1e9, 16
    meg = model_state_bytes_per_param("bf16-mixed", "adamw", "megatron")
    assert model_state_per_gpu_bytes(psi, psi, meg, "ddp", dp).gpu_total_bytes == pytest.approx(18 * psi)
    dist = model_state_bytes_per_param("bf16-mixed", "adamw", "megatron-distributed-optimizer")
    got = model_state_per_gpu_bytes(psi, psi, dist, "zero1", dp).gpu_total_bytes
    assert got == pytest.approx((6 + 12 / dp) * psi)
    with pytest.raises(ValueError, match="zero1"):
        model_state_per_gpu_bytes(psi, psi, dist, "ddp", dp)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sharding": "zero4"}, "allowed: ddp, zero1"),
        ({"trainable_parameters": 2e9}, "exceeds"),
        ({"data_parallel": 0}, "data_parallel"),
        ({"tensor_parallel": 1.5}, "tensor_parallel"),
        ({"shard_group": 16}, "exceeds data_parallel"),
        ({"sharding": "ddp", "shard_group": 4}, "shard_group"),
        ({"parameters": -1.0}, "parameters"),
        ({"parameters": math.nan}, "parameters"),
    ],
)
def test_model_state_invalid_inputs_raise(kwargs, match):
    args = {
        "parameters": 1e9,
        "trainable_parameters": 1e9,
        "bytes_per_param": _zero_paper(),
        "sharding": "zero3",
        "data_parallel": 8,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        model_state_per_gpu_bytes(**args)


# ---------------------------------------------------------------------------------------------------
# 5. Gathered parameters
# ---------------------------------------------------------------------------------------------------
def test_gathered_parameters_default_is_deepspeed_4x_largest_layer():
    # DeepSpeed deepspeed/runtime/zero/stage3.py: largest_layer_memory = 4 * largest_layer_params;
    # FSDP with prefetch: current + next unit at 2 B each.
    assert gathered_parameters_bytes(525_336_576) == 4 * 525_336_576
    assert gathered_parameters_bytes(1000, bytes_per_param=2, prefetch_layers=0) == 2000
    assert gathered_parameters_bytes(1000, bytes_per_param=4, prefetch_layers=2) == 12000
    with pytest.raises(ValueError, match="prefetch_layers"):
        gathered_parameters_bytes(1000, prefetch_layers=-1)


# ---------------------------------------------------------------------------------------------------
# Property tests: finite, non-negative results for positive inputs; enums validated.
# ---------------------------------------------------------------------------------------------------
@given(
    parameters=st.floats(min_value=1.0, max_value=1e13),
    trainable_fraction=st.floats(min_value=0.0, max_value=1.0),
    precision=st.sampled_from(PRECISIONS),
    optimizer=st.sampled_from(OPTIMIZERS),
    convention=st.sampled_from(tuple(BYTE_CONVENTIONS)),
    sharding=st.sampled_from(SHARDINGS),
    data_parallel_exp=st.integers(min_value=0, max_value=12),
    tensor_parallel=st.integers(min_value=1, max_value=16),
    pipeline_parallel=st.integers(min_value=1, max_value=64),
    offload=st.booleans(),
)
def test_model_state_is_finite_and_non_negative(
    parameters,
    trainable_fraction,
    precision,
    optimizer,
    convention,
    sharding,
    data_parallel_exp,
    tensor_parallel,
    pipeline_parallel,
    offload,
):
    bpp = model_state_bytes_per_param(precision, optimizer, convention)
    for value in (bpp.weights_bytes_per_param, bpp.gradients_bytes_per_param, bpp.optimizer_bytes_per_param):
        assert math.isfinite(value) and value >= 0
    dp = 2**data_parallel_exp
    if sharding == "ddp" and bpp.optimizer_sharded_over_data_parallel:
        sharding = "zero1"
    state = model_state_per_gpu_bytes(
        parameters,
        min(parameters * trainable_fraction, parameters),
        bpp,
        sharding,
        dp,
        tensor_parallel,
        pipeline_parallel,
        shard_group=min(dp, 8) if sharding == "fsdp-hybrid" else None,
        offload_optimizer=offload and sharding != "ddp",
        offload_parameters=offload and sharding in ("zero3", "fsdp-full", "fsdp-hybrid"),
    )
    for value in (*vars(state).values(), state.gpu_total_bytes):
        assert math.isfinite(value) and value >= 0




# ---------------------------------------------------------------------------------------------------
# The state of a job's model on one GPU of its layout
# ---------------------------------------------------------------------------------------------------
def test_model_state_on_a_layout_matches_zero_paper_figure1_zero3() -> None:
    # ZeRO Figure 1: Ψ = 7.5B on Nd = 64 under ZeRO-3 → 16Ψ/64 = 1.875 GB per GPU (8 nodes of 8 GPUs).
    model = TrainedModel(7.5e9, 7.5e9, "bf16-mixed", "adamw")
    layout = training_layout(64, 8, 8, sharding="zero3")

    state = model_state_on_gpu(model, layout, _zero_paper(), "none")

    assert state.gpu_total_bytes / GB == pytest.approx(1.875, rel=1e-12)


def test_distributed_optimizer_state_is_sharded_over_data_and_context_ranks() -> None:
    # Megatron-LM get_megatron_optimizer shards over get_data_parallel_group(with_context_parallel=True): 64 GPUs
    # at cp 4 leave 16 data-parallel ranks, yet ZeRO-1 splits the 12Ψ optimizer state over all 16 × 4 = 64.
    model = TrainedModel(7.5e9, 7.5e9, "bf16-mixed", "adamw")
    with_context = training_layout(64, 8, 8, sharding="zero1", context=4)

    state = model_state_on_gpu(model, with_context, _zero_paper(), "none")

    assert state.optimizer_bytes == pytest.approx(12 * 7.5e9 / 64)
    assert state.weights_bytes + state.gradients_bytes == pytest.approx(4 * 7.5e9)  # (2 + 2)Ψ, not sharded
    assert state == model_state_on_gpu(model, training_layout(64, 8, 8, sharding="zero1"), _zero_paper(), "none")


def test_model_state_on_a_layout_offloads_as_asked_and_scales_to_the_first_stage() -> None:
    # Given 13e9 parameters under ZeRO-2 on 8 GPUs with the optimizer offloaded (ZeRO-Offload),
    model = TrainedModel(13e9, 13e9, "bf16-mixed", "adamw")
    layout = training_layout(8, 8, 1, sharding="zero2")

    offloaded = model_state_on_gpu(model, layout, _zero_paper(), "optimizer")

    # the GPU keeps the 2Ψ weights and the host the (2 + 12)Ψ/8 gradient and optimizer shard (ZeRO-Offload).
    assert offloaded.gpu_total_bytes == pytest.approx(2 * 13e9)
    assert offloaded.host_offload_bytes == pytest.approx(14 * 13e9 / 8)
    # A first stage holding 1.25 × an even share holds 1.25 × the state.
    heavier = model_state_on_gpu(model, layout, _zero_paper(), "none", stage_factor=1.25)
    plain = model_state_on_gpu(model, layout, _zero_paper(), "none")
    assert heavier.gpu_total_bytes == pytest.approx(1.25 * plain.gpu_total_bytes)


def test_ddp_under_megatron_distributed_optimizer_is_sized_as_zero1() -> None:
    # Megatron-LM's distributed optimizer is ZeRO-1 by construction (6 + 12/DP B/param).
    assert effective_sharding("ddp", "megatron-distributed-optimizer") == "zero1"
    assert effective_sharding("ddp", "zero-paper") == "ddp"
    assert effective_sharding("zero3", "megatron-distributed-optimizer") == "zero3"

"""Mixture-of-experts shapes, layouts and parameter counts: each figure is a published one or written out by hand."""

from dataclasses import replace

import pytest

from rules.errors import InconsistentInput
from rules.estimates.communication.collectives import step_communication
from rules.estimates.memory.model_state import TrainedModel
from rules.estimates.model.layout import NotWholeExpertGrid, resized, training_layout
from rules.estimates.model.parameters import (
    active_parameters,
    decoder_layer_parameters,
    first_stage_parameter_factor,
    largest_layer_parameters,
    megatron_expert_shard_parameters,
    megatron_most_loaded_shard_parameters,
    megatron_weight_and_optimizer_bytes,
    routed_expert_parameters,
    transformer_parameters,
)
from rules.estimates.model.shapes import Experts, ModelShape

# HF mistralai/Mixtral-8x7B-v0.1 config.json
MIXTRAL_8X7B = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000, mlp="swiglu",
                          norm="rmsnorm", dropout=False, experts=Experts(count=8, active=2, ffn_hidden=14336))
# Megatron-LM tests/unit_tests/training/test_weight_and_optimizer_memory.py @ a7c9e8c44ae89bea013a085ef33ab52a9b7a19b4
# (_make_args): hidden 8, 2 heads of kv_channels 4, ffn 16, 4 experts of 16 (top 1), one shared expert of 8,
# moe_layer_freq [0, 1] (one leading dense layer), padded vocabulary 32, tied, GeLU (swiglu False), RMSNorm.
MEGATRON_TOY = ModelShape(layers=2, hidden=8, heads=2, kv_heads=2, ffn_hidden=16, vocab=32, mlp="gelu", norm="rmsnorm",
                          tied_embeddings=True,
                          experts=Experts(count=4, active=1, ffn_hidden=16, shared=1, shared_ffn_hidden=8,
                                          dense_layers=1))


# --- parameters --------------------------------------------------------------------------------------------------


def test_megatron_toy_counts_as_megatrons_own_test_splits_it():
    # Megatron's test: attention 256 and dense MLP 256 (the dense layer), attention 256 and shared expert 128 (the
    # expert layer) are tensor-parallel; norms 16 + 16, router 32 and final norm 8 replicated; routed experts 1024.
    # Whole model (p = t = 1): 256 + 256 + 256 + 128 + 256 (embedding) + 72 = 1224, + 1024 routed.
    assert megatron_expert_shard_parameters(MEGATRON_TOY) == (1224, 1024)
    assert transformer_parameters(MEGATRON_TOY) == 1224 + 1024
    assert routed_expert_parameters(MEGATRON_TOY) == 1024
    # One routed expert of four runs per token: 1024 / 4 of them.
    assert active_parameters(MEGATRON_TOY) == 1224 + 256


def test_weight_and_optimizer_bytes_reproduce_megatrons_expert_parallel_figure():
    # Megatron-LM test_weight_and_optimizer_memory_accounts_for_expert_parallelism @ a7c9e8c4: TP 2, PP 2, EP 2, ETP 4,
    # 64 GPUs, distributed optimizer. tp-sharded ((256 + 256 + 256 + 128) / 2 + 256) / 2 = 352, replicated
    # (16 + 16 + 32 + 8) / 2 = 36, expert-sharded 1024 / 2 / (4 × 2) = 64; DP = 64 / 2 / 2 = 16, EDP = 64 / 4 / 2 / 2
    # = 4: (352 + 36) × (6 + 12/16) + 64 × (6 + 12/4) = 3195 bytes.
    assert megatron_expert_shard_parameters(MEGATRON_TOY, 2, 2, 2, 4) == (352 + 36, 64)
    assert megatron_weight_and_optimizer_bytes(MEGATRON_TOY, 2, 2, 16, True, expert_parallel=2, expert_tensor=4,
                                               expert_data_parallel=4) == pytest.approx(3195)


def test_megatrons_latent_free_toy_without_a_pipeline():
    # Megatron's test at PP 1 (world 32, TP 2, EP 2, ETP 4: DP 16, EDP 4) would hold 256 + 256 + 256 + 128 = 896 / 2 +
    # 256 / 2 tensor-parallel = 576, 72 replicated and 1024 / 8 = 128 routed: 648 × 6.75 + 128 × 9 = 5526 bytes.
    assert megatron_weight_and_optimizer_bytes(MEGATRON_TOY, 2, 1, 16, True, expert_parallel=2, expert_tensor=4,
                                               expert_data_parallel=4) == pytest.approx(648 * 6.75 + 128 * 9)


def test_mixtral_routed_experts_and_decoder_layer():
    # 32 layers × 8 experts × 3 × 4096 × 14336 = 45,097,156,608; one layer 41,943,040 attention + 8192 norms + 32,768
    # router + 1,409,286,144 experts = 1,451,270,144.
    assert routed_expert_parameters(MIXTRAL_8X7B) == 45_097_156_608
    assert decoder_layer_parameters(MIXTRAL_8X7B) == 1_451_270_144
    assert megatron_most_loaded_shard_parameters(MIXTRAL_8X7B) == transformer_parameters(MIXTRAL_8X7B)


def test_a_dense_models_active_count_is_its_whole_count():
    dense = replace(MIXTRAL_8X7B, experts=None)
    assert active_parameters(dense) == transformer_parameters(dense) == 7_241_732_096  # Mistral-7B-v0.1's HF total
    assert routed_expert_parameters(dense) == 0


def test_an_fsdp_unit_of_mixtral_gathers_the_experts_its_expert_ranks_hold():
    # One layer with all 8 experts: 1,451,270,144 parameters, more than the root unit (2 × 32000 × 4096 + 4096).
    assert largest_layer_parameters(MIXTRAL_8X7B, "block") == 1_451_270_144
    # Split over 8 expert ranks a layer holds 41,984,000 + 1,409,286,144 / 8 = 218,144,768: the root outweighs it.
    assert largest_layer_parameters(MIXTRAL_8X7B, "block", expert_shards=8) == 2 * 32000 * 4096 + 4096
    small_vocab = replace(MIXTRAL_8X7B, vocab=1000, tied_embeddings=True)
    assert largest_layer_parameters(small_vocab, "block", expert_shards=8) == 41_984_000 + 176_160_768
    # DeepSpeed's largest module: the 32000 × 4096 embedding (131,072,000) outweighs one expert's 4096 × 14336 matrix.
    assert largest_layer_parameters(MIXTRAL_8X7B) == 32000 * 4096
    assert largest_layer_parameters(small_vocab) == 4096 * 14336


def test_first_stage_factor_of_mixtral_on_4_stages_counts_the_parameters_besides_the_experts():
    # Besides the routed experts: 32 × (41,943,040 + 8192 + 32,768) + 4096 = 1,343,492,096 in the block and
    # 2 × 131,072,000 embeddings, 1,605,636,096 in all. The first of 4 stages holds 1,343,492,096 / 4 + 131,072,000 =
    # 466,945,024 of them, i.e. × 4 / 1,605,636,096 = 1.16327 times an even share.
    assert first_stage_parameter_factor(MIXTRAL_8X7B, 4) == pytest.approx(466_945_024 * 4 / 1_605_636_096)


@pytest.mark.parametrize(("experts", "match"), [
    (Experts(count=8, active=9, ffn_hidden=14336), r"active experts \(9\) exceeds experts \(8\)"),
    (Experts(count=8, active=2, ffn_hidden=14336, dense_layers=32), "leave none of the 32 layers"),
    (Experts(count=8, active=2, ffn_hidden=0), "expert_ffn_hidden")])
def test_experts_that_contradict_the_shape_are_refused(experts, match):
    with pytest.raises(InconsistentInput, match=match):
        transformer_parameters(replace(MIXTRAL_8X7B, experts=experts))


# --- layouts -----------------------------------------------------------------------------------------------------


def test_the_expert_grid_of_mixtral_on_64_gpus_at_tp1_pp4_ep8():
    # Megatron-Core parallel_state: expert_data_parallel = world / (ETP × EP × PP) = 64 / (1 × 8 × 4) = 2; the dense
    # data-parallel degree stays 64 / (TP × PP × CP) = 16 (Megatron-LM docs/user-guide/parallelism-guide.md's Mixtral
    # 8x7B row: 64 GPUs, TP 1, PP 4, EP 8).
    layout = training_layout(64, 8, 8, tensor=1, pipeline=4, sharding="zero1", expert=8, experts=8)
    assert (layout.data_parallel, layout.expert_data_parallel, layout.expert_grid_gpus) == (16, 2, 32)
    assert layout.whole_unit_gpus == 32  # lcm(8 per node, 4 per replica, 32 per expert grid)
    assert resized(layout, 96).expert_data_parallel == 3


@pytest.mark.parametrize(("gpus", "expert", "expert_tensor", "experts", "match"), [
    (64, 3, 1, 8, "8 experts cannot be split over expert parallelism 3"),
    (48, 8, 2, 8, "48 GPUs are not a whole number of expert grids of expert_tensor 2 × expert 8 × pipeline 4 = 64"),
    (64, 2, 1, None, "needs a mixture-of-experts model")])
def test_megatron_refuses_these_expert_layouts(gpus, expert, expert_tensor, experts, match):
    # megatron/training/arguments.py: "Number of experts should be a multiple of expert model parallel_size." and
    # "num_experts must be non None to use expert model parallelism"; megatron/core/parallel_state.py: "world_size (…)
    # is not divisible by expert_tensor_model_pipeline_parallel size (…)".
    with pytest.raises(NotWholeExpertGrid, match=match):
        training_layout(gpus, 8, 8, tensor=1, pipeline=4, expert=expert, expert_tensor=expert_tensor, experts=experts)


def test_expert_tensor_parallelism_may_exceed_the_tensor_degree_as_megatrons_parallel_folding_allows():
    # Megatron's own test layout: TP 2, PP 2, EP 2, ETP 4 on 64 GPUs.
    layout = training_layout(64, 8, 8, tensor=2, pipeline=2, expert=2, expert_tensor=4, experts=4)
    assert (layout.data_parallel, layout.expert_data_parallel) == (16, 4)


# --- data-parallel collectives -----------------------------------------------------------------------------------


def test_the_routed_experts_are_reduced_over_their_expert_data_parallel_ranks():
    # Mixtral 8x7B on 64 GPUs at TP 1 PP 4 EP 8 under ZeRO-1, bf16 (ZeRO §7.2.1: a reduce-scatter of the gradients and
    # an all-gather of the updated parameters, (n − 1)/n × S each, nccl-tests' bus bytes):
    #   the others: 1,605,636,096 / 4 stages = 401,409,024 parameters, S = 802,818,048 B over DP 16: 2 × 15/16 × S
    #   the routed experts: 45,097,156,608 / (8 × 4) = 1,409,286,144, S = 2,818,572,288 B over EDP 2: 2 × 1/2 × S
    layout = training_layout(64, 8, 8, tensor=1, pipeline=4, sharding="zero1", expert=8, experts=8)
    model = TrainedModel(46_702_792_704, 46_702_792_704, "bf16-mixed", "adamw")
    step = step_communication(model, layout, 1, "zero-paper", routed_parameters=45_097_156_608)

    assert step.bus_bytes_per_gpu == pytest.approx(2 * 15 / 16 * 802_818_048 + 2 * 1 / 2 * 2_818_572_288)
    assert [(c.purpose, c.ranks, c.scope) for c in step.collectives] == [
        ("gradients", 16, "cluster"), ("updated parameters", 16, "cluster"),
        ("gradients (experts)", 2, "cluster"), ("updated parameters (experts)", 2, "cluster")]
    # A dense model's collectives are unchanged: every parameter over the 16 data-parallel ranks.
    dense = step_communication(model, layout, 1, "zero-paper")
    assert dense.bus_bytes_per_gpu == pytest.approx(2 * 15 / 16 * 46_702_792_704 / 4 * 2)

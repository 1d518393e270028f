"""A mixture of experts' memory on one GPU: its model state against Megatron-LM's expert-parallel figure, and its
activations term by term."""

from dataclasses import replace

import pytest

from rules.errors import InconsistentInput
from rules.estimates.memory.activations import ActivationSaving, BatchShape, PipelineSchedule, activation_bytes_per_gpu
from rules.estimates.memory.activations import activation_bytes_per_layer as layer_bytes
from rules.estimates.memory.expert_activations import ExpertRouting, expert_mlp_activation_bytes
from rules.estimates.memory.expert_state import expert_model_state_on_gpu
from rules.estimates.memory.model_state import TrainedModel, model_state_bytes_per_param
from rules.estimates.memory.offload import ZeroSettings, persistent_parameters
from rules.estimates.memory.step_memory import MemorySettings, TrainingBatch, TrainingJob, training_memory
from rules.estimates.memory.training_state import StateSettings, training_model_state
from rules.estimates.model.layout import training_layout
from rules.estimates.model.parameters import megatron_weight_and_optimizer_bytes, transformer_parameters
from rules.estimates.model.shapes import Experts, ModelShape

# HF mistralai/Mixtral-8x7B-v0.1 and Mixtral-8x22B-v0.1 config.json
MIXTRAL_8X7B = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000, mlp="swiglu",
                          norm="rmsnorm", dropout=False, experts=Experts(count=8, active=2, ffn_hidden=14336))
MIXTRAL_8X22B = ModelShape(layers=56, hidden=6144, heads=48, kv_heads=8, ffn_hidden=16384, vocab=32000,
                           mlp="swiglu", norm="rmsnorm", dropout=False,
                           experts=Experts(count=8, active=2, ffn_hidden=16384))
MEGATRON = StateSettings("megatron-distributed-optimizer", 2, ZeroSettings())
GIB = 2**30


def _model(shape: ModelShape) -> TrainedModel:
    parameters = transformer_parameters(shape)
    return TrainedModel(parameters, parameters, "bf16-mixed", "adamw")


# --- model state -------------------------------------------------------------------------------------------------


def test_mixtral_8x7b_at_tp1_pp4_ep8_on_64_gpus_is_megatrons_theoretical_memory_figure():
    # Megatron-LM megatron/training/theoretical_memory_usage.py @ a7c9e8c44ae89bea013a085ef33ab52a9b7a19b4,
    # compute_weight_and_optimizer_memory, for the Mixtral 8x7B row of docs/user-guide/parallelism-guide.md (64 GPUs, TP
    # 1, PP 4, EP 8) with --use-distributed-optimizer, by hand:
    #   tp-sharded: attention 2 × 4096 × 4096 × (1 + 8/32) = 41,943,040 × 32 layers = 1,342,177,280
    #   replicated: norms 2 × 4096 × 32 = 262,144 + routers 4096 × 8 × 32 = 1,048,576 + final norm 4096 = 1,314,816
    #   expert-sharded: 2 × 4096 × 14336 × 8 × 3/2 × 32 = 45,097,156,608; embedding 4096 × 32000 = 131,072,000
    #   most loaded stage: (1,342,177,280 / 4 + 131,072,000) / 1 + 1,314,816 / 4 = 466,945,024 others and
    #   45,097,156,608 / (4 × 1 × 8) = 1,409,286,144 routed;
    #   DP = 64 / (1 × 4) = 16, EDP = 64 / (1 × 8 × 4) = 2:
    #   466,945,024 × (6 + 12/16) + 1,409,286,144 × (6 + 12/2) = 20,063,312,640 bytes (19,133.9 MiB).
    megatron_figure = 20_063_312_640
    layout = training_layout(64, 8, 8, tensor=1, pipeline=4, sharding="zero1", expert=8, experts=8)
    state = training_model_state(_model(MIXTRAL_8X7B), MIXTRAL_8X7B, "none", layout, MEGATRON)

    assert state.per_gpu.gpu_total_bytes == pytest.approx(megatron_figure, rel=1e-12)
    assert megatron_weight_and_optimizer_bytes(MIXTRAL_8X7B, 1, 4, 16, True, expert_parallel=8,
                                               expert_data_parallel=2) == pytest.approx(megatron_figure)
    # Without expert parallelism the routed experts are split over the 4 stages only: 4.4× the state.
    dense_layout = training_layout(64, 8, 8, tensor=1, pipeline=4, sharding="zero1", experts=8)
    assert training_model_state(_model(MIXTRAL_8X7B), MIXTRAL_8X7B, "none", dense_layout, MEGATRON).per_gpu \
        .gpu_total_bytes == pytest.approx(466_945_024 * 6.75 + 45_097_156_608 / 4 * 6.75)


def test_mixtral_8x22b_at_tp4_pp4_ep8_on_256_gpus_is_megatrons_figure_within_three_hundredths_of_a_percent():
    # The parallelism guide's Mixtral 8x22B row: 256 GPUs, TP 4, PP 4, EP 8, with Megatron's default expert tensor
    # degree (the tensor degree, 4): EDP = 256 / (4 × 8 × 4) = 2, DP = 256 / 16 = 16. Megatron, by hand:
    #   tp-sharded: 2 × 6144² × (1 + 8/48) = 88,080,384 × 56 = 4,932,501,504; embedding 6144 × 32000 = 196,608,000
    #   replicated: 2 × 6144 × 56 = 688,128 + 6144 × 8 × 56 = 2,752,512 + 6144 = 3,446,784
    #   expert-sharded: 2 × 6144 × 16384 × 8 × 3/2 × 56 = 135,291,469,824
    #   (4,932,501,504 / 4 + 196,608,000) / 4 + 3,446,784 / 4 = 357,433,344 + 861,696 = 358,295,040 others,
    #   135,291,469,824 / (4 × 4 × 8) = 1,056,964,608 routed: × 6.75 and × 12 = 15,102,066,816 bytes.
    # quotecheck splits the norms and routers over the 4 tensor ranks too: 357,648,768 others, 646,272 fewer (the
    # whole figure 0.029 % lower).
    megatron_figure = 358_295_040 * 6.75 + 1_056_964_608 * 12
    layout = training_layout(256, 8, 32, tensor=4, pipeline=4, sharding="zero1", expert=8, expert_tensor=4, experts=8)
    state = training_model_state(_model(MIXTRAL_8X22B), MIXTRAL_8X22B, "none", layout, MEGATRON)

    assert layout.expert_data_parallel == 2
    assert state.per_gpu.gpu_total_bytes == pytest.approx(megatron_figure - 646_272 * 6.75, rel=1e-12)
    assert state.per_gpu.gpu_total_bytes == pytest.approx(megatron_figure, rel=3e-4)
    assert megatron_weight_and_optimizer_bytes(MIXTRAL_8X22B, 4, 4, 16, True, expert_parallel=8, expert_tensor=4,
                                               expert_data_parallel=2) == pytest.approx(megatron_figure)


def test_zero3_shards_the_experts_over_their_expert_data_parallel_ranks_and_the_rest_over_all():
    # Mixtral 8x7B on 64 GPUs, EP 8, no pipeline, ZeRO-3 (16 B/param, zero-paper): the 1,605,636,096 others over 64
    # ranks, the 45,097,156,608 routed split over 8 expert ranks and sharded over 64 / 8 = 8: 16 × (25,088,064 +
    # 704,643,072) bytes.
    layout = training_layout(64, 8, 8, sharding="zero3", expert=8, experts=8)
    state = expert_model_state_on_gpu(_model(MIXTRAL_8X7B), MIXTRAL_8X7B, layout,
                                      model_state_bytes_per_param("bf16-mixed", "adamw"), "none")
    assert state.gpu_total_bytes == pytest.approx(16 * (1_605_636_096 / 64 + 45_097_156_608 / 8 / 8))


def test_stated_parameters_below_the_routed_experts_are_refused():
    layout = training_layout(8, 8, 1, sharding="zero1", expert=8, experts=8)
    with pytest.raises(InconsistentInput, match="do not exceed the 45,097,156,608 parameters of the routed experts"):
        expert_model_state_on_gpu(TrainedModel(12.9e9, 12.9e9, "bf16-mixed", "adamw"), MIXTRAL_8X7B, layout,
                                  model_state_bytes_per_param("bf16-mixed", "adamw"), "none")


# --- activations -------------------------------------------------------------------------------------------------


def test_one_mixtral_layer_stores_its_attention_and_its_routed_tokens():
    # s = 4096, b = 1 (sbh = 16,777,216), FlashAttention, no recompute, no parallelism, bf16 (e = 2), 2 of 8 experts
    # per token at the balanced mean (load 1):
    #   outside TP: QKV input, MLP input and the two norms' inputs, 4 × 2sbh = 134,217,728
    #   inside: Q and the output projection's input 2 × 2sbh = 67,108,864; K and V 2 × 2 × 4096 × 128 × 8 = 16,777,216
    #   FlashAttention's log-sum-exp 4 × 32 × 4096 = 524,288
    #   router: fp32 logits and a 1-byte map, 5 × 4096 × 8 = 163,840
    #   dispatch and combine: 2 × (2 × 2 × 4096 × 4096) = 134,217,728
    #   experts: SwiGLU's 3 tensors, 3 × 2 × (2 × 4096) × 14336 = 704,643,072
    batch, saving = BatchShape(4096, 1), ActivationSaving(flash_attention=True)
    expected = 134_217_728 + 67_108_864 + 16_777_216 + 524_288 + 163_840 + 134_217_728 + 704_643_072
    assert layer_bytes(MIXTRAL_8X7B, batch, saving) == expected
    # The routed copies scale with the load over the balanced mean (a capacity factor of 1.25): 1.25 × 838,860,800.
    assert layer_bytes(MIXTRAL_8X7B, batch, saving, load_factor=1.25) == pytest.approx(
        expected + 0.25 * (134_217_728 + 704_643_072))


def test_sequence_parallel_tensor_ranks_route_their_share_and_expert_tensor_ranks_gather_it():
    # t = 4 with sequence parallelism: each rank routes 4096 / 4 = 1024 tokens. With expert_tensor 4 the expert ranks
    # all-gather them (4 × 1024 × 2 copies) and split the inner dimension (14336 / 4): dispatch 2 × 8192 × 4096, experts
    # 3 × 2 × 8192 × 3584, combine 2 × 2048 × 4096, router 5 × 1024 × 8.
    got = expert_mlp_activation_bytes(MIXTRAL_8X7B, 4096, 2, tensor_parallel=4, sequence_parallel=True,
                                      expert_tensor=4)
    assert got == 5 * 1024 * 8 + 2 * 8192 * 4096 + 3 * 2 * 8192 * 3584 + 2 * 2048 * 4096
    # expert_tensor 1 (the experts whole, spread by expert parallelism): no gather, the whole inner dimension.
    assert expert_mlp_activation_bytes(MIXTRAL_8X7B, 4096, 2, 4, True) == (
        5 * 1024 * 8 + 2 * 2048 * 4096 + 3 * 2 * 2048 * 14336 + 2 * 2048 * 4096)


def test_shared_experts_are_stored_as_a_dense_mlp_split_over_the_tensor_ranks():
    # Qwen2-57B-A14B's one shared expert of 20480 over s × b = 1000 tokens at t = 2: 3 × 2 × 1000 × 20480 / 2.
    shared = Experts(count=64, active=8, ffn_hidden=2560, shared=1, shared_ffn_hidden=20480)
    shape = ModelShape(layers=28, hidden=3584, heads=28, kv_heads=4, ffn_hidden=18944, vocab=151936, mlp="swiglu",
                       experts=shared)
    without = replace(shape, experts=replace(shared, shared=0))
    assert expert_mlp_activation_bytes(shape, 1000, 2, 2) - expert_mlp_activation_bytes(without, 1000, 2, 2) == (
        3 * 2 * 1000 * 20480 / 2)


def test_the_first_stage_holds_the_leading_dense_layers_as_dense_ones():
    # 4 layers on 2 stages, the first of them dense: the first stage holds one dense and one expert layer.
    experts = Experts(count=8, active=2, ffn_hidden=14336, dense_layers=1)
    shape = replace(MIXTRAL_8X7B, layers=4, experts=experts, vocab=None)
    batch, saving = BatchShape(1024, 1), ActivationSaving(flash_attention=True)
    dense = layer_bytes(replace(shape, experts=None), batch, saving)
    expert = layer_bytes(shape, batch, saving)
    embedding = 8 * 1024  # the input token ids
    got = activation_bytes_per_gpu(shape, batch, saving, pipeline=PipelineSchedule(2, 1, 2))
    assert got == (dense + expert + embedding) * 2  # two micro-batches in flight


def test_full_recompute_keeps_a_mixture_of_experts_layers_input_alone():
    batch = BatchShape(4096, 1)
    assert layer_bytes(MIXTRAL_8X7B, batch, ActivationSaving(recompute="full")) == 2 * 4096 * 4096


def test_the_policys_capacity_factor_bounds_the_routed_tokens_and_dropless_takes_its_load_factor():
    # Megatron-Core transformer_config.py: moe_expert_capacity_factor None "means no token will be dropped".
    assert ExpertRouting(capacity_factor=1.0, dropless_load_factor=1.25).load_factor == 1.0
    assert ExpertRouting(capacity_factor=None, dropless_load_factor=1.25).load_factor == 1.25
    with pytest.raises(InconsistentInput, match="expert load factor"):
        _ = ExpertRouting(capacity_factor=0).load_factor


# --- one step ----------------------------------------------------------------------------------------------------


def test_a_mixtral_step_at_ep8_holds_its_state_and_its_first_stages_activations():
    # Mixtral 8x7B at TP 1 PP 4 EP 8 on 64 GPUs, micro-batch 1 of 4096 tokens, selective recompute and FlashAttention,
    # 64 micro-batches per step, under Megatron's distributed optimizer and its activation count: the state is the
    # figure above; the first stage holds 8 layers of 4 in-flight micro-batches (with the routed tokens at the
    # balanced mean) and their token ids.
    layout = training_layout(64, 8, 8, tensor=1, pipeline=4, sharding="zero1", expert=8, experts=8)
    saving = ActivationSaving(recompute="selective", flash_attention=True)
    job = TrainingJob(_model(MIXTRAL_8X7B), MIXTRAL_8X7B, TrainingBatch(4096, 1, 1024), saving, 1, "none")
    settings = MemorySettings(convention="megatron-distributed-optimizer", cuda_context_gib=0.0,
                              fragmentation_fraction=0.0, headroom_fraction=0.0, gathered_layers=2,
                              routing=ExpertRouting(capacity_factor=1.0))
    memory = training_memory(job, layout, 80, settings)
    layer = layer_bytes(MIXTRAL_8X7B, BatchShape(4096, 1), saving)

    assert memory.model_state_bytes == pytest.approx(20_063_312_640)
    assert memory.activations_bytes == pytest.approx((8 * layer + 8 * 4096) * 4)
    assert memory.total_bytes / GIB == pytest.approx((20_063_312_640 + (8 * layer + 8 * 4096) * 4) / GIB)


def test_zero3_keeps_mixtrals_norms_and_routers_whole_as_deepspeed_persists_small_tensors():
    # DeepSpeed stage3_param_persistence_threshold 1e5 (config.py default): each layer's two norms (4096 each) and its
    # router (4096 × 8 = 32,768) stay whole, with the final norm: 32 × 40,960 + 4096 = 1,314,816; every expert and
    # attention matrix is larger.
    assert persistent_parameters(MIXTRAL_8X7B, 100_000) == 1_314_816

"""Tests for rules.estimates.model.parameters: each published parameter count is quoted with its source."""

from dataclasses import replace

import pytest

from rules.errors import InconsistentInput
from rules.estimates.model.parameters import (
    decoder_layer_parameters,
    first_stage_parameter_factor,
    largest_layer_parameters,
    megatron_most_loaded_shard_parameters,
    megatron_weight_and_optimizer_bytes,
    parameter_mismatch_fraction,
    transformer_parameters,
)
from rules.estimates.model.shapes import ModelShape

# HF meta-llama/Llama-2-7b-hf config.json
LLAMA2_7B = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=32, ffn_hidden=11008, vocab=32000, mlp="swiglu",
                       norm="rmsnorm", dropout=False)
# HF meta-llama/Meta-Llama-3-8B config.json
LLAMA3_8B = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256, mlp="swiglu",
                       norm="rmsnorm", dropout=False)
# HF meta-llama/Llama-2-13b-hf config.json
LLAMA2_13B = ModelShape(layers=40, hidden=5120, heads=40, kv_heads=40, ffn_hidden=13824, vocab=32000, mlp="swiglu",
                        norm="rmsnorm", dropout=False)
# HF meta-llama/Meta-Llama-3-70B config.json
LLAMA3_70B = ModelShape(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128256, mlp="swiglu",
                        norm="rmsnorm", dropout=False)
# GPT-3 175B as Megatron-LM sizes it: 50257 tokens padded to a multiple of 128 × t = 1024, tied embeddings.
GPT3_MEGATRON = ModelShape(layers=96, hidden=12288, heads=96, ffn_hidden=49152, vocab=51200, tied_embeddings=True)


def test_llama2_7b_parameters_match_hf_model_card():
    # HF model card / safetensors metadata for meta-llama/Llama-2-7b-hf: 6,738,415,616 parameters.
    assert transformer_parameters(LLAMA2_7B) == 6_738_415_616


def test_llama3_8b_parameters_match_hf_model_card():
    # HF model card / safetensors metadata for meta-llama/Meta-Llama-3-8B: 8,030,261,248 parameters.
    assert transformer_parameters(LLAMA3_8B) == 8_030_261_248


def test_a_llama3_8b_decoder_layer_is_the_model_card_count_less_embeddings_and_final_norm_over_32():
    # (8,030,261,248 − 2 × 128,256 × 4,096 − 4,096) / 32 = 218,112,000; 70B: (70,553,706,496 − 2,101,346,304 −
    # 8,192) / 80 = 855,654,400 (the by-hand per-layer figure below)
    assert decoder_layer_parameters(LLAMA3_8B) == (8_030_261_248 - 2 * 128256 * 4096 - 4096) // 32 == 218_112_000
    assert decoder_layer_parameters(LLAMA3_70B) == 855_654_400


def test_llama2_13b_parameters_match_hf_model_card():
    # HF model card / safetensors metadata for meta-llama/Llama-2-13b-hf: 13,015,864,320 parameters. By hand
    # (h = 5120, ffn = 13824, no GQA): attention 4h² = 104,857,600; MLP 3·h·ffn = 212,336,640; two RMSNorms
    # 2h = 10,240; per layer 317,204,480, × 40 = 12,688,179,200; untied embedding and output 2 × 32000 × 5120
    # = 327,680,000; final norm 5120.
    by_hand = 40 * (4 * 5120**2 + 3 * 5120 * 13824 + 2 * 5120) + 2 * 32000 * 5120 + 5120
    assert by_hand == 13_015_864_320
    assert transformer_parameters(LLAMA2_13B) == 13_015_864_320


def test_llama3_70b_parameters_match_hf_model_card():
    # HF model card / safetensors metadata for meta-llama/Meta-Llama-3-70B: 70,553,706,496 parameters. By hand
    # (h = 8192, 64 heads of 128, 8 kv heads → k and v 8192 × 1024, ffn = 28672): attention 2h² + 2·h·1024 =
    # 150,994,944; MLP 3·h·ffn = 704,643,072; norms 2h = 16,384; per layer 855,654,400, × 80 =
    # 68,452,352,000; untied embedding and output 2 × 128256 × 8192 = 2,101,346,304; final norm 8192.
    by_hand = 80 * (2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192) + 2 * 128256 * 8192 + 8192
    assert by_hand == 70_553_706_496
    assert transformer_parameters(LLAMA3_70B) == 70_553_706_496


def test_llama2_7b_and_llama3_8b_by_hand():
    # Llama-2-7B: 32 × (4h² + 3·h·11008 + 2h) + 2 × 32000 × h + h with h = 4096; Llama-3-8B: q and o h², k and
    # v h × 1024 (8 kv heads of 128), MLP 3·h·14336, vocabulary 128256.
    assert 32 * (4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096) + 2 * 32000 * 4096 + 4096 == 6_738_415_616
    assert (32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) + 2 * 128256 * 4096 + 4096
            == 8_030_261_248)


def test_explicit_head_dim_sizes_the_attention_projections():
    # A head_dim other than hidden / heads (Gemma-7B: 16 heads of 256 on hidden 3072) widens q, k, v and o
    # to heads × head_dim = 4096: 4 × 3072 × 4096 per layer instead of 4 × 3072².
    narrow = ModelShape(layers=1, hidden=3072, heads=16, ffn_hidden=24576, vocab=256000, mlp="swiglu",
                        norm="rmsnorm", tied_embeddings=True)
    wide = replace(narrow, head_dim=256)
    assert transformer_parameters(wide) - transformer_parameters(narrow) == 4 * 3072 * (4096 - 3072)


def test_mismatch_is_relative_to_the_architectures_count():
    # 7e9 stated for Llama-2-13B's 13,015,864,320: |7e9 − 13,015,864,320| / 13,015,864,320 = 0.46220.
    assert parameter_mismatch_fraction(7e9, 13_015_864_320) == pytest.approx(6_015_864_320 / 13_015_864_320)
    assert parameter_mismatch_fraction(7e9, 13_015_864_320) == pytest.approx(0.46220, abs=1e-5)
    # "7B" for Llama-2-7B's 6,738,415,616 is 3.9 % apart; an exact count 0.
    assert parameter_mismatch_fraction(7e9, 6_738_415_616) == pytest.approx(0.03882, abs=1e-5)
    assert parameter_mismatch_fraction(70_553_706_496, 70_553_706_496) == 0
    with pytest.raises(InconsistentInput, match="parameters from the architecture"):
        parameter_mismatch_fraction(7e9, 0)


def test_tied_embeddings_count_once():
    untied = transformer_parameters(LLAMA2_7B)
    tied = transformer_parameters(replace(LLAMA2_7B, tied_embeddings=True))
    assert untied - tied == 32000 * 4096


def test_largest_layer_parameters_module_and_block():
    # DeepSpeed all_live counts one module's own params: the 128256 × 4096 embedding.
    assert largest_layer_parameters(LLAMA3_8B) == 128256 * 4096
    # FSDP root unit (embedding + untied head + final norm) outweighs one decoder layer (218,112,000).
    assert largest_layer_parameters(LLAMA3_8B, unit="block") == 2 * 128256 * 4096 + 4096
    small_vocab = replace(LLAMA3_8B, vocab=1000, tied_embeddings=True)
    assert largest_layer_parameters(small_vocab, unit="block") == 218_112_000
    assert largest_layer_parameters(small_vocab) == 4096 * 14336
    with pytest.raises(ValueError, match="allowed: module, block"):
        largest_layer_parameters(LLAMA3_8B, unit="layer")


def test_gpt3_175b_weight_and_optimizer_matches_megatron_theoretical_memory_usage():
    # Megatron-LM megatron/training/theoretical_memory_usage.py, compute_weight_and_optimizer_memory,
    # by hand (LayerNorm: norm_size 2, no GQA, tied embeddings, t = 8, p = 16, DP = 8):
    #   per layer = 2h(ffn + 2) + 2h²(1 + 1) = 1,208,008,704 + 603,979,776 = 1,811,988,480
    #   block = 96 × per layer + 2h = 173,950,918,656; embedding = h × 51200 = 629,145,600
    #   total = 174,580,064,256 (GPT-3 "175B")
    #   most loaded shard = (block / 16 + embedding) / 8 = 1,437,634,752 parameters
    #   × 18 B = 25,877,425,536 B (24,678.6 MiB); distributed optimizer × (6 + 12/8) = 10,782,260,640 B.
    assert megatron_most_loaded_shard_parameters(GPT3_MEGATRON, 8, 16) == pytest.approx(1_437_634_752)
    assert megatron_weight_and_optimizer_bytes(GPT3_MEGATRON, 8, 16, 8) == pytest.approx(25_877_425_536)
    assert megatron_weight_and_optimizer_bytes(GPT3_MEGATRON, 8, 16, 8, distributed_optimizer=True) == (
        pytest.approx(10_782_260_640))
    # Total model size: p = t = 1, tied embeddings.
    assert megatron_most_loaded_shard_parameters(GPT3_MEGATRON) == pytest.approx(174_580_064_256)


def test_megatron_untied_single_stage_adds_output_layer():
    # (block + embedding)/t + embedding/t with untied embeddings and p = 1 -> 21,901,151,232 params at t = 8.
    got = megatron_most_loaded_shard_parameters(replace(GPT3_MEGATRON, tied_embeddings=False), tensor_parallel=8)
    assert got == pytest.approx(21_901_151_232)


def test_megatron_swiglu_gqa_rmsnorm_close_to_llama3_8b():
    # Megatron's count (no biases, RMSNorm) equals ours for a Llama-style model.
    assert megatron_most_loaded_shard_parameters(LLAMA3_8B) == pytest.approx(8_030_261_248)


def test_first_stage_factor_of_gpt3_on_16_stages_by_hand():
    # Megatron's first stage holds block/16 + embedding = 10,871,932,416 + 629,145,600 parameters, i.e.
    # (11,501,078,016 × 16) / 174,580,064,256 = 1.05405 times an even sixteenth of the model.
    assert first_stage_parameter_factor(GPT3_MEGATRON, 16) == pytest.approx(11_501_078_016 * 16 / 174_580_064_256)
    assert first_stage_parameter_factor(GPT3_MEGATRON, 16) == pytest.approx(1.05405, rel=1e-5)
    # No pipeline, or no vocabulary to place: an even share.
    assert first_stage_parameter_factor(GPT3_MEGATRON, 1) == 1.0
    assert first_stage_parameter_factor(replace(GPT3_MEGATRON, vocab=None), 16) == 1.0
    assert first_stage_parameter_factor(None, 16) == 1.0

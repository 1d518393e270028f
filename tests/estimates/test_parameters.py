"""Tests for rules.estimates.parameters: each published parameter count is quoted with its source."""

from dataclasses import replace

import pytest

from rules.estimates.parameters import (
    first_stage_parameter_factor,
    largest_layer_parameters,
    megatron_most_loaded_shard_parameters,
    megatron_weight_and_optimizer_bytes,
    transformer_parameters,
)
from rules.estimates.shapes import ModelShape

# HF meta-llama/Llama-2-7b-hf config.json
LLAMA2_7B = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=32, ffn_hidden=11008, vocab=32000, mlp="swiglu",
                       norm="rmsnorm", dropout=False)
# HF meta-llama/Meta-Llama-3-8B config.json
LLAMA3_8B = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256, mlp="swiglu",
                       norm="rmsnorm", dropout=False)
# GPT-3 175B as Megatron-LM sizes it: 50257 tokens padded to a multiple of 128 × t = 1024, tied embeddings.
GPT3_MEGATRON = ModelShape(layers=96, hidden=12288, heads=96, ffn_hidden=49152, vocab=51200, tied_embeddings=True)


def test_llama2_7b_parameters_match_hf_model_card():
    # HF model card / safetensors metadata for meta-llama/Llama-2-7b-hf: 6,738,415,616 parameters.
    assert transformer_parameters(LLAMA2_7B) == 6_738_415_616


def test_llama3_8b_parameters_match_hf_model_card():
    # HF model card / safetensors metadata for meta-llama/Meta-Llama-3-8B: 8,030,261,248 parameters.
    assert transformer_parameters(LLAMA3_8B) == 8_030_261_248


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

"""Tests for rules.estimates.memory.activations (Korthikanti et al. 2022, arXiv 2205.05198): each quotes its source."""

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.estimates.memory.activations import (
    RECOMPUTE_MODES,
    ActivationSaving,
    BatchShape,
    PipelineSchedule,
    activation_bytes_per_gpu,
    activation_bytes_per_layer,
    logits_bytes,
)
from rules.estimates.memory.model_state import gathered_parameters_bytes
from rules.estimates.model.parameters import largest_layer_parameters, transformer_parameters
from rules.estimates.model.shapes import MLP_KINDS, ModelShape

MIB = 2**20

# GPT-3 175B as Korthikanti et al. size it (Table 2): h = 12288, a = 96, s = 2048, b = 1, L = 96.
GPT3 = ModelShape(layers=96, hidden=12288, heads=96)
GPT3_BATCH = BatchShape(sequence_length=2048, micro_batch=1)
SELECTIVE_SP = ActivationSaving(recompute="selective", sequence_parallel=True)


@pytest.mark.parametrize(
    ("label", "saving", "tensor_parallel", "mib"),
    [
        # sbh(34 + 5as/h): no parallelism.
        ("no parallelism", ActivationSaving(), 1, 2736),
        # sbh(10 + 24/t + 5as/(ht)): tensor parallel.
        ("TP", ActivationSaving(), 8, 552),
        # sbh(34/t + 5as/(ht)): tensor + sequence parallel.
        ("TP+SP", ActivationSaving(sequence_parallel=True), 8, 342),
        # sbh(10 + 24/t): tensor parallel + selective recompute.
        ("TP+selective", ActivationSaving(recompute="selective"), 8, 312),
        # sbh·34/t: tensor + sequence parallel + selective recompute.
        ("TP+SP+selective", SELECTIVE_SP, 8, 102),
        # 2sbh: full recompute (layer input only, TP without SP keeps it replicated).
        ("full recompute", ActivationSaving(recompute="full"), 8, 48),
    ],
)
def test_gpt3_175b_per_layer_matches_korthikanti_table2(label, saving, tensor_parallel, mib):
    got = activation_bytes_per_layer(GPT3, GPT3_BATCH, saving, tensor_parallel) / MIB
    assert got == pytest.approx(mib, abs=0.5), label


def test_table2_formulas_exact_for_other_shapes():
    s, b, h, a = 4096, 2, 8192, 64
    sbh = s * b * h
    shape, batch = ModelShape(layers=1, hidden=h, heads=a), BatchShape(s, b)
    for t in (1, 2, 4, 8):
        def per_layer(**saving):
            return activation_bytes_per_layer(shape, batch, ActivationSaving(**saving), t)  # noqa: B023

        assert per_layer() == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
        assert per_layer(sequence_parallel=True) == pytest.approx(sbh * (34 / t + 5 * a * s / (h * t)))
        assert per_layer(recompute="selective") == pytest.approx(sbh * (10 + 24 / t))
        assert per_layer(sequence_parallel=True, recompute="selective") == pytest.approx(sbh * 34 / t)
        assert per_layer(recompute="full") == 2 * sbh
        assert per_layer(recompute="full", sequence_parallel=True) == 2 * sbh / t


def test_flash_attention_removes_s_squared_terms_keeps_lse():
    # TP+SP with flash: 34sbh/t + fp32 log-sum-exp 4·a·s·b/t.
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    flash = ActivationSaving(sequence_parallel=True, flash_attention=True)
    got = activation_bytes_per_layer(GPT3, GPT3_BATCH, flash, t)
    assert got == pytest.approx(s * b * h * 34 / t + 4 * a * s * b / t)
    selective = activation_bytes_per_layer(GPT3, GPT3_BATCH, replace(flash, recompute="selective"), t)
    assert selective == pytest.approx(s * b * h * 34 / t)


def test_gqa_scales_k_and_v():
    # Llama-3-8B-like, t = 1: K and V are 2sbh·(kv/heads) each instead of 2sbh.
    mha_shape = ModelShape(layers=32, hidden=4096, heads=32)
    batch, flash = BatchShape(8192, 1), ActivationSaving(flash_attention=True)
    sbh = 8192 * 4096
    mha = activation_bytes_per_layer(mha_shape, batch, flash)
    gqa = activation_bytes_per_layer(replace(mha_shape, kv_heads=8), batch, flash)
    assert mha - gqa == pytest.approx(2 * 2 * sbh * (1 - 8 / 32))
    # With t = 16 above kv_heads = 8 each rank still keeps one whole KV head (replicated), where MHA
    # (32 heads) keeps two: K and V differ by 2 × 2·s·b·head_dim per rank.
    head_bytes = 2 * 8192 * (4096 / 32)
    mha16 = activation_bytes_per_layer(mha_shape, batch, flash, 16)
    gqa16 = activation_bytes_per_layer(replace(mha_shape, kv_heads=8), batch, flash, 16)
    assert mha16 - gqa16 == pytest.approx(2 * head_bytes)
    assert activation_bytes_per_layer(replace(mha_shape, kv_heads=1), batch, flash, 16) == pytest.approx(gqa16)


def test_swiglu_stores_gate_up_and_product():
    # MLP inside-TP terms: GeLU 2 × 2sbf, SwiGLU 3 × 2sbf.
    s, b, h, f = 4096, 1, 4096, 14336
    gelu, batch = ModelShape(layers=32, hidden=h, heads=32, ffn_hidden=f), BatchShape(s, b)
    swiglu = replace(gelu, mlp="swiglu")
    assert activation_bytes_per_layer(swiglu, batch) - activation_bytes_per_layer(gelu, batch) == pytest.approx(
        2 * s * b * f)


def test_ffn_hidden_defaults_to_four_times_hidden():
    # Vaswani et al. 2017 §3.3 / GPT: d_ff = 4 × d_model when the shape does not state it.
    stated = replace(GPT3, ffn_hidden=4 * 12288)
    assert activation_bytes_per_layer(GPT3, GPT3_BATCH) == activation_bytes_per_layer(stated, GPT3_BATCH)


def test_no_dropout_drops_masks():
    s, b, h, a = 2048, 1, 12288, 96
    diff = activation_bytes_per_layer(GPT3, GPT3_BATCH) - activation_bytes_per_layer(
        replace(GPT3, dropout=False), GPT3_BATCH)
    # Two sbh hidden masks, the as²b attention mask and the 2as²b dropout output.
    assert diff == pytest.approx(2 * s * b * h + 3 * a * s * s * b)


def test_pipeline_first_stage_holds_l_layers_and_interleave_penalty():
    # Korthikanti §4.2.3: p in-flight micro-batches × L/p layers = L layers; interleaved × (1 + (p−1)/(pv)).
    per_layer = activation_bytes_per_layer(GPT3, GPT3_BATCH, SELECTIVE_SP, 8)

    def first_stage(**schedule):
        return activation_bytes_per_gpu(GPT3, GPT3_BATCH, SELECTIVE_SP, 8, PipelineSchedule(**schedule),
                                        include_embedding=False)

    assert first_stage() == pytest.approx(96 * per_layer)
    assert first_stage(stages=8) == pytest.approx(96 * per_layer)
    assert first_stage(stages=8, virtual_stages=2) == pytest.approx(96 * per_layer * (1 + 7 / 16))
    assert first_stage(stages=8, micro_batches=4) == pytest.approx(96 * per_layer / 2)


def test_first_stage_matches_megatron_compute_activation_memory():
    # Megatron-LM megatron/training/theoretical_memory_usage.py, compute_activation_memory (SP + selective):
    # (sbh(18 + 4·ffn/h)·L + 8sb·p + sbh·p) / t. GPT-3 175B, L = 96, p = 8, t = 8:
    # sbh = 25,165,824 -> 34·sbh·96 = 82,141,249,536; 8sb·8 = 131,072; sbh·8 = 201,326,592;
    # sum / 8 = 10,292,838,400 bytes.
    got = activation_bytes_per_gpu(GPT3, GPT3_BATCH, SELECTIVE_SP, 8, PipelineSchedule(stages=8))
    assert got == pytest.approx(10_292_838_400)


def test_single_stage_adds_logits():
    with_vocab = replace(GPT3, vocab=51200)
    without = activation_bytes_per_gpu(GPT3, GPT3_BATCH, SELECTIVE_SP, 8)
    with_logits = activation_bytes_per_gpu(with_vocab, GPT3_BATCH, SELECTIVE_SP, 8)
    assert with_logits - without == pytest.approx(logits_bytes(2048, 1, 51200, 12288, 8, True))
    # p > 1: the first stage does not hold the logits.
    eight_stages = PipelineSchedule(stages=8)
    assert activation_bytes_per_gpu(with_vocab, GPT3_BATCH, SELECTIVE_SP, 8, eight_stages) == (
        activation_bytes_per_gpu(GPT3, GPT3_BATCH, SELECTIVE_SP, 8, eight_stages))


@pytest.mark.parametrize(
    ("shape", "saving", "tensor_parallel", "match"),
    [
        (GPT3, ActivationSaving(recompute="partial"), 1, "allowed: none, selective, full"),
        (replace(GPT3, mlp="relu"), ActivationSaving(), 1, "allowed: gelu, swiglu"),
        (replace(GPT3, kv_heads=200), ActivationSaving(), 1, "exceeds"),
        (GPT3, ActivationSaving(), 0, "tensor_parallel"),
        (GPT3, ActivationSaving(sequence_parallel="yes"), 1, "sequence_parallel"),
    ],
)
def test_activation_invalid_inputs_raise(shape, saving, tensor_parallel, match):
    with pytest.raises(ValueError, match=match):
        activation_bytes_per_layer(shape, GPT3_BATCH, saving, tensor_parallel)


# ---------------------------------------------------------------------------------------------------
# Logits
# ---------------------------------------------------------------------------------------------------
def test_logits_match_korthikanti_output_layer_term():
    # §4.3 / Megatron compute_activation_memory: 4sbh(1 + V/h)/t with sequence parallelism.
    s, b, h, v, t = 2048, 1, 12288, 51200, 8
    assert logits_bytes(s, b, v, h, t, sequence_parallel=True) == pytest.approx(4 * s * b * h * (1 + v / h) / t)
    # Without SP the hidden-state inputs stay replicated across TP ranks.
    assert logits_bytes(s, b, v, h, t) == pytest.approx(4 * s * b * h + 4 * s * b * v / t)


def test_fp32_logits_dominate_at_128k_vocab():
    # Llama-3 vocab 128,256, h = 4096, s = 8192: fp32 logits 4.2 GB against 0.13 GB of inputs.
    s, b, h, v = 8192, 1, 4096, 128256
    total = logits_bytes(s, b, v, h)
    assert total == 4 * s * b * h + 4 * s * b * v
    assert 4 * s * b * v / total > 0.96
    assert logits_bytes(s, b, v, h, logits_bytes_per_element=2) < total


@given(
    layers=st.integers(min_value=1, max_value=200),
    sequence_length=st.integers(min_value=1, max_value=1 << 20),
    micro_batch=st.integers(min_value=1, max_value=64),
    head_dim=st.sampled_from((32, 64, 128, 256)),
    heads=st.integers(min_value=1, max_value=256),
    kv_divisor=st.sampled_from((1, 2, 4, 8)),
    ffn_hidden=st.integers(min_value=1, max_value=1 << 17),
    tensor_parallel=st.integers(min_value=1, max_value=64),
    sequence_parallel=st.booleans(),
    recompute=st.sampled_from(RECOMPUTE_MODES),
    flash_attention=st.booleans(),
    mlp=st.sampled_from(MLP_KINDS),
    dropout=st.booleans(),
    pipeline_parallel=st.integers(min_value=1, max_value=64),
    virtual_stages=st.integers(min_value=1, max_value=8),
    vocab=st.integers(min_value=1, max_value=1 << 18),
)
def test_activations_and_logits_are_finite_and_non_negative(
    layers, sequence_length, micro_batch, head_dim, heads, kv_divisor, ffn_hidden, tensor_parallel,
    sequence_parallel, recompute, flash_attention, mlp, dropout, pipeline_parallel, virtual_stages, vocab,
):
    shape = ModelShape(layers=layers, hidden=heads * head_dim, heads=heads, kv_heads=max(1, heads // kv_divisor),
                       ffn_hidden=ffn_hidden, vocab=vocab, mlp=mlp, dropout=dropout, norm="rmsnorm")
    saving = ActivationSaving(recompute, sequence_parallel, flash_attention)
    got = activation_bytes_per_gpu(shape, BatchShape(sequence_length, micro_batch), saving, tensor_parallel,
                                   PipelineSchedule(pipeline_parallel, virtual_stages))
    assert math.isfinite(got) and got > 0
    params = transformer_parameters(shape)
    largest = largest_layer_parameters(replace(shape, tied_embeddings=True), unit="block")
    assert params > 0 and largest > 0
    assert gathered_parameters_bytes(largest) > 0


def test_context_parallelism_divides_the_stored_activations_by_its_degree():
    # Megatron-LM docs/source/api-guide/context_parallel.rst: CP "partitions the network inputs and all activations
    # along sequence dimension" and "the activation memory footprint per GPU is also CP times smaller".
    # A Llama-2-7B-shaped stage at s = 32,768, b = 1, t = 1, selective recompute + FlashAttention, no dropout:
    # per layer 16sbh + 6sbf (Korthikanti Table 2 terms with SwiGLU) = 131,584 · s B, × 32 layers; token ids
    # 8sb; logits 4sbh + 4sbV (§4.3): 137,975,824,384 + 262,144 + 4,731,174,912 = 142,707,261,440 B.
    shape = ModelShape(layers=32, hidden=4096, heads=32, ffn_hidden=11008, vocab=32000, mlp="swiglu", dropout=False)
    saving = ActivationSaving(recompute="selective", flash_attention=True)
    whole = activation_bytes_per_gpu(shape, BatchShape(sequence_length=32768, micro_batch=1), saving)

    assert whole == 142_707_261_440
    assert activation_bytes_per_gpu(shape, BatchShape(32768, 1), saving, context_parallel=4) == whole / 4
    # Every term kept is linear in s, so it equals one rank holding s/c tokens (the layout search's reading).
    assert activation_bytes_per_gpu(shape, BatchShape(8192, 1), saving) == whole / 4

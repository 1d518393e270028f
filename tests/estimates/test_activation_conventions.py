"""Tests for rules.estimates.memory.activation_conventions: Megatron-LM's count and the width of stored activations.

The expected figures are the public formulae evaluated by hand, each with its source:
- Megatron-LM ``megatron/training/theoretical_memory_usage.py``, ``compute_activation_memory`` (sequence
  parallelism + selective recomputation) and ``compute_activation_memory_without_sp`` (anything else), as
  ``report_theoretical_memory`` chooses between them;
- Korthikanti et al. 2022 (arXiv 2205.05198) Table 2 with each 2-byte term at 4 bytes for fp32 training.
"""

import math
from dataclasses import replace

import pytest

from rules.errors import InconsistentInput
from rules.estimates.memory.activation_conventions import (
    ACTIVATION_CONVENTIONS,
    ACTIVATION_ELEMENT_BYTES,
    ActivationCounting,
    activation_element_bytes,
    counted_activation_bytes,
    megatron_activation_bytes,
)
from rules.estimates.memory.activations import (
    ActivationSaving,
    BatchShape,
    PipelineSchedule,
    activation_bytes_per_gpu,
    activation_bytes_per_layer,
    logits_bytes,
)
from rules.estimates.memory.model_state import PRECISIONS
from rules.estimates.model.shapes import ModelShape

MIB = 2**20

# Llama-2-7B (Touvron et al. 2023; Hugging Face meta-llama/Llama-2-7b-hf config.json): 32 layers, hidden 4096,
# 32 heads, intermediate 11008, vocabulary 32000, SwiGLU, no dropout. s = 4096, b = 1.
LLAMA2_7B = ModelShape(layers=32, hidden=4096, heads=32, ffn_hidden=11008, vocab=32000, mlp="swiglu",
                       norm="rmsnorm", dropout=False)
BATCH = BatchShape(sequence_length=4096, micro_batch=1)
SP_SELECTIVE = ActivationSaving(recompute="selective", sequence_parallel=True, flash_attention=True)
S, B, H, F, L = 4096, 1, 4096, 11008, 32
SBH = S * B * H  # 16,777,216
SBF = S * B * F  # 45,088,768


def megatron_padded_vocab(vocab: int, tensor_parallel: int, divisible_by: int = 128) -> int:
    # Megatron-LM megatron/training/vocab_utils.py: padded to a multiple of make_vocab_size_divisible_by × t.
    multiple = divisible_by * tensor_parallel
    return math.ceil(vocab / multiple) * multiple


# ---------------------------------------------------------------------------------------------------
# Megatron-LM theoretical_memory_usage.py, compute_activation_memory (t > 1, SP + selective)
# ---------------------------------------------------------------------------------------------------
def test_llama2_7b_tp8_pp1_matches_megatron_compute_activation_memory():
    # Per layer sbh(18 + 4·ffn/h) = 18 × 16,777,216 + 4 × 45,088,768 = 482,344,960 B; × L = 15,435,038,720.
    # Embedding: 8sbp + sbhp = 32,768 + 16,777,216 (p = 1).
    # p = 1 adds 4sbh(1 + V/h) with V padded to 32,768 (multiple of 128 × 8): 67,108,864 + 536,870,912.
    # Sum 16,055,828,480 ÷ t = 8: 2,006,978,560 B = 1914.00 MB as Megatron prints it (MiB).
    vocab = megatron_padded_vocab(32000, 8)
    assert vocab == 32768
    got = megatron_activation_bytes(LLAMA2_7B, BATCH, SP_SELECTIVE, 8)
    assert got == 2_006_978_560
    assert round(got / MIB, 2) == 1914.00
    # The vocabulary is padded as Megatron pads it, so the padded size gives the same figure.
    assert megatron_activation_bytes(replace(LLAMA2_7B, vocab=vocab), BATCH, SP_SELECTIVE, 8) == got


def test_llama2_7b_tp8_pp4_matches_megatron_compute_activation_memory():
    # p = 4: L layers of the first stage's p in-flight micro-batches, no output layer:
    # 15,435,038,720 + (8sb + sbh) × 4 = 15,502,278,656; ÷ 8 = 1,937,784,832 B = 1848.02 MB.
    # m ≥ p micro-batches per step leave it (min(1, m/p) = 1); m = 2 halves it; interleaving with v = 2
    # multiplies it by 1 + (p − 1)/(p·v) = 1.375: 2,664,454,144 B.
    shape = replace(LLAMA2_7B, vocab=megatron_padded_vocab(32000, 8))

    def megatron(**schedule):
        return megatron_activation_bytes(shape, BATCH, SP_SELECTIVE, 8, PipelineSchedule(stages=4, **schedule))

    assert megatron() == 1_937_784_832
    assert round(megatron() / MIB, 2) == 1848.02
    assert megatron(micro_batches=64) == 1_937_784_832
    assert megatron(micro_batches=2) == 968_892_416
    assert megatron(virtual_stages=2) == 2_664_454_144


def test_megatron_per_layer_written_out_for_tp8():
    # compute_activation_memory written out for one layer and one stage:
    # (sbh(18 + 4f/h) + 8sb + sbh + 4sbh(1 + V/h)) / t.
    one_layer = replace(LLAMA2_7B, layers=1, vocab=32768)
    expected = (SBH * (18 + 4 * F / H) + 8 * S * B + SBH + 4 * SBH * (1 + 32768 / H)) / 8
    assert megatron_activation_bytes(one_layer, BATCH, SP_SELECTIVE, 8) == pytest.approx(expected, rel=1e-15)


# ---------------------------------------------------------------------------------------------------
# Megatron-LM theoretical_memory_usage.py, compute_activation_memory_without_sp (t = 1 or no SP/selective)
# ---------------------------------------------------------------------------------------------------
def test_llama2_7b_tp1_pp1_matches_megatron_without_sp():
    # Megatron turns sequence parallelism off at t = 1 (megatron/training/arguments.py), so
    # report_theoretical_memory takes compute_activation_memory_without_sp:
    # per layer sbh(10 + 24/t) = 34 × 16,777,216 = 570,425,344; × 32 = 18,253,611,008;
    # + 8sbp + sbhp = 32,768 + 16,777,216; p = 1: + 2(sbV/t + sbh) = 2(131,072,000 + 16,777,216) = 295,698,432;
    # sum 18,566,119,424 × 1.05 = 19,494,425,395.2 B = 18591.33 MB.
    got = megatron_activation_bytes(LLAMA2_7B, BATCH, SP_SELECTIVE, 1)
    assert got == pytest.approx(19_494_425_395.2, rel=1e-15)
    assert round(got / MIB, 2) == 18591.33


def test_llama2_7b_tp1_pp4_matches_megatron_without_sp():
    # 18,253,611,008 + (8sb + sbh) × 4 = 18,320,850,944; × 1.05 = 19,236,893,491.2 B = 18345.73 MB.
    got = megatron_activation_bytes(LLAMA2_7B, BATCH, SP_SELECTIVE, 1, PipelineSchedule(stages=4))
    assert got == pytest.approx(19_236_893_491.2, rel=1e-15)
    assert round(got / MIB, 2) == 18345.73


@pytest.mark.parametrize("saving", [ActivationSaving(recompute="selective"),  # no SP
                                    ActivationSaving(sequence_parallel=True),  # no selective recompute
                                    ActivationSaving(recompute="full", sequence_parallel=True)])
def test_megatron_without_sp_for_any_other_saving_at_tp8(saving):
    # sbh(10 + 24/8) × 32 + 8sb + sbh + 2(sbV/8 + sbh), × 1.05, not ÷ t; V = 32,768.
    shape = replace(LLAMA2_7B, vocab=32768)
    expected = (SBH * (10 + 24 / 8) * L + 8 * S * B + SBH + 2 * (S * B * 32768 / 8 + SBH)) * 1.05
    assert megatron_activation_bytes(shape, BATCH, saving, 8) == pytest.approx(expected, rel=1e-15)


def test_megatron_and_physical_differ_for_swiglu_without_dropout():
    # Per layer at t = 8 with SP + selective: Megatron sbh(18 + 4f/h)/t, physical (16sbh + 6sbf)/t (Korthikanti
    # Table 2 terms without the two dropout masks, SwiGLU's gate, up and product): 538,968,064 vs 482,344,960.
    physical = activation_bytes_per_layer(LLAMA2_7B, BATCH, SP_SELECTIVE, 8)
    assert physical == (16 * SBH + 6 * SBF) / 8
    assert physical / ((18 * SBH + 4 * SBF) / 8) == pytest.approx(538_968_064 / 482_344_960)


def test_megatron_counts_its_formula_regardless_of_gqa_dropout_and_flash():
    shape = replace(LLAMA2_7B, vocab=32768)
    base = megatron_activation_bytes(shape, BATCH, SP_SELECTIVE, 8)
    assert megatron_activation_bytes(replace(shape, kv_heads=8, dropout=True, mlp="gelu"), BATCH,
                                     replace(SP_SELECTIVE, flash_attention=False), 8) == base


def test_megatron_divides_by_context_parallel():
    # Megatron-LM docs/source/api-guide/context_parallel.rst: "the activation memory footprint per GPU is also CP
    # times smaller"; Megatron's function has no CP input, so it is applied on top.
    shape = replace(LLAMA2_7B, vocab=32768)
    whole = megatron_activation_bytes(shape, BATCH, SP_SELECTIVE, 8)
    assert megatron_activation_bytes(shape, BATCH, SP_SELECTIVE, 8, context_parallel=4) == whole / 4


# ---------------------------------------------------------------------------------------------------
# fp32 training: 4-byte activations (Korthikanti et al. Table 2 with each 2-byte term at 4 bytes)
# ---------------------------------------------------------------------------------------------------
# GPT-3 175B as Table 2 sizes it: h = 12288, a = 96, s = 2048, b = 1; sbh = 24 MiB, as/h = 16.
GPT3 = ModelShape(layers=96, hidden=12288, heads=96)
GPT3_BATCH = BatchShape(sequence_length=2048, micro_batch=1)


@pytest.mark.parametrize(
    ("label", "saving", "tensor_parallel", "mib"),
    [
        # sbh(34 + 5as/h) at 2 bytes: 32 of the 34 are 2-byte tensors, 2 are 1-byte masks; 5as/h is a 2-byte
        # softmax output, a 1-byte mask and a 2-byte dropout output. At 4 bytes: sbh(66 + 9as/h) = 24 × 210.
        ("no parallelism", ActivationSaving(), 1, 5040),
        # sbh(10 + 24/t + 5as/(ht)) -> sbh(18 + 48/t + 9as/(ht)) = 24 × (18 + 6 + 18).
        ("TP", ActivationSaving(), 8, 1008),
        # sbh(34/t + 5as/(ht)) -> sbh(66/t + 9as/(ht)) = 24 × (8.25 + 18).
        ("TP+SP", ActivationSaving(sequence_parallel=True), 8, 630),
        # sbh(10 + 24/t) -> sbh(18 + 48/t) = 24 × 24.
        ("TP+selective", ActivationSaving(recompute="selective"), 8, 576),
        # sbh·34/t -> sbh·66/t = 24 × 8.25.
        ("TP+SP+selective", ActivationSaving(recompute="selective", sequence_parallel=True), 8, 198),
        # 2sbh -> 4sbh.
        ("full recompute", ActivationSaving(recompute="full"), 8, 96),
    ],
)
def test_gpt3_175b_fp32_per_layer_matches_korthikanti_table2_at_4_bytes(label, saving, tensor_parallel, mib):
    got = activation_bytes_per_layer(GPT3, GPT3_BATCH, saving, tensor_parallel, element_bytes=4)
    assert got == mib * MIB, label


def test_fp32_doubles_every_term_of_a_model_without_dropout():
    # Without dropout masks every Table 2 term is a 16-bit tensor, so 4-byte activations double the layer;
    # FlashAttention's fp32 log-sum-exp (4·a·s·b/t) keeps its width.
    flash = ActivationSaving(flash_attention=True)
    lse = 4 * 32 * S * B
    bf16 = activation_bytes_per_layer(LLAMA2_7B, BATCH, flash)
    fp32 = activation_bytes_per_layer(LLAMA2_7B, BATCH, flash, element_bytes=4)
    assert fp32 - lse == 2 * (bf16 - lse)


def test_fp32_first_stage_keeps_token_ids_and_fp32_logits():
    # One stage, t = 1, selective: 32 layers of 2·(16sbh + 6sbf) + token ids 8sb + logits 8sbh + 4sbV.
    saving = ActivationSaving(recompute="selective")
    got = activation_bytes_per_gpu(LLAMA2_7B, BATCH, saving, element_bytes=4)
    assert got == 32 * 4 * (8 * SBH + 3 * SBF) + 8 * S * B + 8 * SBH + 4 * S * B * 32000
    assert logits_bytes(S, B, 32000, H, element_bytes=4) == 8 * SBH + 4 * S * B * 32000


def test_megatron_at_fp32_widens_its_two_byte_terms():
    # compute_activation_memory's 18sbh + 4sbf is 8 two-byte sbh tensors, 2 one-byte masks and 2 two-byte sbf
    # tensors: (8·4 + 2)sbh + 2·4·sbf at 4 bytes; its output term 4sbh + 4sbV becomes 8sbh + 4sbV (fp32 logits).
    shape = replace(LLAMA2_7B, vocab=32768)
    expected = ((34 * SBH + 8 * SBF) * L + 8 * S * B + SBH + 8 * SBH + 4 * S * B * 32768) / 8
    assert megatron_activation_bytes(shape, BATCH, SP_SELECTIVE, 8, element_bytes=4) == expected


# ---------------------------------------------------------------------------------------------------
# Element widths and dispatch
# ---------------------------------------------------------------------------------------------------
def test_every_training_precision_has_an_activation_width():
    assert set(ACTIVATION_ELEMENT_BYTES) == set(PRECISIONS)
    assert activation_element_bytes("fp32") == 4
    # fp8-mixed keeps the 16-bit count (Transformer Engine's FP8 copies of GEMM inputs are not subtracted).
    assert {activation_element_bytes(p) for p in PRECISIONS if p != "fp32"} == {2}


def test_counted_activation_bytes_dispatches_by_convention():
    shape, pipeline = replace(LLAMA2_7B, vocab=32768), PipelineSchedule(stages=4)
    assert ACTIVATION_CONVENTIONS == ("physical", "megatron")
    assert counted_activation_bytes(ActivationCounting("physical", 2), shape, BATCH, SP_SELECTIVE, 8, pipeline) == (
        activation_bytes_per_gpu(shape, BATCH, SP_SELECTIVE, 8, pipeline))
    assert counted_activation_bytes(ActivationCounting("megatron", 4), shape, BATCH, SP_SELECTIVE, 8, pipeline) == (
        megatron_activation_bytes(shape, BATCH, SP_SELECTIVE, 8, pipeline, element_bytes=4))


@pytest.mark.parametrize(("call", "match"), [
    (lambda: activation_element_bytes("fp8"), "allowed"),
    (lambda: counted_activation_bytes(ActivationCounting("deepspeed"), LLAMA2_7B, BATCH, SP_SELECTIVE, 1,
                                      PipelineSchedule()), "physical, megatron"),
    (lambda: megatron_activation_bytes(LLAMA2_7B, BATCH, SP_SELECTIVE, 0), "tensor_parallel"),
    (lambda: activation_bytes_per_layer(LLAMA2_7B, BATCH, element_bytes=0), "element_bytes"),
])
def test_refusals(call, match):
    with pytest.raises(InconsistentInput, match=match):
        call()

"""Tests for rules.estimates.memory: each published number is quoted with its source."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.estimates.memory import (
    BYTE_CONVENTIONS,
    MLP_KINDS,
    OPTIMIZERS,
    PRECISIONS,
    RECOMPUTE_MODES,
    SHARDINGS,
    ModelStatePerGpu,
    StateBytesPerParam,
    activation_bytes_per_gpu,
    activation_bytes_per_layer,
    gathered_parameters_bytes,
    largest_layer_parameters,
    logits_bytes,
    megatron_most_loaded_shard_parameters,
    megatron_weight_and_optimizer_bytes,
    model_state_bytes_per_param,
    model_state_per_gpu_bytes,
    transformer_parameters,
)

GB = 1e9  # the ZeRO paper's GB
MIB = 2**20


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


def test_offload_moves_optimizer_and_parameters_to_host():
    psi, bpp = 13e9, _zero_paper()
    plain = model_state_per_gpu_bytes(psi, psi, bpp, "zero3", data_parallel=8)
    opt = model_state_per_gpu_bytes(psi, psi, bpp, "zero3", data_parallel=8, offload_optimizer=True)
    assert opt.optimizer_bytes == 0
    assert opt.host_offload_bytes == pytest.approx(plain.optimizer_bytes)
    both = model_state_per_gpu_bytes(
        psi, psi, bpp, "zero3", data_parallel=8, offload_optimizer=True, offload_parameters=True
    )
    assert both.weights_bytes == 0 and both.optimizer_bytes == 0
    assert both.host_offload_bytes == pytest.approx(plain.optimizer_bytes + plain.weights_bytes)
    assert both.gradients_bytes == pytest.approx(plain.gradients_bytes)
    # ZeRO-Offload on ZeRO-2 (DeepSpeed's usual pairing).
    z2 = model_state_per_gpu_bytes(psi, psi, bpp, "zero2", data_parallel=8, offload_optimizer=True)
    assert z2.gpu_total_bytes == pytest.approx(2 * psi + 2 * psi / 8)
    with pytest.raises(ValueError, match="offload_parameters"):
        model_state_per_gpu_bytes(psi, psi, bpp, "zero2", data_parallel=8, offload_parameters=True)
    with pytest.raises(ValueError, match="offload_optimizer"):
        model_state_per_gpu_bytes(psi, psi, bpp, "ddp", data_parallel=8, offload_optimizer=True)


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
# 3. Activations (Korthikanti et al. 2022, arXiv 2205.05198, Table 2)
# ---------------------------------------------------------------------------------------------------
GPT3 = {"sequence_length": 2048, "micro_batch": 1, "hidden": 12288, "heads": 96}


@pytest.mark.parametrize(
    ("label", "kwargs", "mib"),
    [
        # sbh(34 + 5as/h): no parallelism.
        ("no parallelism", {}, 2736),
        # sbh(10 + 24/t + 5as/(ht)): tensor parallel.
        ("TP", {"tensor_parallel": 8}, 552),
        # sbh(34/t + 5as/(ht)): tensor + sequence parallel.
        ("TP+SP", {"tensor_parallel": 8, "sequence_parallel": True}, 342),
        # sbh(10 + 24/t): tensor parallel + selective recompute.
        ("TP+selective", {"tensor_parallel": 8, "recompute": "selective"}, 312),
        # sbh·34/t: tensor + sequence parallel + selective recompute.
        ("TP+SP+selective", {"tensor_parallel": 8, "sequence_parallel": True, "recompute": "selective"}, 102),
        # 2sbh: full recompute (layer input only, TP without SP keeps it replicated).
        ("full recompute", {"tensor_parallel": 8, "recompute": "full"}, 48),
    ],
)
def test_gpt3_175b_per_layer_matches_korthikanti_table2(label, kwargs, mib):
    got = activation_bytes_per_layer(**GPT3, **kwargs) / MIB
    assert got == pytest.approx(mib, abs=0.5), label


def test_table2_formulas_exact_for_other_shapes():
    s, b, h, a = 4096, 2, 8192, 64
    sbh = s * b * h
    for t in (1, 2, 4, 8):
        kw = {"sequence_length": s, "micro_batch": b, "hidden": h, "heads": a, "tensor_parallel": t}
        assert activation_bytes_per_layer(**kw) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
        assert activation_bytes_per_layer(**kw, sequence_parallel=True) == pytest.approx(
            sbh * (34 / t + 5 * a * s / (h * t))
        )
        assert activation_bytes_per_layer(**kw, recompute="selective") == pytest.approx(sbh * (10 + 24 / t))
        assert activation_bytes_per_layer(**kw, sequence_parallel=True, recompute="selective") == pytest.approx(
            sbh * 34 / t
        )
        assert activation_bytes_per_layer(**kw, recompute="full") == 2 * sbh
        assert activation_bytes_per_layer(**kw, recompute="full", sequence_parallel=True) == 2 * sbh / t


def test_flash_attention_removes_s_squared_terms_keeps_lse():
    # TP+SP with flash: 34sbh/t + fp32 log-sum-exp 4·a·s·b/t.
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    got = activation_bytes_per_layer(**GPT3, tensor_parallel=t, sequence_parallel=True, flash_attention=True)
    assert got == pytest.approx(s * b * h * 34 / t + 4 * a * s * b / t)
    selective = activation_bytes_per_layer(
        **GPT3, tensor_parallel=t, sequence_parallel=True, flash_attention=True, recompute="selective"
    )
    assert selective == pytest.approx(s * b * h * 34 / t)


def test_gqa_scales_k_and_v():
    # Llama-3-8B-like, t = 1: K and V are 2sbh·(kv/heads) each instead of 2sbh.
    base = {"sequence_length": 8192, "micro_batch": 1, "hidden": 4096, "heads": 32, "flash_attention": True}
    sbh = 8192 * 4096
    mha = activation_bytes_per_layer(**base)
    gqa = activation_bytes_per_layer(**base, kv_heads=8)
    assert mha - gqa == pytest.approx(2 * 2 * sbh * (1 - 8 / 32))
    # With t = 16 above kv_heads = 8 each rank still keeps one whole KV head (replicated), where MHA
    # (32 heads) keeps two: K and V differ by 2 × 2·s·b·head_dim per rank.
    head_bytes = 2 * 8192 * (4096 / 32)
    mha16 = activation_bytes_per_layer(**base, tensor_parallel=16)
    gqa16 = activation_bytes_per_layer(**base, kv_heads=8, tensor_parallel=16)
    assert mha16 - gqa16 == pytest.approx(2 * head_bytes)
    assert activation_bytes_per_layer(**base, kv_heads=1, tensor_parallel=16) == pytest.approx(gqa16)


def test_swiglu_stores_gate_up_and_product():
    # MLP inside-TP terms: GeLU 2 × 2sbf, SwiGLU 3 × 2sbf.
    s, b, h, f = 4096, 1, 4096, 14336
    kw = {"sequence_length": s, "micro_batch": b, "hidden": h, "heads": 32, "ffn_hidden": f}
    assert activation_bytes_per_layer(**kw, mlp="swiglu") - activation_bytes_per_layer(
        **kw, mlp="gelu"
    ) == pytest.approx(2 * s * b * f)


def test_no_dropout_drops_masks():
    s, b, h, a = 2048, 1, 12288, 96
    diff = activation_bytes_per_layer(**GPT3) - activation_bytes_per_layer(**GPT3, dropout=False)
    # Two sbh hidden masks, the as²b attention mask and the 2as²b dropout output.
    assert diff == pytest.approx(2 * s * b * h + 3 * a * s * s * b)


def test_pipeline_first_stage_holds_l_layers_and_interleave_penalty():
    # Korthikanti §4.2.3: p in-flight micro-batches × L/p layers = L layers; interleaved × (1 + (p−1)/(pv)).
    kw = {**GPT3, "tensor_parallel": 8, "sequence_parallel": True, "recompute": "selective"}
    per_layer = activation_bytes_per_layer(**kw)
    p1 = activation_bytes_per_gpu(96, **kw, include_embedding=False)
    p8 = activation_bytes_per_gpu(96, **kw, pipeline_parallel=8, include_embedding=False)
    assert p1 == pytest.approx(96 * per_layer)
    assert p8 == pytest.approx(96 * per_layer)
    inter = activation_bytes_per_gpu(96, **kw, pipeline_parallel=8, virtual_stages=2, include_embedding=False)
    assert inter == pytest.approx(96 * per_layer * (1 + 7 / 16))
    few = activation_bytes_per_gpu(96, **kw, pipeline_parallel=8, micro_batches=4, include_embedding=False)
    assert few == pytest.approx(96 * per_layer / 2)


def test_first_stage_matches_megatron_compute_activation_memory():
    # Megatron-LM megatron/training/theoretical_memory_usage.py, compute_activation_memory (SP + selective):
    # (sbh(18 + 4·ffn/h)·L + 8sb·p + sbh·p) / t. GPT-3 175B, L = 96, p = 8, t = 8:
    # sbh = 25,165,824 -> 34·sbh·96 = 82,141,249,536; 8sb·8 = 131,072; sbh·8 = 201,326,592;
    # sum / 8 = 10,292,838,400 bytes.
    got = activation_bytes_per_gpu(
        96, **GPT3, tensor_parallel=8, sequence_parallel=True, recompute="selective", pipeline_parallel=8
    )
    assert got == pytest.approx(10_292_838_400)


def test_single_stage_adds_logits():
    kw = {**GPT3, "tensor_parallel": 8, "sequence_parallel": True, "recompute": "selective"}
    without = activation_bytes_per_gpu(96, **kw)
    with_logits = activation_bytes_per_gpu(96, **kw, vocab=51200)
    assert with_logits - without == pytest.approx(logits_bytes(2048, 1, 51200, 12288, 8, True))
    # p > 1: the first stage does not hold the logits.
    assert activation_bytes_per_gpu(96, **kw, pipeline_parallel=8, vocab=51200) == activation_bytes_per_gpu(
        96, **kw, pipeline_parallel=8
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"recompute": "partial"}, "allowed: none, selective, full"),
        ({"mlp": "relu"}, "allowed: gelu, swiglu"),
        ({"kv_heads": 200}, "exceeds"),
        ({"tensor_parallel": 0}, "tensor_parallel"),
        ({"sequence_parallel": "yes"}, "sequence_parallel"),
    ],
)
def test_activation_invalid_inputs_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        activation_bytes_per_layer(**{**GPT3, **kwargs})


# ---------------------------------------------------------------------------------------------------
# 4. Logits
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
# 6. Parameter counts
# ---------------------------------------------------------------------------------------------------
LLAMA2_7B = {  # HF meta-llama/Llama-2-7b-hf config.json
    "layers": 32,
    "hidden": 4096,
    "heads": 32,
    "kv_heads": 32,
    "ffn_hidden": 11008,
    "vocab": 32000,
    "tied_embeddings": False,
}
LLAMA3_8B = {  # HF meta-llama/Meta-Llama-3-8B config.json
    "layers": 32,
    "hidden": 4096,
    "heads": 32,
    "kv_heads": 8,
    "ffn_hidden": 14336,
    "vocab": 128256,
    "tied_embeddings": False,
}


def test_llama2_7b_parameters_match_hf_model_card():
    # HF model card / safetensors metadata for meta-llama/Llama-2-7b-hf: 6,738,415,616 parameters.
    assert transformer_parameters(**LLAMA2_7B) == 6_738_415_616


def test_llama3_8b_parameters_match_hf_model_card():
    # HF model card / safetensors metadata for meta-llama/Meta-Llama-3-8B: 8,030,261,248 parameters.
    assert transformer_parameters(**LLAMA3_8B) == 8_030_261_248


def test_tied_embeddings_count_once():
    untied = transformer_parameters(**LLAMA2_7B)
    tied = transformer_parameters(**{**LLAMA2_7B, "tied_embeddings": True})
    assert untied - tied == 32000 * 4096


def test_largest_layer_parameters_module_and_block():
    arch = {k: v for k, v in LLAMA3_8B.items() if k != "layers"}
    # DeepSpeed all_live counts one module's own params: the 128256 × 4096 embedding.
    assert largest_layer_parameters(**arch) == 128256 * 4096
    # FSDP root unit (embedding + untied head + final norm) outweighs one decoder layer (218,112,000).
    assert largest_layer_parameters(**arch, unit="block") == 2 * 128256 * 4096 + 4096
    small_vocab = {**arch, "vocab": 1000, "tied_embeddings": True}
    assert largest_layer_parameters(**small_vocab, unit="block") == 218_112_000
    assert largest_layer_parameters(**small_vocab) == 4096 * 14336
    with pytest.raises(ValueError, match="allowed: module, block"):
        largest_layer_parameters(**arch, unit="layer")


# ---------------------------------------------------------------------------------------------------
# 7. Megatron-LM theoretical memory
# ---------------------------------------------------------------------------------------------------
GPT3_MEGATRON = {
    "layers": 96,
    "hidden": 12288,
    "heads": 96,
    "ffn_hidden": 49152,
    "padded_vocab": 51200,  # 50257 padded to a multiple of 128 × t = 1024
}


def test_gpt3_175b_weight_and_optimizer_matches_megatron_theoretical_memory_usage():
    # Megatron-LM megatron/training/theoretical_memory_usage.py, compute_weight_and_optimizer_memory,
    # by hand (LayerNorm: norm_size 2, no GQA, tied embeddings, t = 8, p = 16, DP = 8):
    #   per layer = 2h(ffn + 2) + 2h²(1 + 1) = 1,208,008,704 + 603,979,776 = 1,811,988,480
    #   block = 96 × per layer + 2h = 173,950,918,656; embedding = h × 51200 = 629,145,600
    #   total = 174,580,064,256 (GPT-3 "175B")
    #   most loaded shard = (block / 16 + embedding) / 8 = 1,437,634,752 parameters
    #   × 18 B = 25,877,425,536 B (24,678.6 MiB); distributed optimizer × (6 + 12/8) = 10,782,260,640 B.
    kw = {**GPT3_MEGATRON, "tensor_parallel": 8, "pipeline_parallel": 16, "data_parallel": 8}
    shard_kw = {k: v for k, v in kw.items() if k != "data_parallel"}
    assert megatron_most_loaded_shard_parameters(**shard_kw) == pytest.approx(1_437_634_752)
    assert megatron_weight_and_optimizer_bytes(**kw) == pytest.approx(25_877_425_536)
    assert megatron_weight_and_optimizer_bytes(**kw, distributed_optimizer=True) == pytest.approx(10_782_260_640)
    # Total model size: p = t = 1, tied embeddings.
    assert megatron_most_loaded_shard_parameters(**GPT3_MEGATRON) == pytest.approx(174_580_064_256)


def test_megatron_untied_single_stage_adds_output_layer():
    # (block + embedding)/t + embedding/t with untied embeddings and p = 1 -> 21,901,151,232 params at t = 8.
    got = megatron_most_loaded_shard_parameters(
        **GPT3_MEGATRON, untie_embeddings_and_output_weights=True, tensor_parallel=8
    )
    assert got == pytest.approx(21_901_151_232)


def test_megatron_swiglu_gqa_rmsnorm_close_to_llama3_8b():
    # Megatron's count (no biases, RMSNorm) equals ours for a Llama-style model.
    got = megatron_most_loaded_shard_parameters(
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=8,
        ffn_hidden=14336,
        padded_vocab=128256,
        swiglu=True,
        normalization="RMSNorm",
        untie_embeddings_and_output_weights=True,
    )
    assert got == pytest.approx(8_030_261_248)


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
    layers,
    sequence_length,
    micro_batch,
    head_dim,
    heads,
    kv_divisor,
    ffn_hidden,
    tensor_parallel,
    sequence_parallel,
    recompute,
    flash_attention,
    mlp,
    dropout,
    pipeline_parallel,
    virtual_stages,
    vocab,
):
    hidden = heads * head_dim
    kv_heads = max(1, heads // kv_divisor)
    got = activation_bytes_per_gpu(
        layers,
        sequence_length,
        micro_batch,
        hidden,
        heads,
        tensor_parallel=tensor_parallel,
        sequence_parallel=sequence_parallel,
        recompute=recompute,
        flash_attention=flash_attention,
        ffn_hidden=ffn_hidden,
        kv_heads=kv_heads,
        mlp=mlp,
        dropout=dropout,
        pipeline_parallel=pipeline_parallel,
        virtual_stages=virtual_stages,
        vocab=vocab,
    )
    assert math.isfinite(got) and got > 0
    params = transformer_parameters(layers, hidden, heads, kv_heads, ffn_hidden, vocab, False, mlp)
    largest = largest_layer_parameters(hidden, heads, kv_heads, ffn_hidden, vocab, True, mlp, unit="block")
    assert params > 0 and largest > 0
    assert gathered_parameters_bytes(largest) > 0

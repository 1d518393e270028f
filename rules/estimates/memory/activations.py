"""Activation-memory estimators: what one GPU stores for the backward pass, per layer and per pipeline stage.

Pure functions only: 16-bit activations and 1-byte dropout masks as in Korthikanti et al. unless
``element_bytes`` says the stored activations are wider (4 in fp32 training); every choice that changes the
count (recomputation, sequence parallelism, FlashAttention, GQA, SwiGLU, dropout, activation and logits
precision) is an input. This is the ``physical`` activation convention, what the backward pass keeps;
``rules/estimates/memory/activation_conventions.py`` adds Megatron-LM's count. Results are bytes, never GiB;
callers convert.

Sources (cited again where used):
- Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", 2022,
  arXiv 2205.05198, §4 and Table 2.
- Megatron-LM ``megatron/training/theoretical_memory_usage.py`` (compute_activation_memory).
- Dao et al., "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness", 2022.
- A mixture-of-experts MLP: rules/estimates/memory/expert_activations.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from rules.estimates._args import (
    require_at_most,
    require_bool,
    require_choice,
    require_positive,
    require_positive_int,
    require_positive_ints,
)
from rules.estimates.memory.expert_activations import expert_mlp_activation_bytes
from rules.estimates.model.shapes import MLP_KINDS, ModelShape

RECOMPUTE_MODES: Final = ("none", "selective", "full")
FP32_LOGITS_BYTES: Final = 4  # the output layer keeps its logits in fp32 for the cross-entropy loss (§4.3)


@dataclass(frozen=True)
class BatchShape:
    """One micro-batch: its sequences and their length in tokens."""

    sequence_length: int  # s
    micro_batch: int  # b, sequences per micro-batch


@dataclass(frozen=True)
class ActivationSaving:
    """The techniques that cut stored activations (Korthikanti et al. 2022; Dao et al. 2022)."""

    recompute: str = "none"  # one of RECOMPUTE_MODES: none, selective (attention core) or full (per layer)
    sequence_parallel: bool = False  # split the non-tensor-parallel regions along the sequence (§4.2.2)
    flash_attention: bool = False  # keep the softmax log-sum-exp instead of the s × s scores


@dataclass(frozen=True)
class PipelineSchedule:
    """A 1F1B pipeline: its depth p, its interleaving v and the micro-batches m of one optimizer step."""

    stages: int = 1  # p, pipeline-parallel size
    virtual_stages: int = 1  # v, model chunks per stage (interleaved schedule)
    micro_batches: int | None = None  # m per optimizer step; None: at least p (the pipeline is full)


def kv_head_count(shape: ModelShape) -> int:
    """Returns the shape's key/value heads; InconsistentInput unless an integer in [1, heads]."""
    groups = shape.kv_head_count
    require_positive_int("kv_heads", groups)
    require_at_most("kv_heads", groups, "heads", shape.heads)
    return groups


def activation_bytes_per_layer(shape: ModelShape, batch: BatchShape, saving: ActivationSaving = ActivationSaving(),
                               tensor_parallel: int = 1, *, element_bytes: float = 2, expert_tensor: int = 1,
                               load_factor: float = 1.0) -> float:
    """Return activation bytes one GPU stores for one transformer layer (Korthikanti arXiv 2205.05198 Table 2).

    16-bit activations (``element_bytes`` = 2), 1-byte dropout masks. With ffn_hidden = 4h, kv_heads = heads,
    gelu and dropout this equals Table 2 exactly (s sequence, b micro-batch, h hidden, a heads, t tensor parallel):
    none sbh(34 + 5as/h); TP sbh(10 + 24/t + 5as/(ht)); TP+SP sbh(34/t + 5as/(ht));
    TP + selective sbh(10 + 24/t); TP+SP+selective sbh·34/t; full recompute 2sbh (÷t with SP).
    Generalised term by term (see the comments): GQA scales the stored K and V by kv_heads/heads
    (a rank holds at least one KV head once t exceeds kv_heads); SwiGLU stores gate, up and their
    activated product (3 × 2sbf instead of GeLU's input and output 2 × 2sbf); ``dropout=False`` (e.g.
    Llama pre-training) drops the masks; flash attention (Dao et al. 2022) drops the 5as²b terms and
    keeps only the fp32 softmax log-sum-exp, 4·a·s·b/t bytes. Selective recompute drops the whole
    core-attention term (s² terms or log-sum-exp). head_dim is taken as hidden/heads.

    ``element_bytes`` e is the width of every stored activation tensor, the paper's 2 bytes: each 2-byte
    term of Table 2 becomes e bytes (fp32 training keeps e = 4: the layer runs in fp32, so its inputs,
    outputs and softmax are fp32); the dropout masks stay 1 byte (PyTorch keeps them as bool/uint8) and
    FlashAttention's log-sum-exp stays fp32. Table 2 at e = 4, no parallelism: sbh(66 + 9as/h).

    A mixture-of-experts layer (``shape.experts``) keeps the attention, norms, MLP input and dropout terms and replaces
    the MLP's by :func:`rules.estimates.memory.expert_activations.expert_mlp_activation_bytes` (router, routed tokens
    at ``load_factor`` over the balanced mean, experts split over ``expert_tensor`` ranks, shared experts).
    """
    _check_layer(shape, batch, saving, tensor_parallel, element_bytes)
    g = shape.kv_head_count
    sequence_length, micro_batch, hidden, heads = batch.sequence_length, batch.micro_batch, shape.hidden, shape.heads
    sequence_parallel, recompute, flash_attention = saving.sequence_parallel, saving.recompute, saving.flash_attention
    dropout, mlp = shape.dropout, shape.mlp

    s, b, h, a, t, e = sequence_length, micro_batch, hidden, heads, tensor_parallel, element_bytes
    f = shape.ffn_hidden_size
    sbh = s * b * h
    # Sequence parallelism splits the otherwise replicated (non-tensor-parallel) region along the sequence.
    outside_divisor = t if sequence_parallel else 1

    if recompute == "full":
        # Korthikanti §5 / Table 2: only the layer input (2sbh) is kept; the rest is recomputed.
        return e * sbh / outside_divisor

    # Terms outside the tensor-parallel region: replicated on every TP rank unless sequence parallel.
    outside = 0.0
    # Terms inside the tensor-parallel region: split over t (heads or ffn columns per rank).
    inside = 0.0

    # --- Attention block: 11sbh + 5as²b in the paper (§4.1) ---------------------------------------
    outside += e * sbh  # shared input of the Q, K, V projections (layernorm output), 2sbh
    inside += e * sbh / t  # Q for QKᵀ, 2sbh
    kv_bytes_per_rank = e * s * b * (h / a) * max(g / t, 1)  # one of K or V, 2sbh·(kv_heads/heads)
    inside += kv_bytes_per_rank  # K for QKᵀ
    inside += kv_bytes_per_rank  # V for the attention-over-values matmul
    inside += e * sbh / t  # input of the output projection, 2sbh
    if dropout:
        outside += sbh  # dropout mask after the output projection, sbh (1 byte)

    # Core attention, the 5as²b of the paper: softmax output 2as²b, its dropout mask as²b, the dropout
    # output 2as²b. Without dropout the softmax output feeds the values matmul directly: 2as²b. (At e bytes:
    # (2e + 1)as²b and e·as²b.)
    if recompute == "selective":
        core = 0.0  # Korthikanti §4.2.2: QKᵀ, softmax, dropout and attention over V are recomputed
    elif flash_attention:
        core = 4 * a * s * b / t  # FlashAttention keeps only fp32 log-sum-exp per head and position
    else:
        core = ((2 * e + 1) if dropout else e) * a * s * s * b / t

    # --- MLP block: 19sbh in the paper (§4.1) -----------------------------------------------------
    outside += e * sbh  # input of the first linear layer (of a mixture of experts, the router's and the experts'), 2sbh
    experts = 0.0
    if shape.experts is not None:
        experts = expert_mlp_activation_bytes(shape, s * b, e, t, sequence_parallel, expert_tensor, load_factor)
    elif mlp == "gelu":
        inside += 2 * e * s * b * f / t  # GeLU input and GeLU output (second linear input): 8sbh at 4h
    else:
        inside += 3 * e * s * b * f / t  # SwiGLU: gate, up, and activated product (down-proj input)
    if dropout:
        outside += sbh  # dropout mask after the second linear layer, sbh

    # --- Layer norms: 4sbh (two norms, each stores its 2sbh input) ---------------------------------
    outside += 2 * e * sbh

    return outside / outside_divisor + inside + core + experts


def _check_layer(shape: ModelShape, batch: BatchShape, saving: ActivationSaving, tensor_parallel: int,
                 element_bytes: float) -> None:
    """Raise InconsistentInput unless :func:`activation_bytes_per_layer` can count these inputs."""
    require_positive_ints(
        sequence_length=batch.sequence_length,
        micro_batch=batch.micro_batch,
        hidden=shape.hidden,
        heads=shape.heads,
        tensor_parallel=tensor_parallel,
    )
    require_bool("sequence_parallel", saving.sequence_parallel)
    require_bool("flash_attention", saving.flash_attention)
    require_bool("dropout", shape.dropout)
    require_choice("recompute", saving.recompute, RECOMPUTE_MODES)
    require_choice("mlp", shape.mlp, MLP_KINDS)
    require_positive("element_bytes", element_bytes)
    if shape.ffn_hidden is not None:
        require_positive_int("ffn_hidden", shape.ffn_hidden)
    kv_head_count(shape)


def activation_bytes_per_gpu(shape: ModelShape, batch: BatchShape, saving: ActivationSaving = ActivationSaving(),
                             tensor_parallel: int = 1, pipeline: PipelineSchedule = PipelineSchedule(), *,
                             include_embedding: bool = True, logits_bytes_per_element: float = FP32_LOGITS_BYTES,
                             context_parallel: int = 1, element_bytes: float = 2,
                             layer_bytes: Callable[..., float] = activation_bytes_per_layer, expert_tensor: int = 1,
                             load_factor: float = 1.0) -> float:
    """Return activation bytes on the first pipeline stage's GPU (Korthikanti arXiv 2205.05198 §4.2.3, §4.3).

    1F1B: the first stage holds p in-flight micro-batches of ceil(L/p) layers, i.e. L layers' worth when
    p divides L. Interleaving with v > 1 virtual stages multiplies that by 1 + (p − 1)/(p·v) (§4.2.3).
    If ``pipeline.micro_batches`` (per step) is below p without interleaving, only that many are in flight
    (Megatron-LM theoretical_memory_usage.py discounts by min(1, m/p)). ``include_embedding`` adds, per
    in-flight micro-batch, the input token ids 8sb and the embedding dropout mask sbh (§4.3 and Megatron
    compute_activation_memory), ÷t with sequence parallelism. With p = 1 and the shape's ``vocab`` known
    the first stage is also the last and the output layer's buffers (``logits_bytes``) are added; for p > 1
    the last stage's logits are the caller's to evaluate with ``logits_bytes``. ``element_bytes`` is the width
    of the stored activations (:func:`activation_bytes_per_layer`); token ids and masks keep theirs.

    ``context_parallel`` c divides the whole by c: context parallelism "partitions the network inputs and all
    activations along sequence dimension" and "the activation memory footprint per GPU is also CP times
    smaller" (Megatron-LM ``docs/source/api-guide/context_parallel.rst``), so each rank stores its s/c tokens
    of every per-token activation above; the s² scores of attention without FlashAttention become its s/c
    queries against all s keys, also ÷c. Neglected: the K/V chunks in flight in the ring exchange (each rank
    "only stores the KV of a sequence chunk in forward and gathers KV again in backward", so the other ranks'
    K/V are transient, one layer at a time) and the ring's receive buffers.

    ``layer_bytes`` counts one layer: :func:`activation_bytes_per_layer` itself, or a caller's keeping of it (the
    same function of the same arguments; rules/estimates/memory/step_memory.py keeps it per job, since it reads
    neither the pipeline, the context degree nor the micro-batches per step). Of a mixture of experts the first
    stage's layers are its expert layers (``expert_tensor`` and ``load_factor`` passed on), but for the leading dense
    layers it holds, each counted as the shape without experts.
    """
    require_positive_int("layers", shape.layers)
    require_positive_int("pipeline_parallel", pipeline.stages)
    require_positive_int("virtual_stages", pipeline.virtual_stages)
    require_bool("include_embedding", include_embedding)
    require_positive_int("context_parallel", context_parallel)
    if pipeline.micro_batches is not None:
        require_positive_int("micro_batches", pipeline.micro_batches)
    routing = {"expert_tensor": expert_tensor, "load_factor": load_factor} if shape.experts is not None else {}
    per_layer = layer_bytes(shape, batch, saving, tensor_parallel, element_bytes=element_bytes, **routing)
    p, v, micro_batches = pipeline.stages, pipeline.virtual_stages, pipeline.micro_batches
    layers_on_stage = math.ceil(shape.layers / p)
    in_flight: float = p if micro_batches is None else min(p, micro_batches)
    if v > 1:
        in_flight = p * (1 + (p - 1) / (p * v))  # interleaved schedule memory penalty, §4.2.3

    stage_layers = per_layer * layers_on_stage
    dense_layers = min(shape.experts.dense_layers, layers_on_stage) if shape.experts is not None else 0
    if dense_layers:  # the leading dense layers of a mixture of experts are the first stage's
        dense = layer_bytes(replace(shape, experts=None), batch, saving, tensor_parallel, element_bytes=element_bytes)
        stage_layers += dense_layers * (dense - per_layer)
    total = stage_layers * in_flight
    if include_embedding:
        s, b = batch.sequence_length, batch.micro_batch
        divisor = tensor_parallel if saving.sequence_parallel else 1
        embedding = 8 * s * b  # input token ids (int64), Megatron compute_activation_memory
        if shape.dropout:
            embedding += s * b * shape.hidden  # embedding dropout mask, §4.3
        total += embedding / divisor * in_flight
    if p == 1 and shape.vocab is not None:
        total += logits_bytes(batch.sequence_length, batch.micro_batch, shape.vocab, shape.hidden, tensor_parallel,
                              saving.sequence_parallel, logits_bytes_per_element, element_bytes)
    return total / context_parallel


def logits_bytes(
    sequence_length: int,
    micro_batch: int,
    vocab: int,
    hidden: int,
    tensor_parallel: int = 1,
    sequence_parallel: bool = False,
    logits_bytes_per_element: float = FP32_LOGITS_BYTES,
    element_bytes: float = 2,
) -> float:
    """Return output-layer activation bytes per GPU: 4sbh + 4sbV (Korthikanti arXiv 2205.05198 §4.3).

    We use the paper's (and Megatron-LM compute_activation_memory's) 4·s·b·h·(1 + V/h): the final
    layernorm input 2sbh, the output projection input 2sbh, and the logits kept in fp32 for the
    cross-entropy loss, 4sbV. The fp32 logits dominate at large vocabularies (V = 128k is ~31 × h for
    h = 4096), which is why the paper's form is kept rather than the smaller "input 2sbh" reading.
    The logits are split over TP ranks (vocab-parallel cross entropy); the 4sbh hidden-state terms are
    split only with sequence parallelism. ``logits_bytes_per_element`` is 4 (fp32) by default;
    Megatron's compute_activation_memory_without_sp counts 2-byte logits and a single 2sbh input.
    ``element_bytes`` is the width of the two hidden-state inputs (2; 4 in fp32 training).
    """
    _check_logits(sequence_length, micro_batch, vocab, hidden, tensor_parallel, sequence_parallel,
                  logits_bytes_per_element, element_bytes)
    s, b, t = sequence_length, micro_batch, tensor_parallel
    hidden_state_bytes = 2 * element_bytes * s * b * hidden  # final-norm input + output-projection input
    fp32_logits = logits_bytes_per_element * s * b * vocab / t
    return hidden_state_bytes / (t if sequence_parallel else 1) + fp32_logits


def _check_logits(sequence_length: int, micro_batch: int, vocab: int, hidden: int, tensor_parallel: int,
                  sequence_parallel: bool, logits_bytes_per_element: float, element_bytes: float) -> None:
    """Raise InconsistentInput unless :func:`logits_bytes` can count these inputs."""
    require_positive_ints(
        sequence_length=sequence_length,
        micro_batch=micro_batch,
        vocab=vocab,
        hidden=hidden,
        tensor_parallel=tensor_parallel,
    )
    require_bool("sequence_parallel", sequence_parallel)
    require_positive("logits_bytes_per_element", logits_bytes_per_element)
    require_positive("element_bytes", element_bytes)

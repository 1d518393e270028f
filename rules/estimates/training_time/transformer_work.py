"""The work one GPU does for one transformer layer and one micro-batch: GEMM FLOPs, memory traffic, collectives.

Counting only; no rates, no hardware. ``rules.estimates.training_time.step_time`` turns these counts into seconds.

Notation (Korthikanti et al. 2022, arXiv 2205.05198, §3): s sequence length, b micro-batch, h hidden size,
a attention heads, g key/value heads (GQA; g = a for multi-head attention), d = h/a head dimension,
f feed-forward width, V vocabulary, t tensor-parallel degree, c context-parallel degree. A GPU holds
s/c of the sequence's tokens (context parallelism, ring attention) and 1/t of every weight matrix.

Sources:
- GEMM FLOPs per layer: Narayanan et al. 2021 (arXiv 2104.04473) §5.1 / Appendix, 24·b·s·h² + 4·b·s²·h
  forward for f = 4h (QKV 6bsh², scores 2bs²h, context 2bs²h, projection 2bsh², MLP 16bsh²), backward 2×
  forward; Korthikanti et al. 2022 §6 and Appendix A for the same count with recompute.
- Memory-bound operators and their inputs/outputs: Korthikanti et al. 2022 §4.1 (the 34·s·b·h + 5·a·s²·b
  bytes of activations a layer touches), Megatron-LM's fused kernels (layernorm, bias-dropout-add,
  bias-GeLU, scale-mask-softmax), or TorchInductor's or eager PyTorch's kernels
  (``rules.estimates.training_time.memory_bound``, by ``LayerSlice.kernels``).
- Tensor-parallel collectives: Shoeybi et al. 2019 (arXiv 1909.08053) §3, two all-reduces forward and two
  backward per layer; with sequence parallelism Korthikanti et al. 2022 §4.2.2, all-gather + reduce-scatter
  in place of each all-reduce, and one more all-gather per block in the backward pass (the sequence-parallel
  input is gathered again instead of being stored whole).
- FlashAttention (Dao 2022, arXiv 2205.14135 §3; FlashAttention-2, arXiv 2307.08691 §3.1): the score
  matrix never reaches HBM; the causal mask lets the kernel skip half of the s×s blocks, and the backward
  pass does 5 matmuls against the forward's 2 (2.5× the forward FLOPs) because it recomputes the scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rules.errors import InconsistentInput
from rules.estimates._args import require_bool, require_choice, require_positive_int
from rules.estimates.model.shapes import MLP_KINDS, ModelShape
from rules.estimates.training_time.memory_bound import (
    ACTIVATION_BYTES,
    KERNEL_STYLES,
    LOSS_BYTES_PER_LOGIT,
    Regions,
    memory_bound_work,
)

RECOMPUTE_MODES: Final = ("none", "selective", "full")

BACKWARD_GEMM_FACTOR: Final = 2.0  # weight and input gradients (Narayanan et al. 2021 §5.1)
FLASH_BACKWARD_FACTOR: Final = 2.5  # FlashAttention-2 §3.1: 5 matmuls backward against 2 forward
FLASH_CAUSAL_FRACTION: Final = 0.5  # blocks above the diagonal are skipped


def check_shape(shape: ModelShape) -> None:
    """Raises InconsistentInput unless the step-time model can count ``shape``: positive dimensions, the
    vocabulary (the output layer is a large share of a step), key/value heads that divide the heads."""
    if shape.vocab is None:
        raise InconsistentInput("the step-time model needs the vocabulary size (architecture.vocab)")
    for name in ("layers", "hidden", "heads", "vocab"):
        require_positive_int(name, getattr(shape, name))
    require_positive_int("ffn_hidden", shape.ffn_hidden_size)
    if shape.kv_heads is not None:
        require_positive_int("kv_heads", shape.kv_heads)
        if shape.kv_heads > shape.heads or shape.heads % shape.kv_heads:
            raise InconsistentInput(f"kv_heads ({shape.kv_heads}) must divide heads ({shape.heads})")
    require_choice("mlp", shape.mlp, MLP_KINDS)
    require_bool("dropout", shape.dropout)
    require_bool("tied_embeddings", shape.tied_embeddings)


def _head_dim(shape: ModelShape) -> float:
    """Returns hidden / heads, the width of one head's queries, keys and values as the step model counts them."""
    return shape.hidden / shape.heads


def _mlp_matrices(shape: ModelShape) -> int:
    return 3 if shape.mlp == "swiglu" else 2


def layer_matrix_parameters(shape: ModelShape) -> float:
    """Return one layer's weights: Q and O (h² each), K and V (h·g·d each), the MLP (h·f each); no norms, biases."""
    h = shape.hidden
    return (2 * h * h + 2 * h * shape.kv_head_count * _head_dim(shape)
            + _mlp_matrices(shape) * h * shape.ffn_hidden_size)


def matrix_parameters(shape: ModelShape) -> float:
    """Return N, the weights whose matrix multiplies run once per token (layers, embedding, output layer).

    Narayanan et al. 2021 (arXiv 2104.04473) eq. 2 without the small terms: 12·l·h² + V·h for GPT
    (f = 4h, tied embeddings); an untied output layer adds another V·h.
    """
    embeddings = shape.vocab * shape.hidden * (1 if shape.tied_embeddings else 2)
    return shape.layers * layer_matrix_parameters(shape) + embeddings


@dataclass(frozen=True)
class LayerSlice:
    """How one layer is cut for one GPU (the micro-batch and its sequences, tensor and context degree, sequence
    parallelism) and how the framework runs it (FlashAttention, overlap, kernels, fp8 recipe)."""

    sequence_length: int  # tokens per sequence: the job's batch, not the model's shape
    micro_batch: int
    tensor: int = 1
    context: int = 1
    sequence_parallel: bool = False
    flash_attention: bool = False
    tensor_comm_overlap: bool = False  # the tensor-parallel collectives run under the GEMMs (TE userbuffers)
    kernels: str = "fused"  # who writes the memory-bound kernels: fused, compiled or eager (memory_bound.py)
    fp8_recipe: str = "delayed"  # how fp8-mixed GEMM inputs are scaled: delayed, current or mxfp8 (fp8_casts.py)


@dataclass(frozen=True)
class LayerWork:
    """One GPU's work for one layer and one micro-batch, forward and backward, recompute included."""

    dense_flops: float  # QKV, projection and MLP GEMMs (run at the layout's GEMM precision)
    dense_bytes: float  # HBM traffic of those GEMMs: weights read, inputs read, outputs written
    attention_flops: float  # scores and context matmuls as executed (bf16; FlashAttention's causal half)
    memory_bytes: float  # HBM traffic of the memory-bound operators
    kernels: int  # kernel launches: GEMMs, attention, memory-bound operators, tensor-parallel collectives
    tp_collectives: tuple[tuple[str, float], ...]  # (kind, full buffer bytes) per collective, in order
    cp_exchange_bytes: float  # K/V (and their gradients) sent around the context-parallel ring
    recompute_dense_flops: float  # the part of dense_flops spent recomputing (hardware, not model FLOPs)


def layer_regions(shape: ModelShape, part: LayerSlice) -> Regions:
    """Returns the elements each memory-bound operator of one layer runs over, one micro-batch on one GPU."""
    s, b, t, c = part.sequence_length, part.micro_batch, part.tensor, part.context
    tokens = b * s / c
    query = tokens * shape.hidden / t
    key_value = tokens * shape.kv_head_count * _head_dim(shape) / min(t, shape.kv_head_count)
    # positional, in Regions' order (hidden, gathered, query, key_value, rotary, mlp, scores): the search builds many
    return Regions(tokens * shape.hidden / (t if part.sequence_parallel else 1), tokens * shape.hidden, query,
                   key_value, query + key_value, tokens * shape.ffn_hidden_size / t, shape.heads / t * b * s * (s / c))


def _tp_collectives(bytes_per_buffer: float, part: LayerSlice, recompute: str) -> tuple[tuple[str, float], ...]:
    """Return the tensor-parallel collectives of one layer, forward + backward (+ the recomputed forward)."""
    if part.tensor == 1:
        return ()
    if part.sequence_parallel:
        forward = (("all-gather", bytes_per_buffer), ("reduce-scatter", bytes_per_buffer)) * 2
        backward = forward + (("all-gather", bytes_per_buffer),) * 2  # the gathered inputs are not kept
    else:
        forward = (("all-reduce", bytes_per_buffer),) * 2
        backward = forward
    return forward + backward + (forward if recompute == "full" else ())


def layer_work(shape: ModelShape, part: LayerSlice, recompute: str) -> LayerWork:
    """Return one GPU's FLOPs, HBM bytes and collectives for one layer and one micro-batch (forward + backward).

    Dense GEMMs: 2·(s·b/c)·(weights of the layer)/t forward, twice that backward; full recompute runs the
    forward again (Korthikanti et al. 2022 §5, HFU 96·b·s·l·h²). Attention matmuls: 4·b·s·(s/c)·h/t forward
    (every query of the GPU's s/c tokens against all s keys), twice that backward, plus one more forward
    with selective or full recompute (§4.2.2); FlashAttention instead skips the causal half and does 2.5×
    the forward in its backward, so selective recompute adds nothing. Memory traffic and kernels: the
    memory-bound operators of ``part.kernels`` (rules.estimates.training_time.memory_bound; fused: the
    layernorm, bias-dropout-add, activation, softmax and attention-dropout kernels, backward twice the
    forward), recomputed forwards again; sequence parallelism splits the norm/residual region over t; one
    launch per GEMM, attention kernel and tensor-parallel collective besides (catalogue ``kernel_launch_us``).
    Tensor-parallel collectives carry s·b·h/c activations of 2 bytes each. ``dense_bytes`` is the GEMMs'
    own HBM traffic (16-bit weights and activations), for a roofline when a GPU holds few tokens.
    """
    require_choice("recompute", recompute, RECOMPUTE_MODES)
    s, b, t, c = part.sequence_length, part.micro_batch, part.tensor, part.context
    tokens = b * s / c
    dense_forward = 2 * tokens * layer_matrix_parameters(shape) / t
    attention_forward = 2 * 2 * b * s * (s / c) * shape.hidden / t
    if part.flash_attention:
        attention_forward *= FLASH_CAUSAL_FRACTION
        attention = attention_forward * (1 + FLASH_BACKWARD_FACTOR)
        attention += attention_forward if recompute == "full" else 0.0
    else:
        attention = attention_forward * (1 + BACKWARD_GEMM_FACTOR)
        attention += attention_forward if recompute != "none" else 0.0
    recompute_dense = dense_forward if recompute == "full" else 0.0
    dense = dense_forward * (1 + BACKWARD_GEMM_FACTOR) + recompute_dense
    # Roofline bytes of the GEMMs: each pass reads the GPU's weights and every matmul's input and writes its
    # output (QKV: h in, h + 2gd out; projection h/t in, h out; MLP h in, (k − 1)·f out, f in, h out).
    h, f, g = shape.hidden, shape.ffn_hidden_size, shape.kv_head_count
    widths = (h, (h + 2 * g * _head_dim(shape)) / t, h / t, h, h, (_mlp_matrices(shape) - 1) * f / t, f / t, h)
    gemm_bytes_forward = (layer_matrix_parameters(shape) / t + tokens * sum(widths)) * ACTIVATION_BYTES
    passes = 1 + BACKWARD_GEMM_FACTOR + (1 if recompute == "full" else 0)

    require_choice("kernels", part.kernels, KERNEL_STYLES)
    memory_bound = memory_bound_work(shape, part.kernels, layer_regions(shape, part), recompute, part.flash_attention)
    buffer = tokens * shape.hidden * ACTIVATION_BYTES
    collectives = _tp_collectives(buffer, part, recompute)
    kv_bytes = 2 * tokens * shape.kv_head_count * _head_dim(shape) / min(t, shape.kv_head_count) * ACTIVATION_BYTES
    # Ring attention: each of c−1 steps passes the K/V block on; backward passes K/V and their gradients.
    exchange = (c - 1) * kv_bytes * (1 + 2) if c > 1 else 0.0
    return LayerWork(
        dense_flops=dense,
        dense_bytes=gemm_bytes_forward * passes,
        attention_flops=attention,
        memory_bytes=memory_bound.bytes,
        kernels=memory_bound.kernels + len(collectives),
        tp_collectives=collectives,
        cp_exchange_bytes=exchange,
        recompute_dense_flops=recompute_dense,
    )


def layer_gemms(shape: ModelShape, part: LayerSlice) -> tuple[tuple[float, float, float], ...]:
    """Return one layer's forward GEMMs on one GPU as (m, n, k): m rows (the GPU's b·s/c tokens, gathered when sequence
    parallel), n output columns, k the inner dimension.

    QKV, attention projection, MLP up (with the gate for SwiGLU), MLP down; Megatron-LM's ColumnParallelLinear splits
    n over the t ranks, RowParallelLinear splits k (Shoeybi et al. 2019, arXiv 1909.08053, §3). Their FLOPs add up to
    ``layer_work``'s forward dense FLOPs. The backward pass runs each as a data-gradient GEMM (m, k, n) and a
    weight-gradient GEMM (n, k, m) (Narayanan et al. 2021, arXiv 2104.04473, §5.1).
    """
    tokens = part.micro_batch * part.sequence_length / part.context
    h, f, t = shape.hidden, shape.ffn_hidden_size, part.tensor
    qkv = (h + 2 * shape.kv_head_count * _head_dim(shape)) / t
    return ((tokens, qkv, h), (tokens, h, h / t), (tokens, (_mlp_matrices(shape) - 1) * f / t, h), (tokens, h, f / t))


@dataclass(frozen=True)
class OutputLayerWork:
    """The last pipeline stage's output layer and loss, one micro-batch, forward and backward."""

    flops: float
    memory_bytes: float


def output_layer_work(shape: ModelShape, part: LayerSlice) -> OutputLayerWork:
    """Return the logits GEMM FLOPs (2·s·b·h·V/t forward, 3× with backward) and the cross-entropy traffic.

    Narayanan et al. 2021 (arXiv 2104.04473) eq. 3 counts the logit layer as 6·s·b·h·V per step; the
    cross entropy reads and writes the s·b·V/t logits a few times, as ``part.kernels`` builds it
    (``memory_bound.LOSS_BYTES_PER_LOGIT``: Megatron-LM's vocab-parallel cross entropy over fp32 logits when fused).
    The output layer is never recomputed.
    """
    tokens = part.micro_batch * part.sequence_length / part.context
    logits = tokens * shape.vocab / part.tensor
    flops = 2 * tokens * shape.hidden * shape.vocab / part.tensor * (1 + BACKWARD_GEMM_FACTOR)
    memory = logits * LOSS_BYTES_PER_LOGIT[part.kernels]
    return OutputLayerWork(flops=flops, memory_bytes=memory)

"""The memory-bound operators of one transformer layer and of the loss, by who writes their kernels.

Counting only: HBM bytes and kernel launches of one layer and micro-batch on one GPU, per element of the region each
operator runs over (``Regions``); ``rules.estimates.training_time.transformer_work`` sizes the regions and
``rules.estimates.training_time.step_time`` turns bytes into seconds at the GPU's triad bandwidth and kernels into
launches (catalogue ``step_time.kernel_launch_us``). ``kernels`` (``workload.training.kernels``) is one of:

- ``fused`` (default): Megatron-Core with Transformer Engine's fused kernels, what the step model was calibrated on:
  layernorm, bias-dropout-add, bias-activation and scale-mask-softmax each one kernel reading its inputs and writing
  its output once (Korthikanti et al. 2022, arXiv 2205.05198, §4.1; Megatron-LM's fused kernels), the backward
  BACKWARD_MEMORY_FACTOR times the forward's traffic, the vocab-parallel cross entropy over fp32 logits. No rotary
  kernel: the calibration runs (GPT) have none.
- ``compiled``: torch.compile with TorchInductor. Inductor fuses the pointwise and reduction operators between two
  GEMMs (or the attention kernel) into one generated kernel that reads its inputs and writes its outputs once (Ansel
  et al. 2024, "PyTorch 2", ASPLOS '24, doi 10.1145/3620665.3640366, TorchInductor's scheduler and fusion; PyTorch
  docs ``torch.compiler_get_started``: "The single most important optimization that inductor performs is fusion ...
  turn 2 reads (x, a) and 2 writes (a, b) into 1 read (x) and 1 write (b)"); matmuls stay library calls. Per layer
  that is, against fused: the residual add and the following norm are one chain (read residual and branch, write
  residual and normed: 8 B, against bias-dropout-add's 6 and layernorm's 4); rotary embedding is a chain of its own
  for a Llama-style model; the reference implementation's separate q, k, v and gate, up projections stay separate
  GEMMs (more launches), and the chain after them reads each one's data gradient; the cross entropy is generated too,
  reading the 16-bit logits twice forward (max, exp-sum) and once backward while writing their gradient (AOTAutograd's
  partitioner keeps the row statistics and recomputes the softmax in the backward), 8 B per logit against fused's 20.
- ``eager``: plain PyTorch, every operator its own kernel reading and writing HBM, the backward as autograd runs it
  (PyTorch ``tools/autograd/derivatives.yaml``, the entries named below, read at pytorch/pytorch @ d327a787, whose
  copy predates ``_to_copy`` and ``silu``: one kernel each backward, ``_to_copy_backward`` and ``silu_backward``).
  The reference implementations, counted line by line:
  a Llama-style shape (``norm`` rmsnorm) follows Hugging Face transformers
  ``src/transformers/models/llama/modeling_llama.py`` @ 5dd4a635, a GPT-style shape (layernorm) karpathy/nanoGPT
  ``model.py`` @ 3adf61e1; the loss follows transformers ``src/transformers/loss/loss_utils.py`` @ 0114da07.
  Activations are 16-bit, as in the rest of the model (weights in bf16, Megatron's convention); explicit fp32
  upcasts count 4 bytes per element.

  Llama (modeling_llama.py), per element of its region:
  * LlamaRMSNorm.forward, L71-74: ``to(float32)`` (read 2, write 4), ``pow(2)`` (4 + 4), ``mean(-1)`` (read 4),
    ``+ eps`` and ``rsqrt`` (one value per row: launches only), ``hidden_states * rsqrt(...)`` (4 + 4),
    ``.to(input_dtype)`` (4 + 2), ``self.weight * ...`` (2 + 2): 8 kernels, 36 B. Backward, 16 kernels, 92 B: weight
    mul (mul.Tensor: grad × x 2+2+2, its sum over tokens 2, grad × weight 2+2), ``to`` (2 + 4), the rsqrt mul
    (grad × rsqrt 4+4, grad × x 4+4+4, its sum over the row 4), rsqrt (``-0.5 * grad * result.pow(3)``: 3 row-sized
    kernels), mean (mean.dim: the expanded gradient ÷ h, writes 4), pow (pow.Tensor_Scalar, ``pow_backward``:
    ``self.pow(1)`` 4+4, × 2 4+4, × grad 4+4+4), the sum of the two gradients of the fp32 copy (4+4+4), ``to``
    (4 + 2). Two per layer (L333, L351).
  * rotate_half L144-148 and apply_rotary_pos_emb L173-174, for q and for k: ``q * cos`` (2 + 2), ``-x2`` (half the
    elements, 1 + 1), ``cat`` (2 + 2), ``* sin`` (2 + 2), ``+`` (2 + 2 + 2): 5 kernels, 20 B each. Backward, 9 kernels,
    30 B: ``grad * sin`` and ``grad * cos`` (4 each), ``neg`` (2), two slice_backward (zeros 2, copy into the half
    1 + 1: 4 each), the sum of the three gradients of x (two adds, 6 each).
  * LlamaMLP.forward, L190: ``act_fn(gate) * up`` with SiLU: silu (2 + 2), mul (2 + 2 + 2): 2 kernels, 10 B per
    element of f. Backward: the mul's two gradients (6 each), silu_backward (2 + 2 + 2): 3 kernels, 18 B.
  * Residual adds L347, L353: 6 B forward; backward, the gradient of the residual stream summed over its two
    consumers (6 B).
  * Separate q_proj, k_proj, v_proj (L245-253) and gate_proj, up_proj (L184-185): 3 more GEMMs forward, 6 backward,
    and one add (6 B) per extra consumer of the input's gradient, over the GEMM input.
  * Without FlashAttention, eager_attention_forward L206-229: repeat_kv copies of k and v (L216-217; write 2 per
    query element, read 2 per key element; backward, the sum back), ``* scaling`` (4; backward 4),
    ``+ causal_mask`` (4), softmax in fp32 (2 + 4; backward reads the fp32 gradient and output, writes 2: 10),
    ``.to(query.dtype)`` (4 + 2; backward 2 + 4), dropout where the shape trains with it (5; 5), the
    ``transpose(1, 2).contiguous()`` copy of the output (4).
  GPT (nanoGPT model.py): ``F.layer_norm`` L27 (one kernel, 4 B; backward one kernel for the input's gradient,
  2 + 2 + 2, one for the weight and bias, 2 + 2: 10 B), GELU L89 (4 B; gelu_backward 6 B), dropout L75, L91 where
  the shape trains with it (native_dropout: 2 + 2 + a 1-byte mask; backward 2 + 1 + 2), residual adds L104-105; the
  q, k, v projection is one GEMM (L56). Without FlashAttention L67-72: scale (4; 4), ``masked_fill`` (4, plus the
  mask comparison's launch; backward 4), softmax in 16 bits (4; backward 6), dropout (5; 5), the contiguous copy (4).
  Loss, loss_utils.py L55 ``logits.float()`` (2 + 4) and L36 ``cross_entropy`` = log_softmax (4 + 4) and nll_loss;
  backward nll_loss_backward (zeros, 4), log_softmax backward (4 + 4 + 4), the cast back (4 + 2): 36 B per logit.

The output layer's kernels are not counted as launches in any style (one stage's few per micro-batch); bias
gradients of projections with biases are left out in every style.
"""

from __future__ import annotations

from functools import cache
from typing import Final, NamedTuple

from rules.estimates.model.shapes import ModelShape

KERNEL_STYLES: Final = ("fused", "compiled", "eager")

ACTIVATION_BYTES: Final = 2  # 16-bit activations (bf16/fp16), also under fp8 GEMMs (Transformer Engine)
MASK_BYTES: Final = 1  # Megatron-LM keeps dropout masks as uint8 (PyTorch's native_dropout: bool)
LOSS_BYTES: Final = 4  # vocab-parallel cross entropy works on fp32 logits
# Bytes per element read and written by one fused memory-bound kernel, forward pass:
_LAYERNORM_BYTES = 2 * ACTIVATION_BYTES  # read x, write y
_RESIDUAL_BYTES = 3 * ACTIVATION_BYTES  # bias-dropout-add: read x and residual, write y
_GELU_BYTES = 2 * ACTIVATION_BYTES  # bias-GeLU: read x, write y
_SWIGLU_BYTES = 3 * ACTIVATION_BYTES  # read gate and up, write their product
_SOFTMAX_BYTES = 2 * ACTIVATION_BYTES  # scale-mask-softmax: read scores, write probabilities
_DROPOUT_BYTES = 2 * ACTIVATION_BYTES  # read x, write y (the mask is added separately)
# Cross entropy over the logits: forward reads the logits twice (max, then exp-sum) and writes fp32
# probabilities; backward reads them and writes the gradient.
_LOSS_PASSES_FORWARD = 3
_LOSS_PASSES_BACKWARD = 2
# An elementwise backward kernel reads the saved input and the incoming gradient and writes the input
# gradient (softmax and layernorm backward also read their saved output): about twice the forward's
# read-one-write-one traffic.
BACKWARD_MEMORY_FACTOR: Final = 2.0
# Bytes per logit, forward + backward, of the loss (module docstring).
LOSS_BYTES_PER_LOGIT: Final = {
    "fused": LOSS_BYTES * (_LOSS_PASSES_FORWARD + _LOSS_PASSES_BACKWARD),
    "compiled": 2 * ACTIVATION_BYTES + 2 * ACTIVATION_BYTES,
    "eager": (ACTIVATION_BYTES + LOSS_BYTES) + 2 * LOSS_BYTES + LOSS_BYTES + 3 * LOSS_BYTES
             + (LOSS_BYTES + ACTIVATION_BYTES),
}


class Regions(NamedTuple):
    """The elements one layer's memory-bound operators run over, one micro-batch on one GPU."""

    hidden: float  # the residual stream and its norms: b·s/c tokens × h, ÷ t with sequence parallelism
    gathered: float  # a column-parallel GEMM's input as the GEMM reads it: b·s/c tokens × h
    query: float  # the queries (or the attention output) of the GPU's heads: b·s/c × a·d/t
    key_value: float  # the keys (or the values) of the GPU's key/value heads: b·s/c × g·d/min(t, g)
    rotary: float  # what rotary embeddings turn: the queries and the keys
    mlp: float  # the MLP's inner width: b·s/c × f/t
    scores: float  # the attention scores of the GPU's heads: a/t × b × s × s/c


class Operator(NamedTuple):
    """A memory-bound operator of a layer: where it runs, how often, and its kernels and bytes per element each way."""

    region: str  # a field of Regions
    count: int  # how many of it one layer runs
    forward_kernels: int
    forward_bytes: float
    backward_kernels: int
    backward_bytes: float
    core: bool = False  # part of the attention core, which selective recompute runs again


class MemoryBound(NamedTuple):
    """One layer's memory-bound work for one micro-batch, forward and backward (and the recomputed forward)."""

    bytes: float
    kernels: int  # GEMMs and the attention kernels included; not the tensor-parallel collectives


class _Traits(NamedTuple):
    """What of a model's shape decides its memory-bound operators (a small key to memoise them on)."""

    mlp: str
    norm: str
    dropout: bool
    grouped_query: bool  # fewer key/value heads than query heads


def _traits(shape: ModelShape) -> _Traits:
    return _Traits(shape.mlp, shape.norm, shape.dropout, shape.kv_head_count < shape.heads)


def _fused_kernel(region: str, count: int, forward_bytes: float, core: bool = False) -> Operator:
    """Returns a fused kernel each way whose backward moves BACKWARD_MEMORY_FACTOR times its forward bytes."""
    return Operator(region, count, 1, forward_bytes, 1, BACKWARD_MEMORY_FACTOR * forward_bytes, core)


def _gemms(forward: int, core: bool = False) -> Operator:
    """Returns ``forward`` GEMM launches, each with a data- and a weight-gradient GEMM backward (bytes: the GEMMs')."""
    return Operator("hidden", 1, forward, 0, 2 * forward, 0, core)


def _flash() -> Operator:
    """Returns the FlashAttention kernel forward and backward (its traffic is in its measured rate)."""
    return Operator("scores", 1, 1, 0, 1, 0, True)


def _fused(traits: _Traits, flash_attention: bool) -> tuple[Operator, ...]:
    """Megatron-Core with Transformer Engine: per layer layernorm, QKV, projection, bias-dropout-add, layernorm, MLP
    up, activation, MLP down, bias-dropout-add (9 kernels forward); backward a data- and a weight-gradient GEMM for each
    GEMM and the five elementwise backward kernels (13). Attention core: one FlashAttention kernel each way; without
    it the scores GEMM, the fused scale-mask-softmax (with its dropout) and the context GEMM forward, and two GEMMs for
    each of those and the softmax backward."""
    residual = _RESIDUAL_BYTES + (MASK_BYTES if traits.dropout else 0)
    activation = _SWIGLU_BYTES if traits.mlp == "swiglu" else _GELU_BYTES
    operators = [_gemms(4), _fused_kernel("hidden", 2, _LAYERNORM_BYTES), _fused_kernel("hidden", 2, residual),
                 _fused_kernel("mlp", 1, activation)]
    if flash_attention:
        return (*operators, _flash())
    operators += [_gemms(2, core=True), _fused_kernel("scores", 1, _SOFTMAX_BYTES, core=True)]
    if traits.dropout:  # in the softmax kernel: its bytes, no launch
        operators.append(Operator("scores", 1, 0, _DROPOUT_BYTES + MASK_BYTES, 0,
                                  BACKWARD_MEMORY_FACTOR * (_DROPOUT_BYTES + MASK_BYTES), True))
    return tuple(operators)


def _llama_style(traits: _Traits) -> bool:
    """Returns whether the shape follows the Llama reference (RMSNorm, rotary embeddings, separate q, k, v)."""
    return traits.norm == "rmsnorm"


def _extra_projections(traits: _Traits) -> int:
    """Returns the GEMMs the reference implementation runs beyond Megatron's four: q, k, v apart (Llama) and gate, up
    apart (SwiGLU)."""
    return (2 if _llama_style(traits) else 0) + (1 if traits.mlp == "swiglu" else 0)


def _compiled(traits: _Traits, flash_attention: bool) -> tuple[Operator, ...]:
    """TorchInductor: one generated kernel per chain between GEMMs (module docstring)."""
    a, mask = ACTIVATION_BYTES, MASK_BYTES if traits.dropout else 0
    extra = _extra_projections(traits)
    operators = [_gemms(4 + extra),
                 _fused_kernel("hidden", 2, 4 * a + mask),  # residual add (and dropout) with the next norm
                 _fused_kernel("mlp", 1, 3 * a if traits.mlp == "swiglu" else 2 * a)]
    if extra:  # the chain after the separate projections' data-gradient GEMMs reads each of their outputs
        operators.append(Operator("gathered", extra, 0, 0, 0, a))
    if _llama_style(traits):
        operators.append(_fused_kernel("rotary", 1, 2 * a))
    if flash_attention:
        return (*operators, _flash())
    return (*operators, _gemms(2, core=True), _fused_kernel("scores", 1, 2 * a + mask, core=True))


# Eager PyTorch, (forward kernels, forward bytes, backward kernels, backward bytes) per element (module docstring).
_RMSNORM = (8, 36, 16, 92)
_LAYERNORM = (1, 4, 2, 10)
_ROTARY = (2 * 5, 20, 2 * 9, 30)  # q and k, 5 kernels each way forward, 9 backward
_SWIGLU = (2, 10, 3, 18)
_GELU = (1, 4, 1, 6)
_RESIDUAL = (1, 6, 1, 6)
_DROPOUT = (1, 5, 1, 5)
_GRADIENT_SUM = (0, 0, 1, 6)  # one add per extra consumer of a GEMM input's gradient


def _eager(traits: _Traits, flash_attention: bool) -> tuple[Operator, ...]:
    """Plain PyTorch: the reference implementations' operators, one kernel each (module docstring)."""
    llama, extra = _llama_style(traits), _extra_projections(traits)
    operators = [_gemms(4 + extra), Operator("hidden", 2, *(_RMSNORM if llama else _LAYERNORM)),
                 Operator("hidden", 2, *_RESIDUAL),
                 Operator("mlp", 1, *(_SWIGLU if traits.mlp == "swiglu" else _GELU))]
    if traits.dropout:
        operators.append(Operator("hidden", 2, *_DROPOUT))
    if extra:
        operators.append(Operator("gathered", extra, *_GRADIENT_SUM))
    if llama:
        operators.append(Operator("rotary", 1, *_ROTARY))
    if flash_attention:
        return (*operators, _flash())
    core = [_gemms(2, core=True)]
    if llama:
        if traits.grouped_query:  # repeat_kv: expand + reshape copies k and v to every query head
            core += [Operator("query", 2, 1, 2, 1, 2, True), Operator("key_value", 2, 0, 2, 0, 2, True)]
        core += [Operator("scores", 1, 1, 4, 1, 4, True), Operator("scores", 1, 1, 4, 0, 0, True),  # scale, mask
                 Operator("scores", 1, 1, 6, 1, 10, True), Operator("scores", 1, 1, 6, 1, 6, True)]  # softmax, to
    else:
        core += [Operator("scores", 1, 1, 4, 1, 4, True), Operator("scores", 1, 2, 4, 1, 4, True),  # scale, mask
                 Operator("scores", 1, 1, 4, 1, 6, True)]  # softmax
    if traits.dropout:
        core.append(Operator("scores", 1, *_DROPOUT, True))
    core.append(Operator("query", 1, 1, 4, 0, 0, True))  # the output's transpose(1, 2).contiguous()
    return (*operators, *core)


_STYLES: Final = {"fused": _fused, "compiled": _compiled, "eager": _eager}


class _Tally(NamedTuple):
    """A layer's operators as ``memory_bound_work`` adds them: (region index, forward and backward bytes of all of its
    count, in the attention core) each, and the kernels, which no region changes."""

    terms: tuple[tuple[int, float, float, bool], ...]
    forward_kernels: tuple[int, int]  # outside the attention core, in it
    backward_kernels: int


@cache
def _tally(traits: _Traits, kernels: str, flash_attention: bool) -> _Tally:
    """Returns the operators of ``kernels`` and their tally, once per model kind (the layout search asks thousands of
    times)."""
    operators = _STYLES[kernels](traits, flash_attention)
    terms = tuple((Regions._fields.index(op.region), op.count * op.forward_bytes, op.count * op.backward_bytes, op.core)
                  for op in operators)
    outside = sum(op.count * op.forward_kernels for op in operators if not op.core)
    core = sum(op.count * op.forward_kernels for op in operators if op.core)
    return _Tally(terms, (outside, core), sum(op.count * op.backward_kernels for op in operators))


def memory_bound_work(shape: ModelShape, kernels: str, regions: Regions, recompute: str,
                      flash_attention: bool) -> MemoryBound:
    """Returns the HBM bytes and kernels of one layer's operators under ``kernels`` over ``regions``, forward and
    backward; full recompute runs the forward again, selective recompute the attention core (not FlashAttention's,
    which recomputes within).

    Each operator's bytes are added one by one in its order (outside the core, then in it, forward then backward), so
    that fused sums round as they always have."""
    tally = _tally(_traits(shape), kernels, flash_attention)
    forward = [0.0, 0.0]  # outside the attention core, in it
    backward = [0.0, 0.0]
    for region, forward_bytes, backward_bytes, core in tally.terms:
        elements = regions[region]
        forward[core] += forward_bytes * elements
        backward[core] += backward_bytes * elements
    outside, core_bytes = forward
    memory = (outside + core_bytes) + (backward[0] + backward[1])
    forward_kernels = tally.forward_kernels[0] + tally.forward_kernels[1]
    kernels_launched = forward_kernels + tally.backward_kernels
    if recompute == "full":
        memory += outside + core_bytes
        kernels_launched += forward_kernels
    elif recompute == "selective" and not flash_attention:
        memory += core_bytes
        kernels_launched += tally.forward_kernels[1]
    return MemoryBound(memory, kernels_launched)

"""Activation bytes under a named convention, at the width the training precision stores them.

Two conventions count what one GPU keeps for the backward pass (the policy's ``conventions.activations``):

- ``physical`` (the default): the tensors the backward pass keeps, term by term from Korthikanti et al.
  2022 Table 2 with the shape's GQA, SwiGLU, dropout and FlashAttention, on the first pipeline stage
  (:func:`rules.estimates.memory.activations.activation_bytes_per_gpu`).
- ``megatron``: Megatron-LM's ``megatron/training/theoretical_memory_usage.py`` as
  ``report_theoretical_memory`` chooses it: ``compute_activation_memory`` with sequence parallelism and
  selective recomputation, ``compute_activation_memory_without_sp`` otherwise (:func:`megatron_activation_bytes`).

The width of a stored activation follows the precision (:data:`ACTIVATION_ELEMENT_BYTES`). Pure functions;
results are bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from rules.estimates._args import require_bool, require_choice, require_positive, require_positive_int
from rules.estimates.memory.activations import (
    RECOMPUTE_MODES,
    ActivationSaving,
    BatchShape,
    PipelineSchedule,
    activation_bytes_per_gpu,
    activation_bytes_per_layer,
)
from rules.estimates.model.shapes import ModelShape

ACTIVATION_CONVENTIONS: Final = ("physical", "megatron")

# Bytes of one stored activation element by training precision (keys: model_state.PRECISIONS).
# - bf16-mixed / fp16-mixed: autocast runs the layers in 16 bits (Korthikanti et al. 2022 §4 count 2 bytes).
# - fp32: nothing is cast down, so every activation the layer saves is fp32.
# - bf16-pure: parameters and activations are bf16.
# - fp8-mixed: 16 bits, an upper bound. Transformer Engine casts each GEMM's inputs to FP8 per GEMM and by
#   default saves the FP8 copy of a Linear layer's input for the weight-gradient GEMM
#   (``transformer_engine/pytorch/module/linear.py``: "FP8 input for forward, FP8 input transpose for
#   backward wgrad"; ``save_original_input=False``), while norms, activation-function inputs and attention
#   (FlashAttention/cuDNN attention keep Q, K, V and the output in 16 bits unless FP8 attention is enabled)
#   stay 16-bit. Which terms shrink depends on the TE version, the recipe (MXFP8 and current scaling keep
#   scale factors and column-wise copies) and the attention backend, so the saving is not counted.
ACTIVATION_ELEMENT_BYTES: Final = {"bf16-mixed": 2, "fp16-mixed": 2, "fp8-mixed": 2, "fp32": 4, "bf16-pure": 2}

# compute_activation_memory_without_sp multiplies its sum by this "buffer for optimizer and miscellaneous
# temporaries (5% overhead)" (Megatron-LM megatron/training/theoretical_memory_usage.py).
MEGATRON_WITHOUT_SP_OVERHEAD: Final = 1.05
# Megatron-LM's input token ids are int64: 8 bytes per token (compute_activation_memory).
TOKEN_ID_BYTES: Final = 8
# Megatron-LM pads the vocabulary to a multiple of --make-vocab-size-divisible-by (default 128) × tensor
# parallel (megatron/training/arguments.py, megatron/training/vocab_utils.py); the formulae use the padded size.
MEGATRON_VOCAB_DIVISIBLE_BY: Final = 128

_NO_SAVING: Final = ActivationSaving()
_ONE_STAGE: Final = PipelineSchedule()


@dataclass(frozen=True)
class ActivationCounting:
    """How activations are counted: the convention and the bytes of one stored element."""

    convention: str = "physical"  # one of ACTIVATION_CONVENTIONS (policy conventions.activations)
    element_bytes: int = 2  # ACTIVATION_ELEMENT_BYTES of the training precision


def activation_element_bytes(precision: str) -> int:
    """Returns the bytes of one stored activation element under a training precision (ACTIVATION_ELEMENT_BYTES)."""
    require_choice("precision", precision, tuple(ACTIVATION_ELEMENT_BYTES))
    return ACTIVATION_ELEMENT_BYTES[precision]


def counted_activation_bytes(counting: ActivationCounting, shape: ModelShape, batch: BatchShape,
                             saving: ActivationSaving, tensor_parallel: int, pipeline: PipelineSchedule, *,
                             context_parallel: int = 1,
                             layer_bytes: Callable[..., float] = activation_bytes_per_layer, expert_tensor: int = 1,
                             load_factor: float = 1.0) -> float:
    """Returns the first pipeline stage's activation bytes per GPU under ``counting``'s convention and width.

    ``layer_bytes`` counts one layer under the physical convention (:func:`activation_bytes_per_gpu`'s), which alone
    reads a mixture of experts' ``expert_tensor`` and routed ``load_factor``: Megatron-LM's formulae take no account
    of experts (they read ffn_hidden_size), and the ``megatron`` convention reproduces them as they are."""
    require_choice("activation convention", counting.convention, ACTIVATION_CONVENTIONS)
    if counting.convention == "megatron":
        return megatron_activation_bytes(shape, batch, saving, tensor_parallel, pipeline,
                                         element_bytes=counting.element_bytes, context_parallel=context_parallel)
    return activation_bytes_per_gpu(shape, batch, saving, tensor_parallel, pipeline,
                                    context_parallel=context_parallel, element_bytes=counting.element_bytes,
                                    layer_bytes=layer_bytes, expert_tensor=expert_tensor, load_factor=load_factor)


def megatron_activation_bytes(shape: ModelShape, batch: BatchShape, saving: ActivationSaving = _NO_SAVING,
                              tensor_parallel: int = 1, pipeline: PipelineSchedule = _ONE_STAGE, *,
                              element_bytes: float = 2, context_parallel: int = 1) -> float:
    """Returns Megatron-LM's activation bytes on the first pipeline stage's GPU (theoretical_memory_usage.py).

    ``report_theoretical_memory`` uses ``compute_activation_memory`` when sequence parallelism and selective
    recomputation are both on, else ``compute_activation_memory_without_sp``; Megatron turns sequence
    parallelism off at tensor parallel 1 (``megatron/training/arguments.py``: "Disabling sequence parallelism
    because tensor model parallelism is disabled"), so t = 1 always takes the second. With s sequence, b
    micro-batch, h hidden, f ffn_hidden, L layers, V the vocabulary padded as Megatron pads it (to a multiple
    of 128·t), t tensor, p pipeline, v virtual stages and m micro-batches per step:

    - with SP + selective: (sbh(18 + 4f/h)·L + 8sbp + sbhp) × schedule, + 4sbh(1 + V/h) if p = 1, all ÷ t;
    - otherwise: (sbh(10 + 24/t)·L + 8sbp + sbhp) × schedule, + 2(sbV/t + sbh) if p = 1, all × 1.05;

    where the schedule factor is 1 + (p − 1)/(p·v) when interleaved (v > 1), else min(1, m/p) when p > 1
    and m is known. Megatron's formulae are those of a GeLU MLP with dropout and multi-head attention: they
    ignore the shape's SwiGLU, GQA, dropout and FlashAttention, count all L layers on the first stage, and
    treat full recomputation and no recomputation alike.

    Two inputs Megatron's function does not take are applied as :func:`activation_bytes_per_gpu` applies
    them: ``element_bytes`` e widens its 2-byte terms (per layer (8e + 2)sbh + 2e·sbf, resp.
    sbh(4e + 2 + 12e/t); output 2e·sbh + 4sbV, resp. e(sbV/t + sbh)) while masks, token ids and fp32 logits
    keep their width, so e = 2 is Megatron's exactly; and the result is ÷ ``context_parallel`` (Megatron-LM
    ``docs/source/api-guide/context_parallel.rst``: "the activation memory footprint per GPU is also CP
    times smaller").
    """
    _check_megatron(shape, batch, saving, tensor_parallel, pipeline, element_bytes, context_parallel)
    s, b, h, e = batch.sequence_length, batch.micro_batch, shape.hidden, element_bytes
    t, p, v, m, layers = tensor_parallel, pipeline.stages, pipeline.virtual_stages, pipeline.micro_batches, shape.layers
    f = shape.ffn_hidden_size
    sbh = s * b * h
    with_sp = saving.sequence_parallel and saving.recompute == "selective" and t > 1

    if with_sp:
        # 8 two-byte tensors of sbh and 2 one-byte masks: 18sbh at e = 2; 2 two-byte tensors of sbf: 4sbf.
        per_layer = (8 * e + 2) * sbh + 2 * e * s * b * f
    else:
        # Table 2's "tensor parallel + selective": 4 two-byte + 2 mask terms outside TP, 12 two-byte inside.
        per_layer = sbh * ((4 * e + 2) + 12 * e / t)
    # Input token ids and the embedding dropout mask for p micro-batches in flight.
    total = per_layer * layers + (TOKEN_ID_BYTES * s * b + sbh) * p
    if v > 1:
        total *= 1 + (p - 1) / (p * v)  # interleaved schedule memory penalty
    elif p > 1 and m is not None:
        total *= min(1, m / p)  # fewer micro-batches than stages in flight
    if p == 1 and shape.vocab is not None:
        multiple = MEGATRON_VOCAB_DIVISIBLE_BY * t
        vocab = math.ceil(shape.vocab / multiple) * multiple
        if with_sp:
            total += 2 * e * sbh + 4 * s * b * vocab  # 4sbh(1 + V/h): inputs to output layer and CE loss
        else:
            total += e * (s * b * vocab / t + sbh)  # logits (÷ t) and final norm output, 2 bytes each
    if with_sp:
        return total / t / context_parallel
    return total * MEGATRON_WITHOUT_SP_OVERHEAD / context_parallel


def _check_megatron(shape: ModelShape, batch: BatchShape, saving: ActivationSaving, tensor_parallel: int,
                    pipeline: PipelineSchedule, element_bytes: float, context_parallel: int) -> None:
    """Raise InconsistentInput unless :func:`megatron_activation_bytes` can count these inputs."""
    require_positive_int("layers", shape.layers)
    require_positive_int("hidden", shape.hidden)
    require_positive_int("sequence_length", batch.sequence_length)
    require_positive_int("micro_batch", batch.micro_batch)
    require_positive_int("tensor_parallel", tensor_parallel)
    require_positive_int("pipeline_parallel", pipeline.stages)
    require_positive_int("virtual_stages", pipeline.virtual_stages)
    require_positive_int("context_parallel", context_parallel)
    require_positive("element_bytes", element_bytes)
    require_bool("sequence_parallel", saving.sequence_parallel)
    require_choice("recompute", saving.recompute, RECOMPUTE_MODES)
    if pipeline.micro_batches is not None:
        require_positive_int("micro_batches", pipeline.micro_batches)
    if pipeline.stages == 1 and shape.vocab is not None:
        require_positive_int("vocab", shape.vocab)

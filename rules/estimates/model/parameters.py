"""Parameter counts from the architecture: the whole model, its largest gathered unit, Megatron's shards.

Pure functions of a :class:`rules.estimates.model.shapes.ModelShape`. Sources (cited again where used):
- Hugging Face Transformers ``models/llama/modeling_llama.py`` (the decoder layer's modules) and the model
  cards' parameter counts (Llama-2-7B 6,738,415,616; Llama-2-13B 13,015,864,320; Meta-Llama-3-8B
  8,030,261,248; Meta-Llama-3-70B 70,553,706,496).
- DeepSpeed ``deepspeed/runtime/zero/stage3.py`` (estimate_zero3_model_states_mem_needs_all_live).
- PyTorch FSDP ``transformer_auto_wrap_policy``.
- Megatron-LM ``megatron/training/theoretical_memory_usage.py`` (compute_weight_and_optimizer_memory).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from rules.estimates._args import (
    require_at_most,
    require_bool,
    require_choice,
    require_non_negative,
    require_positive,
    require_positive_int,
    require_positive_ints,
)
from rules.estimates.memory.model_state import BYTE_CONVENTIONS
from rules.estimates.model.shapes import MLP_KINDS, NORM_KINDS, ModelShape

LAYER_UNITS: Final = ("module", "block")
# The attribute under which a shape keeps the counts derived from it (see _kept).
_KEPT: Final = "_derived_parameter_counts"
_Count = TypeVar("_Count", int, float)


def _kept(shape: ModelShape, key: tuple[object, ...], count: Callable[[], _Count]) -> _Count:
    """Returns ``count()``, kept on ``shape`` under ``key`` once it has returned (a raise is not kept).

    A count here is a pure function of the frozen shape's fields and of ``key``; the memory searches ask for
    the same ones at every layout they try (about 30 estimates an evaluation), so each is computed, and its
    arguments validated, once per shape. The shape is built for one evaluation (rules/checks/facts/model.py),
    so nothing is kept beyond it; ``dataclasses.replace`` makes a shape that keeps nothing.
    """
    kept = shape.__dict__.get(_KEPT)
    if kept is None:
        kept = {}
        object.__setattr__(shape, _KEPT, kept)  # not a field: equality, hashing and repr are unchanged
    if key not in kept:
        kept[key] = count()
    return kept[key]


def _checked_head_dim(shape: ModelShape) -> int:
    """Returns the head dimension after validating the shape's widths, vocabulary, MLP and norm."""
    kv_heads, ffn_hidden, vocab = shape.kv_head_count, shape.ffn_hidden_size, shape.vocab
    require_positive_ints(hidden=shape.hidden, heads=shape.heads, kv_heads=kv_heads, ffn_hidden=ffn_hidden,
                          vocab=vocab)
    require_at_most("kv_heads", kv_heads, "heads", shape.heads)
    require_choice("mlp", shape.mlp, MLP_KINDS)
    require_choice("norm", shape.norm, NORM_KINDS)
    require_bool("tied_embeddings", shape.tied_embeddings)
    require_bool("linear_biases", shape.linear_biases)
    if shape.head_dim is None:
        return shape.hidden // shape.heads
    require_positive_int("head_dim", shape.head_dim)
    return shape.head_dim


def _layer_parts(shape: ModelShape, head_dim: int) -> tuple[dict[str, int], int]:
    """Return the per-module parameter counts of one transformer layer and one norm's count."""
    h, ffn_hidden = shape.hidden, shape.ffn_hidden_size
    q_width, kv_width = shape.heads * head_dim, shape.kv_head_count * head_dim
    bias = 1 if shape.linear_biases else 0
    norm_params = h if shape.norm == "rmsnorm" else 2 * h  # LayerNorm has weight and bias
    modules = {
        "q": h * q_width + bias * q_width,
        "k": h * kv_width + bias * kv_width,
        "v": h * kv_width + bias * kv_width,
        "o": q_width * h + bias * h,
        "down": ffn_hidden * h + bias * h,
        "up": h * ffn_hidden + bias * ffn_hidden,
    }
    if shape.mlp == "swiglu":
        modules["gate"] = h * ffn_hidden + bias * ffn_hidden
    return modules, norm_params


def transformer_parameters(shape: ModelShape) -> int:
    """Return the parameter count of a decoder-only transformer (HF Llama modeling_llama.py layout).

    Per layer: q and o projections h × (heads·head_dim), k and v h × (kv_heads·head_dim); MLP with 2
    (gelu: up, down) or 3 (swiglu: gate, up, down) h × ffn matrices; two norms (RMSNorm h, LayerNorm 2h);
    optional linear biases. Plus a final norm and the embedding, counted once if tied to the output
    layer and twice if untied. Learned position embeddings are not counted (rotary models have none).
    head_dim defaults to hidden // heads. Reproduces the HF model cards' configs: Llama-2-7B
    6,738,415,616, Llama-2-13B 13,015,864,320, Meta-Llama-3-8B 8,030,261,248 and Meta-Llama-3-70B
    70,553,706,496.
    """
    require_positive_int("layers", shape.layers)
    head_dim = _checked_head_dim(shape)
    modules, norm_params = _layer_parts(shape, head_dim)
    per_layer = sum(modules.values()) + 2 * norm_params
    embeddings = shape.vocab * shape.hidden * (1 if shape.tied_embeddings else 2)
    return shape.layers * per_layer + norm_params + embeddings


def parameter_mismatch_fraction(stated: float, from_architecture: float) -> float:
    """Returns how far a stated parameter count lies from the architecture's: |stated − counted| / counted.

    Relative to the count of :func:`transformer_parameters`, so that "7B" for Llama-2-7B's 6,738,415,616 is
    3.9 % apart and 7e9 for Llama-2-13B's 13,015,864,320 is 46.2 % apart.
    """
    require_non_negative("stated parameters", stated)
    require_positive("parameters from the architecture", from_architecture)
    return abs(stated - from_architecture) / from_architecture


def decoder_layer_parameters(shape: ModelShape) -> int:
    """Return the parameters of one decoder layer: attention, MLP and its two norms (:func:`transformer_parameters`'s
    per-layer count; Meta-Llama-3-8B: 218,112,000)."""
    modules, norm_params = _layer_parts(shape, _checked_head_dim(shape))
    return sum(modules.values()) + 2 * norm_params


def largest_layer_parameters(shape: ModelShape, unit: str = "module") -> int:
    """Return the parameters of the largest unit gathered at once (DeepSpeed stage3.py; PyTorch FSDP wrap).

    ``unit="module"``: the largest single module's own parameters, as DeepSpeed's
    estimate_zero3_model_states_mem_needs_all_live counts them (``m.parameters(recurse=False)``):
    usually the embedding or output matrix V × h, else the largest MLP or attention matrix.
    ``unit="block"``: PyTorch FSDP with ``transformer_auto_wrap_policy``, one decoder layer per unit;
    the root unit holds what is not wrapped (embedding, output layer if untied, final norm), so the
    result is the larger of one layer and that root. Kept on the shape per unit (:func:`_kept`).
    """
    return _kept(shape, ("largest_layer", type(unit), unit), lambda: _largest_layer_parameters(shape, unit))


def _largest_layer_parameters(shape: ModelShape, unit: str) -> int:
    require_choice("unit", unit, LAYER_UNITS)
    head_dim = _checked_head_dim(shape)
    modules, norm_params = _layer_parts(shape, head_dim)
    embedding = shape.vocab * shape.hidden
    if unit == "module":
        return max(embedding, *modules.values())
    layer = sum(modules.values()) + 2 * norm_params
    root = embedding * (1 if shape.tied_embeddings else 2) + norm_params
    return max(layer, root)


def megatron_most_loaded_shard_parameters(shape: ModelShape, tensor_parallel: int = 1,
                                          pipeline_parallel: int = 1) -> float:
    """Return parameters on Megatron's most loaded model shard (megatron/training/theoretical_memory_usage.py).

    As compute_weight_and_optimizer_memory counts them (dense models, kv_channels = hidden/heads, no
    linear biases whatever the shape says, ``vocab`` the padded vocabulary): per layer
    2h(ffn·(3/2 if swiglu) + norm) + 2h²(1 + kv_heads/heads), norm = 2 for LayerNorm and 1 for RMSNorm;
    the block adds a final norm; the embedding is h × padded_vocab. The first stage holds
    (block/p + embedding)/t; with untied embeddings and p = 1 the output layer adds another embedding/t.
    """
    require_positive_ints(
        layers=shape.layers,
        hidden=shape.hidden,
        heads=shape.heads,
        ffn_hidden=shape.ffn_hidden_size,
        padded_vocab=shape.vocab,
        tensor_parallel=tensor_parallel,
        pipeline_parallel=pipeline_parallel,
    )
    require_bool("tied_embeddings", shape.tied_embeddings)
    require_choice("mlp", shape.mlp, MLP_KINDS)
    require_choice("norm", shape.norm, NORM_KINDS)
    groups = shape.kv_head_count
    require_positive_int("kv_heads", groups)
    require_at_most("kv_heads", groups, "heads", shape.heads)
    h = shape.hidden
    norm_size = 1 if shape.norm == "rmsnorm" else 2
    gated = 3 / 2 if shape.mlp == "swiglu" else 1
    per_layer = 2 * h * (shape.ffn_hidden_size * gated + norm_size) + 2 * h * h * (1 + groups / shape.heads)
    block = per_layer * shape.layers + norm_size * h
    embedding = h * shape.vocab
    parameters = (block / pipeline_parallel + embedding) / tensor_parallel
    if not shape.tied_embeddings and pipeline_parallel == 1:
        parameters += embedding / tensor_parallel
    return parameters


def megatron_weight_and_optimizer_bytes(shape: ModelShape, tensor_parallel: int = 1, pipeline_parallel: int = 1,
                                        data_parallel: int = 1, distributed_optimizer: bool = False) -> float:
    """Return Megatron's weight + optimizer bytes on the most loaded GPU (theoretical_memory_usage.py).

    compute_weight_and_optimizer_memory: most-loaded-shard parameters × 18 B/param, or × (6 + 12/DP)
    with the distributed optimizer; both taken from ``BYTE_CONVENTIONS`` ("megatron",
    "megatron-distributed-optimizer") so the convention table and this figure cannot drift apart.
    """
    require_positive_int("data_parallel", data_parallel)
    require_bool("distributed_optimizer", distributed_optimizer)
    shard = megatron_most_loaded_shard_parameters(shape, tensor_parallel, pipeline_parallel)
    conv = BYTE_CONVENTIONS["megatron-distributed-optimizer" if distributed_optimizer else "megatron"]
    optimizer_div = data_parallel if conv.optimizer_sharded_over_data_parallel else 1
    per_param = (
        conv.weights_bytes_per_param + conv.gradients_bytes_per_param + conv.optimizer_bytes_per_param / optimizer_div
    )
    return shard * per_param


def first_stage_parameter_factor(shape: ModelShape | None, pipeline_parallel: int) -> float:
    """Returns how many times an even share of the parameters the most loaded pipeline stage holds.

    With pipeline parallelism the first stage holds the embedding on top of its L/p layers (and, untied,
    the last stage the output layer), so the most loaded GPU holds more than parameters/(t·p): the ratio
    of Megatron-LM's most-loaded shard (theoretical_memory_usage.py, via
    :func:`megatron_most_loaded_shard_parameters`) times p to the whole model. 1 without a pipeline or when
    the shape or its vocabulary is not known. Kept on the shape per pipeline degree (:func:`_kept`).
    """
    if pipeline_parallel == 1 or shape is None or shape.vocab is None:
        return 1.0
    return _kept(shape, ("first_stage_factor", type(pipeline_parallel), pipeline_parallel),
                 lambda: _first_stage_parameter_factor(shape, pipeline_parallel))


def _first_stage_parameter_factor(shape: ModelShape, pipeline_parallel: int) -> float:
    whole = megatron_most_loaded_shard_parameters(shape)  # p = t = 1: every parameter once
    most_loaded = megatron_most_loaded_shard_parameters(shape, pipeline_parallel=pipeline_parallel)
    return max(1.0, most_loaded * pipeline_parallel / whole)

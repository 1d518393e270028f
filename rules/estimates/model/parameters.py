"""Parameter counts from the architecture: the whole model, its largest gathered unit, Megatron's shards.

Pure functions of a :class:`rules.estimates.model.shapes.ModelShape`. Sources (cited again where used):
- Hugging Face Transformers ``models/llama/modeling_llama.py`` (the decoder layer's modules) and the model
  cards' parameter counts (Llama-2-7B 6,738,415,616; Llama-2-13B 13,015,864,320; Meta-Llama-3-8B
  8,030,261,248; Meta-Llama-3-70B 70,553,706,496).
- DeepSpeed ``deepspeed/runtime/zero/stage3.py`` (estimate_zero3_model_states_mem_needs_all_live).
- PyTorch FSDP ``transformer_auto_wrap_policy``.
- Megatron-LM ``megatron/training/theoretical_memory_usage.py`` (compute_weight_and_optimizer_memory); for a
  mixture of experts as of commit a7c9e8c44ae89bea013a085ef33ab52a9b7a19b4 ("Make weight and optimizer memory
  estimation take into account expert parallelism correctly", #4687).
- Mixture-of-experts totals: Jiang et al., "Mixtral of Experts", arXiv 2401.04088 §2.1 (46.7B total, 12.9B active
  per token for Mixtral 8x7B); Qwen3 Technical Report, arXiv 2505.09388, Table 2, and the Qwen/Qwen3-235B-A22B model
  card (235B total, 22B activated).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final, TypeVar

from rules.errors import InconsistentInput
from rules.estimates._args import (
    require_at_most,
    require_bool,
    require_choice,
    require_non_negative,
    require_non_negative_int,
    require_positive,
    require_positive_int,
    require_positive_ints,
)
from rules.estimates.memory.model_state import BYTE_CONVENTIONS
from rules.estimates.model.shapes import MLP_KINDS, NORM_KINDS, Experts, ModelShape

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
    """Return the per-module parameter counts of one dense transformer layer and one norm's count."""
    norm_params = shape.hidden if shape.norm == "rmsnorm" else 2 * shape.hidden  # LayerNorm has weight and bias
    return {**_attention_modules(shape, head_dim), **_mlp_modules(shape, shape.ffn_hidden_size)}, norm_params


def _attention_modules(shape: ModelShape, head_dim: int) -> dict[str, int]:
    """Return the q, k, v and o projections' parameters (HF modeling_llama.py LlamaAttention)."""
    h = shape.hidden
    q_width, kv_width = shape.heads * head_dim, shape.kv_head_count * head_dim
    bias = 1 if shape.linear_biases else 0
    return {"q": h * q_width + bias * q_width, "k": h * kv_width + bias * kv_width,
            "v": h * kv_width + bias * kv_width, "o": q_width * h + bias * h}


def _mlp_modules(shape: ModelShape, ffn_hidden: int) -> dict[str, int]:
    """Return the matrices of one MLP of inner dimension ``ffn_hidden``: up and down, and gate for SwiGLU."""
    h, bias = shape.hidden, 1 if shape.linear_biases else 0
    modules = {"down": ffn_hidden * h + bias * h, "up": h * ffn_hidden + bias * ffn_hidden}
    if shape.mlp == "swiglu":
        modules["gate"] = h * ffn_hidden + bias * ffn_hidden
    return modules


def _checked_experts(shape: ModelShape) -> Experts:
    """Returns the shape's experts after validating them: 1 ≤ active ≤ count, widths ≥ 1, 0 ≤ dense_layers < layers."""
    experts = shape.experts
    assert experts is not None
    require_positive_ints(experts=experts.count, active_experts=experts.active, expert_ffn_hidden=experts.ffn_hidden,
                          shared_expert_ffn_hidden=experts.shared_ffn_hidden_size)
    require_at_most("active experts", experts.active, "experts", experts.count)
    require_non_negative_int("shared experts", experts.shared)
    require_non_negative_int("dense_layers", experts.dense_layers)
    if experts.dense_layers >= shape.layers:
        raise InconsistentInput(f"dense_layers {experts.dense_layers} leave none of the {shape.layers} layers to the "
                                "experts")
    return experts


def _expert_layer_parts(shape: ModelShape, head_dim: int) -> tuple[int, int, int]:
    """Return one mixture-of-experts layer's parameters besides its routed experts (attention, two norms, the router
    hidden × count (+ count biases), the shared experts), one routed expert's, and its norm's count."""
    experts = _checked_experts(shape)
    modules, norm_params = _layer_parts(shape, head_dim)
    attention = sum(_attention_modules(shape, head_dim).values())
    router = shape.hidden * experts.count + (experts.count if shape.linear_biases else 0)
    shared = experts.shared * sum(_mlp_modules(shape, experts.shared_ffn_hidden_size).values())
    return attention + 2 * norm_params + router + shared, sum(_mlp_modules(shape, experts.ffn_hidden).values()), \
        norm_params


def _counted(shape: ModelShape, routed: Callable[[Experts], int]) -> int:
    """Return the model's parameters with ``routed(experts)`` routed experts per mixture-of-experts layer."""
    require_positive_int("layers", shape.layers)
    head_dim = _checked_head_dim(shape)
    modules, norm_params = _layer_parts(shape, head_dim)
    dense_layer = sum(modules.values()) + 2 * norm_params
    embeddings = shape.vocab * shape.hidden * (1 if shape.tied_embeddings else 2)
    if shape.experts is None:
        return shape.layers * dense_layer + norm_params + embeddings
    besides, expert, _ = _expert_layer_parts(shape, head_dim)
    moe_layer = besides + routed(shape.experts) * expert
    return shape.experts.dense_layers * dense_layer + shape.expert_layers * moe_layer + norm_params + embeddings


def transformer_parameters(shape: ModelShape) -> int:
    """Return the parameter count of a decoder-only transformer (HF Llama modeling_llama.py layout).

    Per layer: q and o projections h × (heads·head_dim), k and v h × (kv_heads·head_dim); MLP with 2
    (gelu: up, down) or 3 (swiglu: gate, up, down) h × ffn matrices; two norms (RMSNorm h, LayerNorm 2h);
    optional linear biases. Plus a final norm and the embedding, counted once if tied to the output
    layer and twice if untied. Learned position embeddings are not counted (rotary models have none).
    head_dim defaults to hidden // heads. Reproduces the HF model cards' configs: Llama-2-7B
    6,738,415,616, Llama-2-13B 13,015,864,320, Meta-Llama-3-8B 8,030,261,248 and Meta-Llama-3-70B
    70,553,706,496.

    A mixture of experts (``shape.experts``, HF modeling_mixtral.py / modeling_qwen3_moe.py, Megatron-LM
    theoretical_memory_usage.py): its leading ``dense_layers`` are the dense layers above; each other layer holds
    the attention, two norms, a router (h × count), ``count`` routed experts of the MLP form (3·h·f_e for SwiGLU,
    2·h·f_e for GeLU) and ``shared`` shared experts (of shared_ffn_hidden). Mixtral 8x7B: 46,702,792,704 (Jiang et
    al. 2024 §2.1: 46.7B); Qwen3-235B-A22B 235.09B (model card: 235B).
    """
    return _counted(shape, lambda experts: experts.count)


def active_parameters(shape: ModelShape) -> int:
    """Return the parameters one token runs through: :func:`transformer_parameters` with ``active`` routed experts
    per mixture-of-experts layer instead of ``count`` (the router, the shared experts and everything else whole, as
    Megatron-LM's num_active_parameters counts them); a dense model's every parameter.

    Mixtral 8x7B: 12,879,925,248 (Jiang et al. 2024 §2.1: 12.9B active); Qwen3-235B-A22B 22.19B (model card: 22B).
    """
    return _counted(shape, lambda experts: experts.active)


def routed_expert_parameters(shape: ModelShape) -> int:
    """Return the routed experts' parameters over all mixture-of-experts layers: layers less dense_layers, × count ×
    one expert's MLP (0 for a dense model). Expert parallelism splits these and nothing else (Megatron-LM
    theoretical_memory_usage.py ``expert_sharded_params_in_transformer_block``)."""
    if shape.experts is None:
        return 0
    require_positive_int("layers", shape.layers)
    _, expert, _ = _expert_layer_parts(shape, _checked_head_dim(shape))
    return shape.expert_layers * shape.experts.count * expert


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
    per-layer count; Meta-Llama-3-8B: 218,112,000); of a mixture of experts, one expert layer with all its experts."""
    head_dim = _checked_head_dim(shape)
    if shape.experts is not None:
        besides, expert, _ = _expert_layer_parts(shape, head_dim)
        return besides + shape.experts.count * expert
    modules, norm_params = _layer_parts(shape, head_dim)
    return sum(modules.values()) + 2 * norm_params


def largest_layer_parameters(shape: ModelShape, unit: str = "module", expert_shards: int = 1) -> int:
    """Return the parameters of the largest unit gathered at once (DeepSpeed stage3.py; PyTorch FSDP wrap).

    ``unit="module"``: the largest single module's own parameters, as DeepSpeed's
    estimate_zero3_model_states_mem_needs_all_live counts them (``m.parameters(recurse=False)``):
    usually the embedding or output matrix V × h, else the largest MLP or attention matrix (of a mixture of
    experts, also one expert's matrix and the router).
    ``unit="block"``: PyTorch FSDP with ``transformer_auto_wrap_policy``, one decoder layer per unit;
    the root unit holds what is not wrapped (embedding, output layer if untied, final norm), so the
    result is the larger of one layer and that root. A mixture-of-experts layer gathers its routed experts split
    over ``expert_shards`` (expert × expert_tensor ranks hold each a share; each rank's is sharded over the
    expert-data-parallel ranks apart). Kept on the shape per unit and shards (:func:`_kept`).
    """
    return _kept(shape, ("largest_layer", type(unit), unit, type(expert_shards), expert_shards),
                 lambda: _largest_layer_parameters(shape, unit, expert_shards))


def _largest_layer_parameters(shape: ModelShape, unit: str, expert_shards: int) -> int:
    require_choice("unit", unit, LAYER_UNITS)
    require_positive_int("expert_shards", expert_shards)
    head_dim = _checked_head_dim(shape)
    modules, norm_params = _layer_parts(shape, head_dim)
    embedding = shape.vocab * shape.hidden
    layer = sum(modules.values()) + 2 * norm_params
    if shape.experts is not None:
        experts = _checked_experts(shape)
        besides, expert, _ = _expert_layer_parts(shape, head_dim)
        expert_layer = besides + math.ceil(experts.count * expert / expert_shards)
        layer = max(layer, expert_layer) if experts.dense_layers else expert_layer
        matrices = [*_attention_modules(shape, head_dim).values(), shape.hidden * experts.count,
                    *_mlp_modules(shape, experts.ffn_hidden).values()]
        if experts.shared:
            matrices += _mlp_modules(shape, experts.shared_ffn_hidden_size).values()
        if experts.dense_layers:
            matrices += _mlp_modules(shape, shape.ffn_hidden_size).values()
    else:
        matrices = list(modules.values())
    if unit == "module":
        return max(embedding, *matrices)
    root = embedding * (1 if shape.tied_embeddings else 2) + norm_params
    return max(layer, root)


def megatron_most_loaded_shard_parameters(shape: ModelShape, tensor_parallel: int = 1, pipeline_parallel: int = 1,
                                          expert_parallel: int = 1, expert_tensor: int = 1) -> float:
    """Return parameters on Megatron's most loaded model shard (megatron/training/theoretical_memory_usage.py).

    As compute_weight_and_optimizer_memory counts them (dense models, kv_channels = hidden/heads, no
    linear biases whatever the shape says, ``vocab`` the padded vocabulary): per layer
    2h(ffn·(3/2 if swiglu) + norm) + 2h²(1 + kv_heads/heads), norm = 2 for LayerNorm and 1 for RMSNorm;
    the block adds a final norm; the embedding is h × padded_vocab. The first stage holds
    (block/p + embedding)/t; with untied embeddings and p = 1 the output layer adds another embedding/t.
    A mixture of experts: the sum of :func:`megatron_expert_shard_parameters`' two parts.
    """
    if shape.experts is not None:
        return sum(megatron_expert_shard_parameters(shape, tensor_parallel, pipeline_parallel, expert_parallel,
                                                    expert_tensor))
    h, norm_size, gated, attention = _megatron_terms(shape, tensor_parallel, pipeline_parallel)
    per_layer = 2 * h * (shape.ffn_hidden_size * gated + norm_size) + attention
    block = per_layer * shape.layers + norm_size * h
    embedding = h * shape.vocab
    parameters = (block / pipeline_parallel + embedding) / tensor_parallel
    if not shape.tied_embeddings and pipeline_parallel == 1:
        parameters += embedding / tensor_parallel
    return parameters


def _megatron_terms(shape: ModelShape, tensor_parallel: int, pipeline_parallel: int) -> tuple[int, int, float, float]:
    """Return h, the norm size, the gated multiplier and one layer's attention parameters as Megatron-LM counts them,
    after validating what its formula reads."""
    require_positive_ints(layers=shape.layers, hidden=shape.hidden, heads=shape.heads, ffn_hidden=shape.ffn_hidden_size,
                          padded_vocab=shape.vocab, tensor_parallel=tensor_parallel,
                          pipeline_parallel=pipeline_parallel)
    require_bool("tied_embeddings", shape.tied_embeddings)
    require_choice("mlp", shape.mlp, MLP_KINDS)
    require_choice("norm", shape.norm, NORM_KINDS)
    groups = shape.kv_head_count
    require_positive_int("kv_heads", groups)
    require_at_most("kv_heads", groups, "heads", shape.heads)
    h = shape.hidden
    attention = 2 * h * h * (1 + groups / shape.heads)
    return h, 1 if shape.norm == "rmsnorm" else 2, 3 / 2 if shape.mlp == "swiglu" else 1, attention


def megatron_expert_shard_parameters(shape: ModelShape, tensor_parallel: int = 1, pipeline_parallel: int = 1,
                                     expert_parallel: int = 1, expert_tensor: int = 1) -> tuple[float, float]:
    """Return (the other parameters, the routed experts' parameters) on Megatron's most loaded shard of a mixture of
    experts, as compute_weight_and_optimizer_memory splits them at Megatron-LM commit a7c9e8c4 (#4687).

    With attention 2h·(heads·head_dim)(1 + kv_heads/heads), dense MLP 2h·f·g, shared experts 2h·(shared·f_s)·g,
    routed experts 2h·f_e·count·g (g = 3/2 for SwiGLU), norms 2h·norm and router h·count per layer: tensor-parallel
    are the dense layers' attention + MLP and the expert layers' attention + shared experts, replicated the norms, the
    routers and the final norm, expert-sharded the routed experts. The most loaded stage holds (tensor-parallel/p +
    embedding)/t + replicated/p + routed/(p · expert_tensor · expert), and with untied embeddings and p = 1 another
    embedding/t. No linear biases; every layer after the leading dense ones holds experts.
    """
    experts = _checked_experts(shape)
    require_positive_ints(expert_parallel=expert_parallel, expert_tensor=expert_tensor)
    h, norm_size, gated, _ = _megatron_terms(shape, tensor_parallel, pipeline_parallel)
    # Megatron's 2h²(1 + g/a)·(kv_channels·a/h), with kv_channels the head dimension (Qwen3: 128 × 64 heads ≠ h).
    attention = 2 * h * shape.heads * _checked_head_dim(shape) * (1 + shape.kv_head_count / shape.heads)
    dense_layers, expert_layers = experts.dense_layers, shape.expert_layers
    shared = 2 * h * experts.shared * experts.shared_ffn_hidden_size * gated
    tensor_sharded = (attention + 2 * h * shape.ffn_hidden_size * gated) * dense_layers + (
        attention + shared) * expert_layers
    replicated = 2 * h * norm_size * shape.layers + h * experts.count * expert_layers + norm_size * h
    routed = 2 * h * experts.ffn_hidden * experts.count * gated * expert_layers
    embedding = h * shape.vocab
    p, t = pipeline_parallel, tensor_parallel
    other = (tensor_sharded / p + embedding) / t + replicated / p
    if not shape.tied_embeddings and p == 1:
        other += embedding / t
    return other, routed / (p * expert_tensor * expert_parallel)


def megatron_weight_and_optimizer_bytes(shape: ModelShape, tensor_parallel: int = 1, pipeline_parallel: int = 1,
                                        data_parallel: int = 1, distributed_optimizer: bool = False, *,
                                        expert_parallel: int = 1, expert_tensor: int = 1,
                                        expert_data_parallel: int | None = None) -> float:
    """Return Megatron's weight + optimizer bytes on the most loaded GPU (theoretical_memory_usage.py).

    compute_weight_and_optimizer_memory: most-loaded-shard parameters × 18 B/param, or × (6 + 12/DP)
    with the distributed optimizer; both taken from ``BYTE_CONVENTIONS`` ("megatron",
    "megatron-distributed-optimizer") so the convention table and this figure cannot drift apart. A mixture of
    experts (Megatron-LM a7c9e8c4): the routed experts' share (:func:`megatron_expert_shard_parameters`) × (6 +
    12/EDP) over the ``expert_data_parallel`` ranks (world / (expert_tensor × expert × p); default DP).
    """
    require_positive_int("data_parallel", data_parallel)
    require_bool("distributed_optimizer", distributed_optimizer)
    expert_data_parallel = data_parallel if expert_data_parallel is None else expert_data_parallel
    require_positive_int("expert_data_parallel", expert_data_parallel)
    conv = BYTE_CONVENTIONS["megatron-distributed-optimizer" if distributed_optimizer else "megatron"]

    def per_param(ranks: int) -> float:
        optimizer_div = ranks if conv.optimizer_sharded_over_data_parallel else 1
        return (conv.weights_bytes_per_param + conv.gradients_bytes_per_param
                + conv.optimizer_bytes_per_param / optimizer_div)

    if shape.experts is None:
        shard = megatron_most_loaded_shard_parameters(shape, tensor_parallel, pipeline_parallel)
        return shard * per_param(data_parallel)
    other, routed = megatron_expert_shard_parameters(shape, tensor_parallel, pipeline_parallel, expert_parallel,
                                                     expert_tensor)
    return other * per_param(data_parallel) + routed * per_param(expert_data_parallel)


def first_stage_parameter_factor(shape: ModelShape | None, pipeline_parallel: int) -> float:
    """Returns how many times an even share of the parameters the most loaded pipeline stage holds.

    With pipeline parallelism the first stage holds the embedding on top of its L/p layers (and, untied,
    the last stage the output layer), so the most loaded GPU holds more than parameters/(t·p): the ratio
    of Megatron-LM's most-loaded shard (theoretical_memory_usage.py, via
    :func:`megatron_most_loaded_shard_parameters`) times p to the whole model. 1 without a pipeline or when
    the shape or its vocabulary is not known. Of a mixture of experts, the factor of the parameters besides the
    routed experts (the first part of :func:`megatron_expert_shard_parameters`), the routed experts being split
    evenly over the stages. Kept on the shape per pipeline degree (:func:`_kept`).
    """
    if pipeline_parallel == 1 or shape is None or shape.vocab is None:
        return 1.0
    return _kept(shape, ("first_stage_factor", type(pipeline_parallel), pipeline_parallel),
                 lambda: _first_stage_parameter_factor(shape, pipeline_parallel))


def _first_stage_parameter_factor(shape: ModelShape, pipeline_parallel: int) -> float:
    if shape.experts is not None:
        whole = megatron_expert_shard_parameters(shape)[0]  # p = t = 1: every parameter besides the routed experts
        most_loaded = megatron_expert_shard_parameters(shape, pipeline_parallel=pipeline_parallel)[0]
    else:
        whole = megatron_most_loaded_shard_parameters(shape)  # p = t = 1: every parameter once
        most_loaded = megatron_most_loaded_shard_parameters(shape, pipeline_parallel=pipeline_parallel)
    return max(1.0, most_loaded * pipeline_parallel / whole)

"""The model a training job trains: its parameter counts, number formats and architecture."""

from __future__ import annotations

from rules.checks.base import Context
from rules.estimates.model.parameters import active_parameters
from rules.estimates.model.shapes import Experts, ModelShape
from rules.job.workload import Architecture, MixtureOfExperts

# The dimensions that size a parameter count and have no default that fits every model family (a 4 × hidden
# MLP fits GPT, not Llama; the vocabulary has none): only with all of them stated is the count checked.
COUNTED_DIMENSIONS = ("layers", "hidden", "heads", "ffn_hidden", "vocab")


def model_state_inputs(ctx: Context) -> tuple[float | None, str | None, str | None]:
    """Returns the parameter count (noted missing when absent), the training precision and optimizer."""
    training = ctx.job.training
    return ctx.needed(training.model.parameters), ctx.value(training.precision), ctx.value(training.optimizer)


def trainable_parameters(ctx: Context) -> float | None:
    """Returns the parameters the job trains: ``trainable_parameters``, else all of ``parameters``."""
    return ctx.value(ctx.job.training.model.trainable_parameters)


def note_missing_formats(ctx: Context, precision: str | None, optimizer: str | None) -> None:
    """Notes the precision and the optimizer as missing inputs when the submission leaves them out."""
    training = ctx.job.training
    for given, value in ((training.precision, precision), (training.optimizer, optimizer)):
        if value is None and given.pointer not in ctx.missing:
            ctx.missing.append(given.pointer)


def architecture(ctx: Context) -> ModelShape | None:
    """Returns the trained model's shape with the documented defaults, or None without layers, hidden and heads.

    Defaults (schemas/submission.schema.json): kv_heads = heads, ffn_hidden = 4 × hidden, head_dim = hidden /
    heads, dropout for gelu MLPs (GPT) and none for swiglu (Llama), RMSNorm for swiglu and LayerNorm for gelu,
    untied embeddings; a mixture of experts (``experts``) without shared experts or leading dense layers.
    """
    return ctx.memo(_architecture)


def counted_architecture(ctx: Context) -> ModelShape | None:
    """Returns the shape when every one of COUNTED_DIMENSIONS is stated, else None; notes nothing missing.

    The parameter count from the architecture is a cross-check of the stated ``parameters``, not an input a
    check needs, so an architecture left incomplete is not reported as missing here.
    """
    stated = ctx.job.training.model.architecture
    if any(ctx.value(getattr(stated, name)) is None for name in COUNTED_DIMENSIONS):
        return None
    return architecture(ctx)


def architecture_words(shape: ModelShape) -> str:
    """Returns the shape as a reviewer checks it against a config.json: "40 layers, hidden 5120, …"."""
    head_dim = "" if shape.head_dim is None else f", head_dim {shape.head_dim}"
    embeddings = "tied" if shape.tied_embeddings else "untied"
    return (f"{shape.layers} layers, hidden {shape.hidden}, {shape.heads} heads, {shape.kv_head_count} kv heads"
            f"{head_dim}, ffn {shape.ffn_hidden_size}, vocab {shape.vocab}, {shape.mlp} MLP, {shape.norm}, "
            f"{embeddings} embeddings{_experts_words(shape.experts)}")


def _experts_words(experts: Experts | None) -> str:
    """Returns ", 8 experts (2 active) of ffn 14336" with the shared experts and dense layers; "" for a dense model."""
    if experts is None:
        return ""
    words = f", {experts.count} experts ({experts.active} active) of ffn {experts.ffn_hidden}"
    if experts.shared:
        words += f", {experts.shared} shared of ffn {experts.shared_ffn_hidden_size}"
    if experts.dense_layers:
        words += f", {experts.dense_layers} leading dense layers"
    return words


def flops_parameters(ctx: Context, needed: bool) -> float | None:
    """Returns the parameters a token's FLOPs run through (N of 6·N per token): the stated ``parameters``, noted
    missing when ``needed``; of a mixture of experts, the active ones its architecture counts
    (:func:`rules.estimates.model.parameters.active_parameters`, the ``active`` experts of each layer, as Megatron-LM's
    num_floating_point_operations counts --moe-router-topk experts), None when its counted dimensions are not all
    stated (noted missing when ``needed``)."""
    training = ctx.job.training
    if training.model.architecture.experts.count.value is None:
        return ctx.needed(training.model.parameters) if needed else ctx.value(training.model.parameters)
    shape = counted_architecture(ctx)
    if shape is None:
        for name in COUNTED_DIMENSIONS if needed else ():
            ctx.needed(getattr(training.model.architecture, name))
        return None
    return active_parameters(shape)


def expert_count(ctx: Context) -> int | None:
    """Returns the trained model's routed experts per layer (``architecture.experts.count``); None: a dense model."""
    count = ctx.value(ctx.job.training.model.architecture.experts.count)
    return int(count) if count is not None else None


def experts_of(ctx: Context, stated: MixtureOfExperts) -> Experts | None:
    """Returns the experts of an architecture's ``experts`` member with its defaults; None: a dense model."""
    count = ctx.value(stated.count)
    if count is None:
        return None
    shared_ffn_hidden = ctx.value(stated.shared_ffn_hidden)
    return Experts(count=int(count), active=int(ctx.value(stated.active)), ffn_hidden=int(ctx.value(stated.ffn_hidden)),
                   shared=int(ctx.value(stated.shared)),
                   shared_ffn_hidden=int(shared_ffn_hidden) if shared_ffn_hidden is not None else None,
                   dense_layers=int(ctx.value(stated.dense_layers)))


def _architecture(ctx: Context) -> ModelShape | None:
    return shape_of(ctx, ctx.job.training.model.architecture)


def shape_of(ctx: Context, architecture: Architecture) -> ModelShape | None:
    """Returns the shape of a stated architecture with the documented defaults (:func:`architecture`), or None
    without layers, hidden and heads (each noted missing)."""
    layers = ctx.needed(architecture.layers)
    hidden = ctx.needed(architecture.hidden)
    heads = ctx.needed(architecture.heads)
    if layers is None or hidden is None or heads is None:
        return None
    mlp = ctx.value(architecture.mlp)
    kv_heads = ctx.value(architecture.kv_heads)
    ffn_hidden = ctx.value(architecture.ffn_hidden)
    vocab = ctx.value(architecture.vocab)
    head_dim = ctx.value(architecture.head_dim)
    dropout = bool(ctx.value(architecture.dropout))
    norm = ctx.value(architecture.norm)
    tied = bool(ctx.value(architecture.tied_embeddings))
    return ModelShape(layers=int(layers), hidden=int(hidden), heads=int(heads), kv_heads=int(kv_heads),
                      ffn_hidden=int(ffn_hidden) if ffn_hidden is not None else None,
                      vocab=int(vocab) if vocab else None, mlp=mlp, norm=norm, dropout=dropout, tied_embeddings=tied,
                      head_dim=int(head_dim) if head_dim is not None else None,
                      experts=experts_of(ctx, architecture.experts))

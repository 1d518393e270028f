"""The model a training job trains: its parameter counts, number formats and architecture."""

from __future__ import annotations

from rules.checks.base import Context
from rules.checks.facts.pointers import ARCHITECTURE, TRAINING, TRAINING_MODEL
from rules.estimates.model.shapes import ModelShape

PARAMETERS = f"{TRAINING_MODEL}/parameters"
# The dimensions that size a parameter count and have no default that fits every model family (a 4 × hidden
# MLP fits GPT, not Llama; the vocabulary has none): only with all of them stated is the count checked.
COUNTED_DIMENSIONS = ("layers", "hidden", "heads", "ffn_hidden", "vocab")
TRAINABLE_PARAMETERS = f"{TRAINING_MODEL}/trainable_parameters"
PRECISION = f"{TRAINING}/precision"
OPTIMIZER = f"{TRAINING}/optimizer"


def model_state_inputs(ctx: Context) -> tuple[float | None, str | None, str | None]:
    """Returns the parameter count (noted missing when absent), the training precision and optimizer."""
    return ctx.need(PARAMETERS), ctx.get(PRECISION), ctx.get(OPTIMIZER)


def note_missing_formats(ctx: Context, precision: str | None, optimizer: str | None) -> None:
    """Notes the precision and the optimizer as missing inputs when the submission leaves them out."""
    for pointer, value in ((PRECISION, precision), (OPTIMIZER, optimizer)):
        if value is None and pointer not in ctx.missing:
            ctx.missing.append(pointer)


def architecture(ctx: Context) -> ModelShape | None:
    """Returns the trained model's shape with the documented defaults, or None without layers, hidden and heads.

    Defaults (schemas/submission.schema.json): kv_heads = heads, ffn_hidden = 4 × hidden, head_dim = hidden /
    heads, dropout for gelu MLPs (GPT) and none for swiglu (Llama), RMSNorm for swiglu and LayerNorm for gelu,
    untied embeddings.
    """
    return ctx.memo("training.architecture", _architecture)


def counted_architecture(ctx: Context) -> ModelShape | None:
    """Returns the shape when every one of COUNTED_DIMENSIONS is stated, else None; notes nothing missing.

    The parameter count from the architecture is a cross-check of the stated ``parameters``, not an input a
    check needs, so an architecture left incomplete is not reported as missing here.
    """
    if any(ctx.get(f"{ARCHITECTURE}/{name}") is None for name in COUNTED_DIMENSIONS):
        return None
    return architecture(ctx)


def architecture_words(shape: ModelShape) -> str:
    """Returns the shape as a reviewer checks it against a config.json: "40 layers, hidden 5120, …"."""
    head_dim = "" if shape.head_dim is None else f", head_dim {shape.head_dim}"
    embeddings = "tied" if shape.tied_embeddings else "untied"
    return (f"{shape.layers} layers, hidden {shape.hidden}, {shape.heads} heads, {shape.kv_head_count} kv heads"
            f"{head_dim}, ffn {shape.ffn_hidden_size}, vocab {shape.vocab}, {shape.mlp} MLP, {shape.norm}, "
            f"{embeddings} embeddings")


def _architecture(ctx: Context) -> ModelShape | None:
    layers = ctx.need(f"{ARCHITECTURE}/layers")
    hidden = ctx.need(f"{ARCHITECTURE}/hidden")
    heads = ctx.need(f"{ARCHITECTURE}/heads")
    if layers is None or hidden is None or heads is None:
        return None
    mlp = ctx.get(f"{ARCHITECTURE}/mlp", "gelu")
    kv_heads = ctx.num(f"{ARCHITECTURE}/kv_heads", heads)
    ffn_hidden = ctx.num(f"{ARCHITECTURE}/ffn_hidden")
    vocab = ctx.num(f"{ARCHITECTURE}/vocab")
    head_dim = ctx.num(f"{ARCHITECTURE}/head_dim")
    dropout = bool(ctx.get(f"{ARCHITECTURE}/dropout", mlp == "gelu"))
    norm = ctx.get(f"{ARCHITECTURE}/norm", "rmsnorm" if mlp == "swiglu" else "layernorm")
    tied = bool(ctx.get(f"{ARCHITECTURE}/tied_embeddings", False))
    return ModelShape(layers=int(layers), hidden=int(hidden), heads=int(heads), kv_heads=int(kv_heads),
                      ffn_hidden=int(ffn_hidden) if ffn_hidden is not None else None,
                      vocab=int(vocab) if vocab else None, mlp=mlp, norm=norm, dropout=dropout, tied_embeddings=tied,
                      head_dim=int(head_dim) if head_dim is not None else None)

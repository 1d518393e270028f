"""The transformer shape the memory, parameter and FLOP estimators share.

A ``ModelShape`` states a decoder-only transformer the way its Hugging Face ``config.json`` does
(``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``,
``intermediate_size``, ``vocab_size``, ``head_dim``, ``tie_word_embeddings``), plus the two choices those
files leave implicit: the MLP form (GeLU with two matrices as in GPT, SwiGLU with three as in Llama) and
whether the model trains with dropout. The estimators validate the fields they use. It is the one shape of
the memory, parameter, step-time (rules/estimates/training_time/transformer_work.py) and search estimators;
the sequence length is not the model's but the job's batch (``TrainingBatch``, ``StepTimeModel``), so one shape
serves every length a job trains or is searched at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MLP_KINDS: Final = ("gelu", "swiglu")
NORM_KINDS: Final = ("rmsnorm", "layernorm")
# Vaswani et al. 2017 ("Attention Is All You Need", §3.3: d_ff = 2048 for d_model = 512) and GPT-2/GPT-3
# size the MLP at four times the hidden size; it is the default when a shape does not state it.
DEFAULT_FFN_MULTIPLE: Final = 4


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's architecture (Hugging Face config.json names in the comments)."""

    layers: int  # num_hidden_layers
    hidden: int  # hidden_size
    heads: int  # num_attention_heads
    kv_heads: int | None = None  # num_key_value_heads; None: as many as heads (no GQA)
    ffn_hidden: int | None = None  # intermediate_size; None: DEFAULT_FFN_MULTIPLE × hidden
    vocab: int | None = None  # vocab_size (Megatron: the padded vocabulary); None: not known
    mlp: str = "gelu"  # one of MLP_KINDS
    norm: str = "layernorm"  # one of NORM_KINDS
    dropout: bool = True  # dropout masks are stored for the backward pass (GPT); Llama trains without
    tied_embeddings: bool = False  # tie_word_embeddings: the output layer reuses the input embedding
    linear_biases: bool = False  # biases on the attention and MLP projections (GPT-2: yes; Llama: no)
    head_dim: int | None = None  # None: hidden // heads

    @property
    def ffn_hidden_size(self) -> int:
        """Returns the MLP inner dimension: ``ffn_hidden``, else DEFAULT_FFN_MULTIPLE × hidden."""
        return DEFAULT_FFN_MULTIPLE * self.hidden if self.ffn_hidden is None else self.ffn_hidden

    @property
    def kv_head_count(self) -> int:
        """Returns the key/value heads: ``kv_heads``, else ``heads`` (multi-head attention)."""
        return self.heads if self.kv_heads is None else self.kv_heads

"""The transformer shape the memory, parameter and FLOP estimators share.

A ``ModelShape`` states a decoder-only transformer the way its Hugging Face ``config.json`` does
(``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``,
``intermediate_size``, ``vocab_size``, ``head_dim``, ``tie_word_embeddings``), plus the two choices those
files leave implicit: the MLP form (GeLU with two matrices as in GPT, SwiGLU with three as in Llama) and
whether the model trains with dropout. The estimators validate the fields they use. It is the one shape of
the memory, parameter, step-time (rules/estimates/training_time/transformer_work.py) and search estimators; a
mixture-of-experts model adds its ``Experts``. The sequence length is not the model's but the job's batch
(``TrainingBatch``, ``StepTimeModel``), so one shape serves every length a job trains or is searched at.
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
class Experts:
    """The mixture-of-experts layers of a model (Hugging Face config.json and Megatron-LM names in the comments).

    Each layer after the leading ``dense_layers`` (whose MLP is the shape's dense ``ffn_hidden``) replaces its MLP
    by a router (a hidden × count matrix) over ``count`` routed experts, each an MLP of the shape's ``mlp`` form with
    inner dimension ``ffn_hidden``, of which ``active`` run per token, plus ``shared`` experts of
    ``shared_ffn_hidden`` that every token runs through (Qwen2-MoE, DeepSeek). Attention is the shape's.
    """

    count: int  # num_local_experts (Mixtral) / num_experts (Qwen); Megatron-LM --num-experts
    active: int  # num_experts_per_tok; Megatron-LM --moe-router-topk
    ffn_hidden: int  # moe_intermediate_size (intermediate_size in Mixtral); --moe-ffn-hidden-size
    shared: int = 0  # shared experts per layer
    shared_ffn_hidden: int | None = None  # shared_expert_intermediate_size; None: ffn_hidden
    dense_layers: int = 0  # leading layers with a dense MLP (first_k_dense_replace; --moe-layer-freq)

    @property
    def shared_ffn_hidden_size(self) -> int:
        """Returns one shared expert's inner dimension: ``shared_ffn_hidden``, else a routed expert's."""
        return self.ffn_hidden if self.shared_ffn_hidden is None else self.shared_ffn_hidden


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
    experts: Experts | None = None  # None: a dense model (every layer's MLP of ffn_hidden)

    @property
    def ffn_hidden_size(self) -> int:
        """Returns the MLP inner dimension: ``ffn_hidden``, else DEFAULT_FFN_MULTIPLE × hidden."""
        return DEFAULT_FFN_MULTIPLE * self.hidden if self.ffn_hidden is None else self.ffn_hidden

    @property
    def expert_layers(self) -> int:
        """Returns the layers whose MLP is a mixture of experts: all but the leading dense ones (0: a dense model)."""
        return 0 if self.experts is None else self.layers - self.experts.dense_layers

    @property
    def kv_head_count(self) -> int:
        """Returns the key/value heads: ``kv_heads``, else ``heads`` (multi-head attention)."""
        return self.heads if self.kv_heads is None else self.kv_heads

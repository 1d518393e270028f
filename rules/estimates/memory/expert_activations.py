"""What one GPU stores for the backward pass of a mixture-of-experts MLP: the router's logits, the routed tokens and the
experts' activations, the shared experts'.

Pure; bytes. The layer around the MLP (attention, norms, the MLP's input and dropout) is counted as a dense layer's
(rules/estimates/memory/activations.py, Korthikanti et al. 2022 Table 2). Sources:

- Megatron-Core ``megatron/core/transformer/moe`` (router.py: the router's logits, in fp32 under
  ``--moe-router-dtype fp32``; token_dispatcher.py: each token is permuted to its ``--moe-router-topk`` experts, the
  expert-tensor-parallel ranks all-gather the tokens of their experts, and unpermuting weights the experts' outputs by
  the routing probabilities, so the permuted inputs and the experts' outputs are kept for the backward pass;
  experts.py: each expert an MLP of ``--moe-ffn-hidden-size`` split over ``--expert-tensor-parallel-size`` ranks).
- Capacity: Megatron-Core ``transformer_config.py`` ``moe_expert_capacity_factor``: "The capacity factor for each
  expert, None means no token will be dropped" (dropless, the default); with a factor C each expert keeps at most C ×
  its balanced share of the routed tokens (``--moe-pad-expert-input-to-capacity`` pads it to exactly that). Lepikhin et
  al., GShard, arXiv 2006.16668 §2.2 (expert capacity 2N/E for top-2 routing: C = 1 per routed copy) and Fedus et al.,
  Switch Transformers, arXiv 2101.03961 §2.2 (capacity factors 1.0 to 2.0; 1.25 in Table 1).
- Megatron-LM ``megatron/core/transformer/moe/README.md``: under expert parallelism the peak activation memory is "~1
  (varies with EP balancing)" of the same layers' without it: an expert rank receives its share of every rank's
  routed tokens, the balanced mean being as many as it sends.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.estimates._args import require_bool, require_positive, require_positive_int
from rules.estimates.model.shapes import ModelShape

FP32_ROUTER_BYTES = 4  # the router's logits and softmax in fp32 (Megatron-Core --moe-router-dtype fp32)
ROUTING_MAP_BYTES = 1  # the token-to-expert routing map, a bool per token and expert


@dataclass(frozen=True)
class ExpertRouting:
    """How many routed tokens an expert rank holds over the balanced mean (the policy's ``memory.moe``)."""

    capacity_factor: float | None = None  # each expert keeps at most this × its share; None: dropless (Megatron's)
    dropless_load_factor: float = 1.0  # dropless: the busiest expert rank's tokens over the balanced mean

    @property
    def load_factor(self) -> float:
        """Returns the routed tokens an expert rank holds over the balanced mean: the capacity factor where tokens
        beyond it are dropped, else the dropless load factor."""
        factor = self.dropless_load_factor if self.capacity_factor is None else self.capacity_factor
        require_positive("expert load factor", factor)
        return factor


def expert_mlp_activation_bytes(shape: ModelShape, tokens: int, element_bytes: float, tensor_parallel: int = 1,
                                sequence_parallel: bool = False, expert_tensor: int = 1,
                                load_factor: float = 1.0) -> float:
    """Returns the bytes one GPU stores for one mixture-of-experts MLP over ``tokens`` tokens (s × b of a micro-batch).

    A rank routes T = tokens / t of them under sequence parallelism, else all (as a dense layer's replicated region);
    its experts receive k × load_factor × T routed copies (k = ``experts.active``), which the expert-tensor-parallel
    ranks all-gather under sequence parallelism (× expert_tensor) and split the inner dimension of (÷ expert_tensor).
    With e = ``element_bytes``:

    - router: its fp32 logits 4·T·count and its routing map, 1 byte per token and expert;
    - dispatch: the permuted inputs of the first expert matrices, e·k·L·T·g·h (g = expert_tensor with sequence
      parallelism, else 1);
    - experts: SwiGLU's gate, up and activated product, 3·e·k·L·T·g·f_e / expert_tensor (GeLU's two, 2·e·…), as a
      dense MLP's (Korthikanti et al. Table 2's MLP terms);
    - combine: the experts' outputs, which the routing probabilities weight, e·k·L·T·h;
    - shared experts: as a dense MLP of shared_ffn_hidden each, split over the t tensor-parallel ranks.

    Transient buffers of the all-to-all (freed once exchanged) are not stored for the backward pass and not counted.
    """
    experts = shape.experts
    assert experts is not None, "a mixture-of-experts shape"
    require_positive_int("tokens", tokens)
    require_positive("element_bytes", element_bytes)
    require_positive_int("tensor_parallel", tensor_parallel)
    require_positive_int("expert_tensor", expert_tensor)
    require_bool("sequence_parallel", sequence_parallel)
    require_positive("expert load factor", load_factor)
    e, h, k = element_bytes, shape.hidden, experts.active
    mlp_tensors = 3 if shape.mlp == "swiglu" else 2
    routed_tokens = tokens / (tensor_parallel if sequence_parallel else 1)
    gathered = k * load_factor * routed_tokens * (expert_tensor if sequence_parallel else 1)
    router = (FP32_ROUTER_BYTES + ROUTING_MAP_BYTES) * routed_tokens * experts.count
    dispatch = e * gathered * h
    expert_activations = mlp_tensors * e * gathered * experts.ffn_hidden / expert_tensor
    combine = e * k * load_factor * routed_tokens * h
    shared = experts.shared * mlp_tensors * e * tokens * experts.shared_ffn_hidden_size / tensor_parallel
    return router + dispatch + expert_activations + combine + shared

"""The work one GPU does for one mixture-of-experts layer and one micro-batch: the router, the grouped expert GEMMs at
the shape tokens-per-expert gives, the permutation of the routed tokens and the expert-parallel all-to-all.

Counting only; no rates, no hardware (``rules.estimates.training_time.expert_step`` turns these counts into seconds).
Notation as ``rules.estimates.training_time.transformer_work``, plus E routed experts of inner dimension f_e, k of them
active per token, ``shared`` shared experts of f_s, expert-parallel degree ep (expert_tensor 1: each routed expert whole
on one GPU), and L the routed load factor (the policy's ``memory.moe``: the busiest expert rank's tokens over the
balanced mean, ``rules.estimates.memory.expert_activations.ExpertRouting``).

Sources: Megatron-Core ``megatron/core/transformer/moe`` (router.py: a linear h → E router, top-k; token_dispatcher.py
``MoEAlltoAllTokenDispatcher``: permute the routed copies by expert, all-to-all them over the expert-parallel group
(dispatch), run the local experts, all-to-all back (combine) and unpermute, weighting by the routing probabilities;
experts.py ``GroupedMLP``/``TEGroupedMLP``: the local experts' GEMMs as one grouped GEMM, each expert an MLP of
``--moe-ffn-hidden-size``; shared_experts.py: the shared experts as a dense MLP split over the tensor-parallel ranks).
The backward of a dispatch is a combine and vice versa (DeepEP docs/legacy.md: "The backward process of MoE dispatch is
actually a combine"), so a layer runs four all-to-alls per micro-batch, six under full recompute. Megatron-LM
``megatron/training/arguments.py`` needs sequence parallelism for expert parallelism with tensor parallelism, so that
each tensor-parallel rank routes its own s·b/(c·t) tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rules.errors import InconsistentInput
from rules.estimates._args import require_positive, require_positive_int
from rules.estimates.model.shapes import Experts, ModelShape
from rules.estimates.training_time.memory_bound import ACTIVATION_BYTES
from rules.estimates.training_time.transformer_work import (
    LayerSlice,
    layer_gemms,
    layer_matrix_parameters,
)

ROUTER_LOGIT_BYTES = 4  # fp32 router logits and softmax (Megatron-Core --moe-router-dtype fp32)
# Kernels per pass besides the GEMMs: router softmax/top-k, permute, unpermute (Megatron-Core moe_utils.py).
ROUTING_KERNELS_PER_PASS = 3
ALL_TO_ALLS_PER_PASS = 2  # dispatch and combine


def _experts(shape: ModelShape) -> Experts:
    if shape.experts is None:
        raise InconsistentInput("a mixture-of-experts layer needs architecture.experts")
    return shape.experts


def _mlp_matrices(shape: ModelShape) -> int:
    return 3 if shape.mlp == "swiglu" else 2


def expert_layer_matrix_parameters(shape: ModelShape, routed: int) -> float:
    """Returns one mixture-of-experts layer's matrix weights with ``routed`` routed experts: attention (as
    ``layer_matrix_parameters``), the router h·E, the shared experts and ``routed`` experts of the MLP form."""
    experts = _experts(shape)
    h, mlp = shape.hidden, _mlp_matrices(shape)
    attention = layer_matrix_parameters(shape) - mlp * h * shape.ffn_hidden_size
    shared = experts.shared * mlp * h * experts.shared_ffn_hidden_size
    return attention + h * experts.count + shared + routed * mlp * h * experts.ffn_hidden


def moe_matrix_parameters(shape: ModelShape, active: bool) -> float:
    """Returns N of a mixture of experts' matrix multiplies: every routed expert (``active`` False: the weights held,
    reduced and stepped) or the k a token runs through (True: the FLOPs per token, 6·N_active, as Megatron-LM's
    ``num_floating_point_operations`` counts the top-k experts); dense layers, embedding and output layer as
    ``transformer_work.matrix_parameters``."""
    experts = _experts(shape)
    embeddings = shape.vocab * shape.hidden * (1 if shape.tied_embeddings else 2)  # type: ignore[operator]
    routed = experts.active if active else experts.count
    return (experts.dense_layers * layer_matrix_parameters(replace(shape, experts=None))
            + shape.expert_layers * expert_layer_matrix_parameters(shape, routed) + embeddings)


def routed_matrix_parameters(shape: ModelShape) -> float:
    """Returns the routed experts' weights over all expert layers, the part expert parallelism splits."""
    experts = _experts(shape)
    return shape.expert_layers * experts.count * _mlp_matrices(shape) * shape.hidden * experts.ffn_hidden


def routed_tokens(part: LayerSlice) -> float:
    """Returns the tokens one GPU routes per micro-batch: s·b/c, ÷ t under sequence parallelism (each tensor-parallel
    rank routes its own part of the sequence); without it every tensor-parallel rank routes all of them."""
    tokens = part.micro_batch * part.sequence_length / part.context
    return tokens / part.tensor if part.sequence_parallel else tokens


def dispatch_bytes(shape: ModelShape, part: LayerSlice) -> float:
    """Returns one dispatch's (or combine's) buffer on one GPU: its T routed tokens × k copies × h × 2 bytes. Of it
    (ep − 1)/ep leaves the GPU; the all-to-all's size as nccl-tests' alltoall_perf counts it."""
    return routed_tokens(part) * _experts(shape).active * shape.hidden * ACTIVATION_BYTES


@dataclass(frozen=True)
class ExpertGemm:
    """``count`` GEMMs of one shape (m rows, n output columns, k inner): a grouped GEMM runs them as one kernel."""

    m: float
    n: float
    k: float
    count: int = 1


@dataclass(frozen=True)
class ExpertLayerWork:
    """One GPU's work for one mixture-of-experts layer's MLP (router, experts, shared experts) and one micro-batch."""

    gemms: tuple[ExpertGemm, ...]  # forward; backward runs each as (m, k, n) and (n, k, m)
    routed_rows_per_expert: float  # m of each local expert's GEMMs
    local_experts: int
    routing_bytes: float  # router logits, permute and unpermute traffic, forward + backward (+ recompute)
    routing_kernels: int
    all_to_all_bytes: float  # one dispatch's buffer on one GPU
    all_to_alls: int  # dispatch + combine, forward and backward (+ the recomputed forward)


def expert_layer_work(shape: ModelShape, part: LayerSlice, expert: int, load_factor: float,
                      recompute: str) -> ExpertLayerWork:
    """Returns one GPU's MLP work of one mixture-of-experts layer at expert-parallel degree ``expert``.

    T = ``routed_tokens(part)``. Router: (T, E, h). Each of the E/ep local experts receives, from all ep ranks of its
    group, m = ep·T·k·L/E rows (the balanced share ep·T·k/E at the busiest rank's load factor L), and runs the MLP
    form's GEMMs at that shape: up (with the gate for SwiGLU) (m, (mlp − 1)·f_e, h) and down (m, h, f_e); the grouped
    GEMM is their sum. Shared experts: a dense MLP of shared·f_s over the s·b/c gathered rows, split over t (as
    ``layer_gemms``' MLP). Routing traffic per pass: the fp32 logits written and read (2·4·T·E bytes); permute reads T·h
    and writes k·L·T·h, unpermute the reverse (2·(1 + k·L)·T·h elements of 2 bytes).
    """
    experts = _experts(shape)
    require_positive_int("expert", expert)
    require_positive("expert load factor", load_factor)
    if experts.count % expert:
        raise InconsistentInput(f"expert ({expert}) must divide the {experts.count} experts")
    h, f, k, mlp = shape.hidden, experts.ffn_hidden, experts.active, _mlp_matrices(shape)
    tokens = routed_tokens(part)
    local = experts.count // expert
    rows = expert * tokens * k * load_factor / experts.count
    gemms = [ExpertGemm(tokens, experts.count, h),
             ExpertGemm(rows, (mlp - 1) * f, h, local), ExpertGemm(rows, h, f, local)]
    if experts.shared:
        gathered = part.micro_batch * part.sequence_length / part.context
        width = experts.shared * experts.shared_ffn_hidden_size
        t = part.tensor
        gemms += [ExpertGemm(gathered, (mlp - 1) * width / t, h), ExpertGemm(gathered, h, width / t)]
    forwards = 2 if recompute == "full" else 1
    passes = forwards + 1
    per_pass = (2 * ROUTER_LOGIT_BYTES * tokens * experts.count
                + 2 * (1 + k * load_factor) * tokens * h * ACTIVATION_BYTES)
    return ExpertLayerWork(gemms=tuple(gemms), routed_rows_per_expert=rows, local_experts=local,
                           routing_bytes=passes * per_pass, routing_kernels=passes * ROUTING_KERNELS_PER_PASS,
                           all_to_all_bytes=dispatch_bytes(shape, part),
                           all_to_alls=(forwards + 1) * ALL_TO_ALLS_PER_PASS if expert > 1 else 0)


def attention_gemms(shape: ModelShape, part: LayerSlice) -> tuple[ExpertGemm, ...]:
    """Returns a layer's attention GEMMs (QKV and projection, ``layer_gemms``' first two) as ``ExpertGemm``."""
    return tuple(ExpertGemm(m, n, k) for m, n, k in layer_gemms(shape, part)[:2])


def flat_gemms(gemms: tuple[ExpertGemm, ...]) -> tuple[tuple[float, float, float], ...]:
    """Returns ``gemms`` as one (m, n, k) per GEMM (each expert's own), as ``fp8_casts`` reads a layer's GEMMs."""
    return tuple((g.m, g.n, g.k) for g in gemms for _ in range(g.count))


def gemm_flops(gemms: tuple[ExpertGemm, ...]) -> float:
    """Returns the forward FLOPs of ``gemms``: Σ count · 2·m·n·k."""
    return sum(g.count * 2 * g.m * g.n * g.k for g in gemms)


def gemm_bytes(gemms: tuple[ExpertGemm, ...]) -> float:
    """Returns one pass's HBM traffic of ``gemms`` (16-bit): each reads n·k weights and m·k inputs, writes m·n."""
    return sum(g.count * (g.n * g.k + g.m * (g.k + g.n)) for g in gemms) * ACTIVATION_BYTES


def mlp_equivalent_ffn(shape: ModelShape, part: LayerSlice, load_factor: float) -> float:
    """Returns the inner width of a dense MLP whose memory-bound operators run over as many elements on one GPU as a
    mixture-of-experts MLP's: the routed copies' k·L·T·f_e (T routed tokens) plus the shared experts' over the gathered
    rows, expressed per gathered row and tensor-parallel shard (a dense MLP's region is s·b/c × f/t,
    ``transformer_work.layer_regions``)."""
    experts = _experts(shape)
    gathered = part.micro_batch * part.sequence_length / part.context
    routed = experts.active * load_factor * routed_tokens(part) * experts.ffn_hidden
    return part.tensor * routed / gathered + experts.shared * experts.shared_ffn_hidden_size


"""Communication per optimizer step: the collectives each sharding strategy runs, their bus bytes and time.

Volumes follow ZeRO (Rajbhandari et al. 2020, arXiv 1910.02054, §7.2) and PyTorch FSDP; sizes and bus
bandwidths are counted as nccl-tests ``doc/PERFORMANCE.md`` counts them (see
rules/estimates/communication/interconnect.py).
GB/s means 10⁹ bytes per second throughout (``_gbs``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final, NamedTuple

from rules.errors import InconsistentInput
from rules.estimates._args import require_at_most, require_choice, require_positive, require_positive_int
from rules.estimates.communication.interconnect import busbw_factor, collective_time_s
from rules.estimates.memory.model_state import TrainedModel, model_state_bytes_per_param
from rules.estimates.model.layout import Layout

SHARDING_STRATEGIES: tuple[str, ...] = ("ddp", "zero1", "zero2", "zero3", "fsdp-full", "fsdp-hybrid")
SCOPES: tuple[str, ...] = ("node", "cluster")

@dataclass(frozen=True)
class Collective:
    """One collective a GPU takes part in during a step."""

    kind: str  # one of COLLECTIVES
    purpose: str  # what it moves, e.g. "gradients", "parameters (forward)"
    size_bytes: float  # S as nccl-tests counts it: the full buffer of one group
    ranks: int  # ranks in one group
    scope: str  # "node": inside one node (NVLink); "cluster": crosses nodes
    parallel_groups: int = 1  # identical groups running side by side and sharing the node's NICs
    times: int = 1  # how often it runs per optimizer step (once per micro-batch when it cannot be deferred)

    @property
    def bus_bytes_per_gpu(self) -> float:
        """Bytes each GPU moves over its bottleneck link per optimizer step: times × busbw factor × S."""
        return self.times * busbw_factor(self.kind, self.ranks) * self.size_bytes


@dataclass(frozen=True)
class StepCommunication:
    """The collectives of one optimizer step (every micro-batch of it when there is gradient accumulation)."""

    strategy: str
    gradient_bytes: float  # trainable Ψ × bytes per element: the size of one full gradient buffer
    collectives: tuple[Collective, ...]
    bus_bytes_per_gpu: float  # Σ times × busbw factor × S over the collectives
    allreduce_equivalents: float  # bus bytes relative to one all-reduce of the gradients on the same ranks


def communication_bytes_per_step(
    strategy: str,
    parameters: float,
    data_parallel_ranks: int,
    ranks_per_node: int,
    bytes_per_element: float = 2.0,
    accumulation_steps: int = 1,
    trainable_parameters: float | None = None,
) -> StepCommunication:
    """Return the collectives and bus bytes per GPU of one training step for a sharding strategy.

    Per optimizer step, with Ψ = ``parameters`` and S = Ψ × ``bytes_per_element`` (2 for bf16):
    * ``ddp``: all-reduce of the gradients, S (2Ψ bytes in bf16): 2(n−1)/n·S per GPU.
    * ``zero1`` / ``zero2``: reduce-scatter of the gradients + all-gather of the updated parameters,
      the same volume as one all-reduce (ZeRO, Rajbhandari et al. 2020, arXiv 1910.02054, §7.2.1).
    * ``zero3`` / ``fsdp-full``: all-gather of the parameters in the forward and again in the backward,
      plus a reduce-scatter of the gradients: 1.5× the all-reduce volume (ZeRO §7.2.2).
    * ``fsdp-hybrid`` (PyTorch FSDP ``HYBRID_SHARD``): zero3 among the ranks of a node, then an
      all-reduce of each gradient shard (S / ranks per node) across nodes; the ranks_per_node shard
      groups run side by side and share the node's NICs.
    ``parameters`` is what one data-parallel replica holds: with tensor or pipeline parallelism pass
    the parameters of one model-parallel shard and the data-parallel group size, and in
    ``ranks_per_node`` the data-parallel ranks that share a node.

    ``accumulation_steps`` (micro-batches per optimizer step) repeats what cannot wait for the last
    micro-batch: DDP (``no_sync``) and ZeRO-1 accumulate full local gradients and communicate once per
    step; ZeRO-2 keeps only its gradient shard, so it reduce-scatters after every micro-batch (DeepSpeed
    ``stage_1_and_2.py`` reduces in every backward) and all-gathers the updated parameters once; ZeRO-3
    and FSDP (FULL_SHARD, HYBRID_SHARD without ``no_sync``) gather the parameters for every forward and
    backward and reduce-scatter every micro-batch (ZeRO §7.2.2; PyTorch FSDP docs on ``no_sync``).
    ``trainable_parameters`` (default: all) sizes the gradient collectives and the ZeRO-1/2 parameter
    all-gather (only updated parameters change); frozen parameters are still gathered under ZeRO-3/FSDP.
    """
    require_choice("strategy", strategy, SHARDING_STRATEGIES)
    require_positive("parameters", parameters)
    require_positive_int("data_parallel_ranks", data_parallel_ranks)
    require_positive_int("ranks_per_node", ranks_per_node)
    require_positive("bytes_per_element", bytes_per_element)
    require_positive_int("accumulation_steps", accumulation_steps)
    if trainable_parameters is None:
        trainable_parameters = parameters
    require_positive("trainable_parameters", trainable_parameters)
    require_at_most("trainable_parameters", trainable_parameters, "parameters", parameters)
    s = parameters * bytes_per_element
    grads = trainable_parameters * bytes_per_element
    n, k = data_parallel_ranks, accumulation_steps
    flat_scope = "node" if n <= ranks_per_node else "cluster"
    if strategy == "ddp":
        collectives: tuple[Collective, ...] = (Collective("all-reduce", "gradients", grads, n, flat_scope),)
    elif strategy in ("zero1", "zero2"):
        collectives = (
            Collective("reduce-scatter", "gradients", grads, n, flat_scope, times=k if strategy == "zero2" else 1),
            Collective("all-gather", "updated parameters", grads, n, flat_scope),
        )
    elif strategy in ("zero3", "fsdp-full") or n <= ranks_per_node:
        collectives = (
            Collective("all-gather", "parameters (forward)", s, n, flat_scope, times=k),
            Collective("all-gather", "parameters (backward)", s, n, flat_scope, times=k),
            Collective("reduce-scatter", "gradients", grads, n, flat_scope, times=k),
        )
    else:  # fsdp-hybrid across nodes
        if n % ranks_per_node:
            raise InconsistentInput(
                f"fsdp-hybrid needs whole nodes: data_parallel_ranks {n} is not a multiple of "
                f"ranks_per_node {ranks_per_node}"
            )
        g, nodes = ranks_per_node, n // ranks_per_node
        collectives = (
            Collective("all-gather", "parameters (forward)", s, g, "node", times=k),
            Collective("all-gather", "parameters (backward)", s, g, "node", times=k),
            Collective("reduce-scatter", "gradients", grads, g, "node", times=k),
            Collective("all-reduce", "gradient shard across nodes", grads / g, nodes, "cluster", g, times=k),
        )
    bus_bytes = sum(c.bus_bytes_per_gpu for c in collectives)
    reference = busbw_factor("all-reduce", n) * grads
    equivalents = bus_bytes / reference if reference > 0 else 0.0
    return StepCommunication(strategy, grads, collectives, bus_bytes, equivalents)


def communication_time_s(step: StepCommunication, node_busbw_gbs: float, cluster_busbw_gbs: float) -> float:
    """Return the bandwidth-bound communication time in seconds of one step's collectives.

    ``node_busbw_gbs`` applies to collectives inside a node, ``cluster_busbw_gbs`` (typically
    :func:`hierarchical_busbw_gbs`) to those that cross nodes. Groups that run side by side across
    nodes (``parallel_groups``) share the node's cross-node bandwidth, so each gets busbw / groups.
    Source: nccl-tests ``doc/PERFORMANCE.md`` time formulas, applied per collective and summed
    (no overlap between collectives).
    """
    require_positive("node_busbw_gbs", node_busbw_gbs)
    require_positive("cluster_busbw_gbs", cluster_busbw_gbs)
    total = 0.0
    for c in step.collectives:
        busbw = node_busbw_gbs if c.scope == "node" else cluster_busbw_gbs / c.parallel_groups
        total += c.times * collective_time_s(c.kind, c.size_bytes, c.ranks, busbw)
    return total



def step_communication(model: TrainedModel, layout: Layout, accumulation_steps: int, convention: str,
                       sharding: str | None = None, routed_parameters: float = 0.0) -> StepCommunication:
    """Returns the collectives of one optimizer step of ``model`` on ``layout`` (or under another sharding).

    :func:`communication_bytes_per_step` in the weights' precision (2 bytes for bf16/fp16 training, as the
    model-state convention counts them); with tensor or pipeline parallelism each data-parallel group
    communicates one model-parallel shard, parameters / (t × p), over the data × context ranks that hold it
    (context-parallel ranks reduce their gradients together, Megatron-LM
    ``get_data_parallel_group(with_context_parallel=True)``). Tensor-, pipeline- and context-parallel traffic
    (activations, the K/V ring) is not counted. InconsistentInput for a layout the estimator refuses
    (fsdp-hybrid over part of a node).

    A mixture of experts' ``routed_parameters`` (rules/estimates/model/parameters.py ``routed_expert_parameters``)
    are reduced apart: their shard, routed / (expert × expert_tensor × p), over the expert-data-parallel ranks
    (Megatron-Core's expert data-parallel group; rules/estimates/memory/expert_state.py), the rest as above. Their
    collectives are listed after the others' with "(experts)" in their purpose. The expert-parallel all-to-all of
    the routed tokens is not counted.
    """
    state = model_state_bytes_per_param(model.precision, model.optimizer, convention)
    strategy = sharding or layout.sharding
    if not routed_parameters:
        return communication_bytes_per_step(
            strategy, model.parameters / layout.model_parallel, layout.shard_ranks, layout.dp_ranks_per_node,
            bytes_per_element=state.weights_bytes_per_param, accumulation_steps=accumulation_steps,
            trainable_parameters=model.trainable_parameters / layout.model_parallel)
    trainable_share = model.trainable_parameters / model.parameters
    others = (model.parameters - routed_parameters) / layout.model_parallel
    shard = routed_parameters / (layout.expert_shards * layout.pipeline)
    ranks = layout.expert_data_parallel
    steps = [communication_bytes_per_step(strategy, parameters, group, per_node,
                                          bytes_per_element=state.weights_bytes_per_param,
                                          accumulation_steps=accumulation_steps,
                                          trainable_parameters=parameters * trainable_share)
             for parameters, group, per_node in (
                 (others, layout.shard_ranks, layout.dp_ranks_per_node),
                 (shard, ranks, max(1, min(ranks, layout.gpus_per_node // layout.expert_shards))))]
    dense, experts = steps
    bus_bytes = dense.bus_bytes_per_gpu + experts.bus_bytes_per_gpu
    reference = sum(busbw_factor("all-reduce", group) * step.gradient_bytes
                    for step, group in zip(steps, (layout.shard_ranks, ranks), strict=True))
    return StepCommunication(strategy, dense.gradient_bytes + experts.gradient_bytes, dense.collectives + tuple(
        replace(c, purpose=c.purpose + EXPERTS) for c in experts.collectives), bus_bytes,
        bus_bytes / reference if reference > 0 else 0.0)


# Data-parallel collectives that run under a forward pass; the others run under a backward pass.
FORWARD_PURPOSES: Final = frozenset({"parameters (forward)", "updated parameters"})
# What a mixture of experts' routed-expert collectives add to their purpose (:func:`step_communication`).
EXPERTS: Final = " (experts)"


class PassTimes(NamedTuple):
    """A step's collectives by the pass they can hide behind: seconds under forward passes and under backward passes,
    and how many micro-batches' passes each may use (1 when they run once per step, m when in every micro-batch)."""

    forward_s: float
    forward_windows: int
    backward_s: float
    backward_windows: int


def communication_time_by_pass(step: StepCommunication, node_busbw_gbs: float, cluster_busbw_gbs: float) -> PassTimes:
    """Return :func:`communication_time_s`'s seconds split by pass: the parameter gathers of the forward (and ZeRO's
    gather of the updated parameters, before the next forward) against the gradient reductions and the backward's
    gathers."""
    seconds, windows = {True: 0.0, False: 0.0}, {True: 0, False: 0}
    for c in step.collectives:
        busbw = node_busbw_gbs if c.scope == "node" else cluster_busbw_gbs / c.parallel_groups
        forward = c.purpose.removesuffix(EXPERTS) in FORWARD_PURPOSES
        seconds[forward] += c.times * collective_time_s(c.kind, c.size_bytes, c.ranks, busbw)
        windows[forward] = max(windows[forward], c.times)
    return PassTimes(seconds[True], windows[True], seconds[False], windows[False])


def group_busbw_gbs(ranks: int, stride: int, domain_gpus: int, domain_busbw_gbs: float,
                    nic_busbw_gbs: float) -> float:
    """Return the busbw of a collective over ``ranks`` ranks spaced ``stride`` apart in rank order.

    Megatron-LM orders ranks tensor, context, data, pipeline (fastest first). A group inside one NVLink
    domain runs at the domain's busbw; one that spans domains is bounded by the NICs its members have in
    each domain (one NIC per GPU on rail-optimised nodes, one NCCL channel per NIC), never above the
    domain's busbw: the two-tier bound of ``rules.estimates.communication.interconnect.hierarchical_busbw_gbs``.
    """
    if ranks * stride <= domain_gpus:
        return domain_busbw_gbs
    members_per_domain = max(1, domain_gpus // stride)
    return min(domain_busbw_gbs, nic_busbw_gbs * members_per_domain)


def collective_s(kind: str, size_bytes: float, ranks: int, busbw_gbs: float, half_bytes: float) -> float:
    """Return factor(n)·(S + S½)/busbw: a collective's time with the latency folded into S½.

    nccl-tests ``doc/PERFORMANCE.md`` gives t = factor(n)·S/busbw for large messages; all_reduce_perf
    sweeps (stas00/ml-engineering ``network/README.md``: 8 × A100 and 8 × H200) reach half their
    large-message busbw near S½ ≈ 25 MiB, i.e. busbw(S) = busbw∞·S/(S + S½).
    """
    if ranks == 1 or size_bytes == 0:
        return 0.0
    return busbw_factor(kind, ranks) * (size_bytes + half_bytes) / (busbw_gbs * 1e9)

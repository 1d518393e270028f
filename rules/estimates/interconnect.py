"""Collective-communication time, per-step volume by sharding strategy, and scaling efficiency.

Bandwidths follow nccl-tests ``doc/PERFORMANCE.md``: ``algbw = S / t`` and ``busbw = algbw × factor``,
with factor 2(n−1)/n for all-reduce and (n−1)/n for all-gather, reduce-scatter and all-to-all, so that
busbw is comparable with the bottleneck link's speed whatever the rank count. The time of a collective
of S bytes over n ranks at a given bus bandwidth is therefore ``factor × S / busbw``. S is always the
full buffer as nccl-tests counts it (for all-gather and reduce-scatter the gathered / reduced array,
``count per rank × n × element size``).

GB/s means 10⁹ bytes per second throughout (``_gbs``); link rates in Gb/s carry ``_gbps``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from rules.errors import InconsistentInput
from rules.estimates._args import (
    require_at_most,
    require_choice,
    require_fraction,
    require_non_negative,
    require_positive,
    require_positive_int,
    require_unit_interval,
)

COLLECTIVES: tuple[str, ...] = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "broadcast",
    "reduce",
    "all-to-all",
)
SHARDING_STRATEGIES: tuple[str, ...] = ("ddp", "zero1", "zero2", "zero3", "fsdp-full", "fsdp-hybrid")
SCOPES: tuple[str, ...] = ("node", "cluster")


# --------------------------------------------------------------------------------------------------
# nccl-tests bandwidth definitions
# --------------------------------------------------------------------------------------------------


def gbps_to_gbs(gbps: float) -> float:
    """Return a link rate in Gb/s converted to GB/s (÷ 8), e.g. NDR 400 Gb/s → 50 GB/s nameplate.

    Source: SI definitions (1 byte = 8 bits). NCCL maintainers report 46–48 GB/s achieved per NDR NIC
    (nccl-tests issue #290), so prefer a measured figure where one exists.
    """
    require_positive("gbps", gbps)
    return gbps / 8.0


def nvlink_busbw_gbs(nvlink_gbs: float, busbw_fraction: float) -> float:
    """Return the intra-node busbw (GB/s) NVLink reaches: the per-direction rate (nameplate / 2) × fraction.

    NVIDIA quotes NVLink as the total of both directions (H100 SXM "900 GB/s" = 18 links × 25 GB/s × 2
    directions; A100 "600 GB/s" = 12 × 25 × 2), while nccl-tests busbw is compared with one direction of
    the bottleneck link (nccl-tests ``doc/PERFORMANCE.md``). NCCL maintainers quote, in nccl-tests issues
    (e.g. #212), about 370 GB/s all-reduce busbw on 8 × H100 (450 GB/s per direction: 0.82) and about
    230 GB/s on 8 × A100 (300 GB/s per direction: 0.77); so a fraction near 0.8 of the per-direction rate
    reproduces them (NVLS on NVSwitch systems can reach about 480 GB/s on H100).
    """
    require_positive("nvlink_gbs", nvlink_gbs)
    require_fraction("busbw_fraction", busbw_fraction)
    return nvlink_gbs / 2.0 * busbw_fraction


# Per-direction bandwidth of a x16 link after line encoding, GB/s: PCI-SIG base specifications
# (Gen3 8 GT/s and Gen4 16 GT/s and Gen5 32 GT/s with 128b/130b; Gen6 64 GT/s PAM4 with 242/256 FLIT).
_PCIE_X16_GBS: dict[int, float] = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}


def pcie_x16_gbs(generation: int) -> float:
    """Return the per-direction bandwidth in GB/s of a PCIe x16 link of the given generation (3 to 6).

    Source: PCI-SIG PCI Express Base Specifications 3.0 to 6.0: 8, 16, 32, 64 GT/s per lane, 128b/130b
    encoding (Gen3 to Gen5) and 242/256 FLIT efficiency (Gen6): Gen4 x16 = 16 × 16 × 128/130 / 8 =
    31.5 GB/s. GPUs without NVLink (L40S, L4) exchange data over this link, usually through the host's
    PCIe switches and, across sockets, the CPU interconnect, so their achieved busbw is a fraction of it.
    """
    require_choice("PCIe generation", generation, _PCIE_X16_GBS)
    return _PCIE_X16_GBS[generation]


def algbw_gbs(size_bytes: float, time_s: float) -> float:
    """Return the algorithm bandwidth in GB/s: S / t.

    Source: nccl-tests ``doc/PERFORMANCE.md``, "Algorithm bandwidth".
    """
    require_positive("size_bytes", size_bytes)
    require_positive("time_s", time_s)
    return size_bytes / time_s / 1e9


def busbw_factor(collective: str, ranks: int) -> float:
    """Return the nccl-tests bus-bandwidth correction factor for a collective over ``ranks`` ranks.

    Source: nccl-tests ``doc/PERFORMANCE.md``, "Summary": all-reduce 2(n−1)/n; reduce-scatter,
    all-gather and all-to-all (n−1)/n; broadcast and reduce 1.
    """
    require_choice("collective", collective, COLLECTIVES)
    require_positive_int("ranks", ranks)
    n = ranks
    if collective == "all-reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n
    return 1.0


def busbw_from_algbw_gbs(algbw: float, collective: str, ranks: int) -> float:
    """Return the bus bandwidth in GB/s: algbw × the collective's factor.

    Source: nccl-tests ``doc/PERFORMANCE.md`` (e.g. all-reduce on 8 ranks: busbw = 1.75 × algbw).
    """
    require_positive("algbw", algbw)
    return algbw * busbw_factor(collective, ranks)


def collective_time_s(collective: str, size_bytes: float, ranks: int, busbw_gbs: float) -> float:
    """Return the bandwidth-bound time in seconds of one collective: factor(n) × S / busbw.

    Source: nccl-tests ``doc/PERFORMANCE.md`` (the ideal time of each collective on links of
    bandwidth B, reordered). Latency is ignored, so this is a lower bound that is tight for large
    (≥ ~100 MB) buffers. One rank communicates nothing: 0 s.
    """
    require_non_negative("size_bytes", size_bytes)
    require_positive("busbw_gbs", busbw_gbs)
    factor = busbw_factor(collective, ranks)
    if ranks == 1:
        return 0.0
    return factor * size_bytes / (busbw_gbs * 1e9)


def allreduce_time_s(size_bytes: float, ranks: int, busbw_gbs: float) -> float:
    """Return the ring all-reduce time in seconds: 2(n−1)/n · S / busbw.

    Source: nccl-tests ``doc/PERFORMANCE.md``, AllReduce: t = (S/B)·(2(n−1)/n).
    """
    return collective_time_s("all-reduce", size_bytes, ranks, busbw_gbs)


def allgather_time_s(size_bytes: float, ranks: int, busbw_gbs: float) -> float:
    """Return the all-gather time in seconds: (n−1)/n · S / busbw, S the gathered (total) size.

    Source: nccl-tests ``doc/PERFORMANCE.md``, AllGather: t = S·(n−1)/(B·n).
    """
    return collective_time_s("all-gather", size_bytes, ranks, busbw_gbs)


def reduce_scatter_time_s(size_bytes: float, ranks: int, busbw_gbs: float) -> float:
    """Return the reduce-scatter time in seconds: (n−1)/n · S / busbw, S the full (pre-scatter) size.

    Source: nccl-tests ``doc/PERFORMANCE.md``, ReduceScatter: t = S·(n−1)/(B·n).
    """
    return collective_time_s("reduce-scatter", size_bytes, ranks, busbw_gbs)


# --------------------------------------------------------------------------------------------------
# Effective bus bandwidth of a job that spans nodes
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HierarchicalBandwidth:
    """The bus bandwidth a collective over the whole job can reach, and which tier bounds it."""

    busbw_gbs: float  # min of the two tiers below (the node tier alone on one node)
    node_busbw_gbs: float  # intra-node (NVLink / NVSwitch) busbw, measured or assumed
    network_busbw_gbs: float | None  # NICs per node × NIC GB/s / oversubscription; None on one node
    bound_by: str  # "node" or "network"


def hierarchical_busbw_gbs(
    node_busbw_gbs: float,
    nic_gbs: float,
    nics_per_node: float,
    nodes: int,
    oversubscription: float = 1.0,
) -> HierarchicalBandwidth:
    """Return the effective busbw of a collective spanning ``nodes`` nodes: min(NVLink tier, network tier).

    Model: NCCL runs one ring (or tree) channel per NIC, so a collective across nodes crosses each
    node boundary on every NIC in parallel and its busbw is bounded by the node's total NIC bandwidth
    (NICs per node × GB/s per NIC), divided by the fabric's oversubscription ratio (1 for a
    non-blocking fat tree); it can never exceed the intra-node busbw. On one node it is the intra-node
    busbw. Per GPU that is "per-GPU NIC bandwidth × NICs per GPU" for each GPU's own cross-node
    sub-ring, and the GPUs of a node run those sub-rings side by side, so the flat collective's busbw
    is that times GPUs per node.
    Sources: nccl-tests ``doc/PERFORMANCE.md`` ("the bus bandwidth should reflect the speed of the
    hardware bottleneck: NVLink, PCI, QPI, or network"); NCCL maintainers' figures: an 8-GPU node with
    one HDR 200 Gb/s NIC reaches ~24 GB/s inter-node busbw and "more NICs … up to 160 GB/s which is
    the NVLink intra-node bandwidth" (NVIDIA/nccl issue #412); a DGX-1 with 4 EDR NICs 48 GB/s vs one
    NIC 12 GB/s (nccl-tests issue #29); NDR 400 Gb/s ≈ 46–48 GB/s per NIC (nccl-tests issue #290).
    Oversubscription as a plain divisor is a worst-case reading (all traffic crosses the spine).
    """
    require_positive("node_busbw_gbs", node_busbw_gbs)
    require_positive_int("nodes", nodes)
    if nodes == 1:
        return HierarchicalBandwidth(node_busbw_gbs, node_busbw_gbs, None, "node")
    require_positive("nic_gbs", nic_gbs)
    require_positive("nics_per_node", nics_per_node)
    require_positive("oversubscription", oversubscription)
    if oversubscription < 1:
        raise InconsistentInput(f"oversubscription is a ratio >= 1 (e.g. 2 for 2:1), got {oversubscription!r}")
    network = nic_gbs * nics_per_node / oversubscription
    if network < node_busbw_gbs:
        return HierarchicalBandwidth(network, node_busbw_gbs, network, "network")
    return HierarchicalBandwidth(node_busbw_gbs, node_busbw_gbs, network, "node")


def group_nic_share(group_ranks_per_node: int, gpus_per_node: int) -> float:
    """Return the share of a node's cross-node bandwidth one data-parallel group gets: its ranks / GPUs per node.

    With tensor (or pipeline) parallelism inside a node, each of the node's gpus_per_node / r model-parallel
    ranks belongs to its own data-parallel group, and those groups run their gradient collectives at the
    same time (Megatron-LM orders ranks tensor-first, so a node holds whole tensor groups); NCCL drives
    each GPU's traffic through its nearest NIC (rail-optimised DGX/HGX nodes pair one NIC with each
    GPU), so a group with r ranks on the node uses r of its NICs. Source: NCCL's ring/tree channel per
    NIC (NVIDIA/nccl issue #412 discussion, as in :func:`hierarchical_busbw_gbs`); Narayanan et al. 2021
    (arXiv 2104.04473) §3.3 on data-parallel communication crossing nodes when tensor parallelism fills them.
    """
    require_positive_int("group_ranks_per_node", group_ranks_per_node)
    require_positive_int("gpus_per_node", gpus_per_node)
    require_at_most("group_ranks_per_node", group_ranks_per_node, "gpus_per_node", gpus_per_node)
    return group_ranks_per_node / gpus_per_node


# --------------------------------------------------------------------------------------------------
# Communication per optimizer step by sharding strategy
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# Scaling efficiency
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepScaling:
    """A modelled step: compute, communication and how much of it stays exposed."""

    efficiency: float  # compute / (compute + exposed communication), in (0, 1]
    compute_s: float
    communication_s: float
    exposed_communication_s: float  # max(0, communication − overlap × compute)
    step_s: float  # compute + exposed communication


def scaling_efficiency(compute_s: float, comm_s: float, overlap_fraction: float) -> StepScaling:
    """Return the modelled scaling efficiency: compute / (compute + exposed communication).

    Model (first order, stated here because papers vary): a step is its compute time plus whatever
    communication cannot hide behind compute. ``overlap_fraction`` in [0, 1] is the share of compute
    time during which communication can run concurrently (0: none, as with a blocking all-reduce after
    backward; PyTorch DDP buckets and FSDP prefetch overlap most of backward). Exposed communication =
    max(0, comm − overlap × compute). Efficiency is relative to the same per-GPU compute with no
    communication, i.e. the weak-scaling efficiency at fixed per-GPU batch. Sources: the overlap of
    gradient buckets with backward is described in Li et al. 2020, "PyTorch Distributed" (VLDB,
    arXiv 2006.15704) §3.2; the nccl-tests time formulas give comm_s.
    """
    require_positive("compute_s", compute_s)
    require_non_negative("comm_s", comm_s)
    require_unit_interval("overlap_fraction", overlap_fraction)
    exposed = max(0.0, comm_s - overlap_fraction * compute_s)
    step = compute_s + exposed
    return StepScaling(compute_s / step, compute_s, comm_s, exposed, step)


@dataclass(frozen=True)
class ScalingPoint:
    """One scaling measurement and its efficiency against the smallest measured GPU count."""

    gpus: int
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    efficiency: float  # (tokens/s per GPU here) / (tokens/s per GPU at the base)
    base_gpus: int


def measured_scaling_efficiency(points: Iterable[tuple[int, float]]) -> list[ScalingPoint]:
    """Return each (gpus, tokens/s) measurement with its efficiency against the smallest GPU count.

    Efficiency = (tps_n / n) / (tps_base / base), base the smallest measured GPU count (efficiency 1
    there). Source: the acceptance plan's "Size interconnect from scaling efficiency"
    ("run scaling tests at two or more device counts and record
    efficiency"); the definition is the usual weak-scaling efficiency (e.g. Narayanan et al. 2021,
    arXiv 2104.04473, §5.1 reports per-GPU throughput across scales). Results are sorted by GPU
    count; a GPU count measured twice raises ValueError (average the runs first).
    """
    measured = sorted(points, key=lambda p: p[0])
    if not measured:
        raise InconsistentInput("at least one (gpus, tokens_per_s) measurement is needed")
    seen: set[int] = set()
    for gpus, tps in measured:
        require_positive_int("gpus", gpus)
        require_positive("tokens_per_s", tps)
        if gpus in seen:
            raise InconsistentInput(f"two measurements at {gpus} GPUs; give one (e.g. their mean)")
        seen.add(gpus)
    base_gpus, base_tps = measured[0]
    base_per_gpu = base_tps / base_gpus
    return [
        ScalingPoint(gpus, tps, tps / gpus, (tps / gpus) / base_per_gpu, base_gpus) for gpus, tps in measured
    ]


# --------------------------------------------------------------------------------------------------
# nccl-tests output
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NcclTestsRow:
    """One size of an nccl-tests run (``all_reduce_perf`` and the other ``*_perf`` binaries)."""

    size_bytes: int
    count: int
    dtype: str
    redop: str | None  # None when the binary prints no reduction column
    root: int | None  # None when the binary prints no root column
    out_of_place_time_us: float
    out_of_place_algbw_gbs: float
    out_of_place_busbw_gbs: float
    out_of_place_wrong: int | None  # None for "N/A" (validation off) or an old float "error" column
    in_place_time_us: float
    in_place_algbw_gbs: float
    in_place_busbw_gbs: float
    in_place_wrong: int | None

    @property
    def busbw_gbs(self) -> float:
        """The better of the out-of-place and in-place bus bandwidths."""
        return max(self.out_of_place_busbw_gbs, self.in_place_busbw_gbs)


# mpirun --tag-output / srun --label prefixes: "[1,0]<stdout>:" or "0: ".
_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:\s)")
_AVG_BUSBW = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")


def _wrong(token: str) -> int | None:
    try:
        return int(token)
    except ValueError:
        return None


def _parse_row(tokens: list[str]) -> NcclTestsRow | None:
    # size count type [redop] [root] then two blocks of time algbw busbw #wrong.
    if len(tokens) < 11 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    middle = tokens[3:-8]
    if len(middle) > 2:
        return None
    redop = root = None
    for token in middle:
        if re.fullmatch(r"-?\d+", token):
            root = int(token)
        else:
            redop = token
    try:
        values = [float(t) for t in (tokens[-8], tokens[-7], tokens[-6], tokens[-4], tokens[-3], tokens[-2])]
    except ValueError:
        return None
    if not all(math.isfinite(v) for v in values):
        return None
    return NcclTestsRow(
        size_bytes=int(tokens[0]),
        count=int(tokens[1]),
        dtype=tokens[2],
        redop=redop,
        root=root,
        out_of_place_time_us=values[0],
        out_of_place_algbw_gbs=values[1],
        out_of_place_busbw_gbs=values[2],
        out_of_place_wrong=_wrong(tokens[-5]),
        in_place_time_us=values[3],
        in_place_algbw_gbs=values[4],
        in_place_busbw_gbs=values[5],
        in_place_wrong=_wrong(tokens[-1]),
    )


def parse_nccl_tests_output(raw: str) -> list[NcclTestsRow]:
    """Return the result rows (size, busbw, …) of nccl-tests text output such as ``all_reduce_perf``.

    Format (nccl-tests README and ``src/common.cu``): lines starting with ``#`` are comments (header,
    device list, "# Out of bounds values", "# Avg bus bandwidth"); each result line has size (B),
    count (elements), type, redop, root, then time (us), algbw (GB/s), busbw (GB/s), #wrong for the
    out-of-place and again for the in-place run. Older releases print no root column and a float
    ``error`` instead of ``#wrong``; both are accepted. ``mpirun --tag-output`` prefixes are stripped;
    other lines (NCCL banners, warnings) are skipped. Raises ValueError when no result row is found.
    """
    rows: list[NcclTestsRow] = []
    for line in raw.splitlines():
        line = _PREFIX.sub("", line, count=1).strip()
        if not line or line.startswith("#"):
            continue
        row = _parse_row(line.split())
        if row is not None:
            rows.append(row)
    if not rows:
        raise InconsistentInput("no nccl-tests result rows found (expected lines: size count type ... busbw #wrong)")
    return rows


def parse_nccl_tests_avg_busbw_gbs(raw: str) -> float | None:
    """Return the "# Avg bus bandwidth" figure (GB/s) of nccl-tests output, or None if absent.

    Source: nccl-tests ``src/common.cu`` prints it after the table; it averages busbw over every size
    in the sweep, small sizes included, so it understates the large-message bandwidth a training step
    sees: prefer :func:`peak_busbw_gbs` or the busbw at the step's message size.
    """
    found = None
    for line in raw.splitlines():
        match = _AVG_BUSBW.search(_PREFIX.sub("", line, count=1))
        if match:
            found = float(match.group(1))
    return found


def peak_busbw_gbs(rows: Iterable[NcclTestsRow], min_size_bytes: int = 0) -> float:
    """Return the highest busbw (GB/s) among rows of at least ``min_size_bytes``.

    Source: nccl-tests ``doc/PERFORMANCE.md``: on large sizes time is linear in size, so the large-size
    busbw is the bandwidth figure to compare with hardware.
    """
    candidates = [r.busbw_gbs for r in rows if r.size_bytes >= min_size_bytes]
    if not candidates:
        raise InconsistentInput(f"no nccl-tests row of at least {min_size_bytes} bytes")
    return max(candidates)

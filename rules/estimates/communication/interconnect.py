"""Link bandwidths, collective time, and the bus bandwidth a job's collectives reach inside a node and across nodes.

Bandwidths follow nccl-tests ``doc/PERFORMANCE.md``: ``algbw = S / t`` and ``busbw = algbw × factor``,
with factor 2(n−1)/n for all-reduce and (n−1)/n for all-gather, reduce-scatter and all-to-all, so that
busbw is comparable with the bottleneck link's speed whatever the rank count. The time of a collective
of S bytes over n ranks at a given bus bandwidth is therefore ``factor × S / busbw``. S is always the
full buffer as nccl-tests counts it (for all-gather and reduce-scatter the gathered / reduced array,
``count per rank × n × element size``).

GB/s means 10⁹ bytes per second throughout (``_gbs``); link rates in Gb/s carry ``_gbps``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.errors import InconsistentInput
from rules.estimates._args import (
    require_at_most,
    require_choice,
    require_fraction,
    require_non_negative,
    require_positive,
    require_positive_int,
)
from rules.estimates.communication.nccl_tests import NOT_MEASURED, MeasuredBusbw

COLLECTIVES: tuple[str, ...] = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "broadcast",
    "reduce",
    "all-to-all",
)

# The bound of a job's cluster busbw when a multi-node nccl-tests run gave it (Bandwidth.bound_by).
MEASURED_BOUND = "measured"


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
# The bandwidths of one job, measured or from nameplates
# --------------------------------------------------------------------------------------------------
# PCIe generation assumed for a GPU whose generation is not known: Gen4, the older of the two current ones.
DEFAULT_PCIE_GENERATION = 4


@dataclass(frozen=True)
class IntraNodeLink:
    """How the GPUs of a node reach each other: NVLink, or PCIe x16 when ``nvlink_gbs`` is 0."""

    nvlink_gbs: float  # NVIDIA's bidirectional figure (H100 SXM 900); 0 for PCIe-only GPUs
    pcie_generation: int = DEFAULT_PCIE_GENERATION
    pcie_generation_from: str = ""  # where the generation came from, in words


@dataclass(frozen=True)
class ComputeNetwork:
    """A node's compute NICs and the fabric they plug into."""

    nics: float  # compute NIC ports per node
    gbps: float  # their summed line rate, Gb/s
    fabric_link_gbps: float | None  # the fabric's link rate, when quoted
    oversubscription: float  # the fabric's oversubscription ratio as quoted (1 for non-blocking)


@dataclass(frozen=True)
class BusbwFractions:
    """The shares of nameplate bandwidth collectives achieve (policy interconnect.*_busbw_fraction)."""

    nvlink: float
    pcie: float
    nic: float


@dataclass(frozen=True)
class Bandwidth:
    """The bus bandwidths the job's collectives reach inside a node and across the job, and their origin."""

    node_busbw_gbs: float
    cluster_busbw_gbs: float  # equals node_busbw_gbs on one node
    network_busbw_gbs: float | None  # compute NICs per node × achieved GB/s per NIC ÷ oversubscription
    bound_by: str  # "node", "network", or MEASURED_BOUND (nccl-tests across nodes)
    intra_node_link: str
    source: str  # what the figures rest on, in words
    nodes: int
    measured: MeasuredBusbw = NOT_MEASURED  # the nccl-tests runs the figures rest on, where they do
    estimate: Bandwidth | None = None  # the same job's bandwidths from nameplates, where a measurement replaced them


def job_bandwidth(nodes: int, dp_ranks_per_node: int, gpus_per_node: int, measured: MeasuredBusbw,
                  link: IntraNodeLink | None, network: ComputeNetwork | None, fractions: BusbwFractions) -> Bandwidth:
    """Returns the job's intra-node and cluster busbw: nccl-tests where measured, else nameplate × fractions.

    Inside a node: the single-node nccl-tests busbw, else NVLink per direction × ``fractions.nvlink``
    (:func:`nvlink_busbw_gbs`), else PCIe x16 × ``fractions.pcie`` (:func:`pcie_x16_gbs`). Across nodes:
    the multi-node nccl-tests busbw, else :func:`hierarchical_busbw_gbs` over the compute NICs, each at the
    lower of its own and the fabric's link rate × ``fractions.nic``, the oversubscription at least 1:1. The
    data-parallel groups side by side on a node share its NICs (:func:`group_nic_share`). ``link`` is needed
    without a single-node measurement and ``network`` without a multi-node one on more than one node.
    """
    notes = list(measured.notes)
    if measured.node_busbw_gbs is not None:
        node, described = measured.node_busbw_gbs, "measured on one node (nccl-tests)"
        sources = [f"intra-node busbw measured by nccl-tests{_read_at(measured)}"]
    elif link is None:
        raise ValueError("the intra-node link is needed without a single-node nccl-tests measurement")
    elif link.nvlink_gbs > 0:
        node = nvlink_busbw_gbs(link.nvlink_gbs, fractions.nvlink)
        described = f"NVLink {link.nvlink_gbs:g} GB/s"
        sources = ["NVLink per direction × interconnect.nvlink_busbw_fraction"]
    else:
        node = pcie_x16_gbs(link.pcie_generation) * fractions.pcie
        described = f"PCIe Gen{link.pcie_generation} x16, no NVLink ({link.pcie_generation_from})"
        sources = ["PCIe x16 per direction × interconnect.pcie_busbw_fraction"]
    if nodes == 1:
        return Bandwidth(node, node, None, "node", described, "; ".join(sources + notes), 1, measured)
    share = group_nic_share(dp_ranks_per_node, gpus_per_node)
    shared = "" if share == 1 else f", {share:.3g} of it per data-parallel group (tensor parallelism fills the node)"
    if measured.cluster_busbw_gbs is not None:
        busbw = measured.cluster_busbw_gbs
        busbw = min(node, busbw * share) if share < 1 else busbw
        sources.append(f"cross-node busbw measured by nccl-tests on {measured.cluster_nodes} nodes (the job spans "
                       f"{nodes}){_read_at(measured)}{shared}")
        return Bandwidth(node, busbw, busbw, MEASURED_BOUND, described, "; ".join(sources + notes), nodes, measured)
    if network is None:
        raise ValueError("the compute network is needed without a multi-node nccl-tests measurement")
    per_nic_gbps = network.gbps / network.nics
    if network.fabric_link_gbps and network.fabric_link_gbps < per_nic_gbps:
        per_nic_gbps = network.fabric_link_gbps  # a NIC cannot run faster than the fabric link it plugs into
    nic_gbs = gbps_to_gbs(per_nic_gbps) * fractions.nic
    oversubscription = max(1.0, network.oversubscription)
    tiers = hierarchical_busbw_gbs(node, nic_gbs, network.nics * share, nodes, oversubscription)
    sources.append(f"{network.nics:g} compute NICs per node at {per_nic_gbps:g} Gb/s × "
                   f"interconnect.nic_busbw_fraction, fabric oversubscription {oversubscription:g}:1{shared}")
    return Bandwidth(node, tiers.busbw_gbs, tiers.network_busbw_gbs, tiers.bound_by, described,
                     "; ".join(sources + notes), nodes, measured)


def _read_at(measured: MeasuredBusbw) -> str:
    """Returns, in words, the message size the measured busbw was read at ("" for each run's peak)."""
    if measured.message is None:
        return ""
    return f" at {measured.message.size_bytes / 1e6:,.0f} MB per gradient collective ({measured.message.set_by})"


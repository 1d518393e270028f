"""Node topology: network bandwidth per GPU and the PCIe path between a GPU and its NIC.

Path names follow the legend of ``nvidia-smi topo -m`` (NVIDIA driver), from nearest to farthest:
PIX (at most one PCIe bridge/switch), PXB (several PCIe bridges, not through the host bridge), PHB
(through a PCIe host bridge, typically the CPU), NODE (between PCIe host bridges within one NUMA node),
SYS (across the SMP interconnect between NUMA nodes, e.g. UPI/Infinity Fabric). NCCL uses the same
names for its path types (src/graph/topo.h) and enables GPUDirect RDMA between a GPU and a NIC only when
their path is PXB or nearer by default (src/graph/paths.cc, ``ncclTopoCheckGdr``: ``netGdrLevel =
PATH_PXB`` unless ``NCCL_NET_GDR_LEVEL`` overrides it); farther, network traffic is staged through host
memory and crosses the CPU.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rules.estimates._args import require_choice, require_non_negative, require_positive, require_positive_int

# nvidia-smi topo -m path types, nearest first.
PCIE_PATHS: tuple[str, ...] = ("PIX", "PXB", "PHB", "NODE", "SYS")
# The farthest path on which NCCL enables GPUDirect RDMA by default (paths.cc: netGdrLevel = PATH_PXB).
GPUDIRECT_RDMA_FARTHEST = "PXB"


@dataclass(frozen=True)
class NicBandwidth:
    """NICs of one purpose on a node, and what each GPU gets of them."""

    nics: float  # NIC ports of this purpose on the node
    gbps: float  # their summed line rate, Gb/s
    nics_per_gpu: float
    gbps_per_gpu: float

    @property
    def gbs(self) -> float:
        """Summed line rate in GB/s (÷ 8)."""
        return self.gbps / 8.0


def nic_bandwidth(nics: Iterable[tuple[float, float]], gpus_per_node: int) -> NicBandwidth:
    """Return the node's NIC count and line rate (Σ count, Σ count × Gb/s) and their share per GPU.

    ``nics`` is (count, Gb/s per port) for each NIC line of one purpose (compute, storage). A
    rail-optimised GPU node pairs every GPU with its own compute NIC (NVIDIA DGX H100: eight
    ConnectX-7 400 Gb/s for eight GPUs, 1 NIC and 400 Gb/s per GPU, DGX H100 user guide); the share per
    GPU is what a multi-node collective can draw when all GPUs of the node send at once. Line rate,
    not achieved bandwidth: NCCL reaches about 46-48 GB/s of an NDR 400 Gb/s NIC's 50 GB/s
    (nccl-tests issues; ``shared/reference/README.md``).
    """
    require_positive_int("gpus_per_node", gpus_per_node)
    count = 0.0
    gbps = 0.0
    for nic_count, nic_gbps in nics:
        require_non_negative("count", nic_count)
        require_positive("gbps", nic_gbps)
        count += nic_count
        gbps += nic_count * nic_gbps
    return NicBandwidth(count, gbps, count / gpus_per_node, gbps / gpus_per_node)


def pcie_path(gpu_numa_node: int, gpu_pcie_switch: str | None, nic_numa_node: int,
              nic_pcie_switch: str | None) -> str:
    """Return the nvidia-smi topo -m path type between a GPU and a NIC from where each one sits.

    Same PCIe switch → PIX; switches below a common upstream switch (``"sw0/a"`` and ``"sw0/b"``: a
    switch named ``upstream/downstream``) → PXB; same NUMA node but no switch in common (each behind
    its own CPU root port, or a switch not stated) → NODE, the path crosses the CPU's PCIe host
    bridges; different NUMA nodes → SYS. PHB (one host bridge, no switch) is not distinguished from
    NODE here: both cross the CPU and both lose GPUDirect RDMA under NCCL's default PXB level.
    """
    if gpu_numa_node != nic_numa_node:
        return "SYS"
    if gpu_pcie_switch and nic_pcie_switch:
        if gpu_pcie_switch == nic_pcie_switch:
            return "PIX"
        if gpu_pcie_switch.split("/")[0] == nic_pcie_switch.split("/")[0]:
            return "PXB"
    return "NODE"


def crosses_cpu(path: str, farthest: str = GPUDIRECT_RDMA_FARTHEST) -> bool:
    """Return True when a GPU–NIC path is farther than ``farthest`` (by default PXB: PHB, NODE and SYS cross the CPU).

    Source: NCCL src/graph/paths.cc ``ncclTopoCheckGdr`` disables GPUDirect RDMA beyond PATH_PXB by
    default, so such a GPU's inter-node traffic is bounced through host memory; ``NCCL_NET_GDR_LEVEL``
    moves the limit, and ``farthest`` follows it (policy topology.gdr_farthest_path).
    """
    require_choice("path", path, PCIE_PATHS)
    require_choice("farthest", farthest, PCIE_PATHS)
    return PCIE_PATHS.index(path) > PCIE_PATHS.index(farthest)


def accepted_paths(farthest: str = GPUDIRECT_RDMA_FARTHEST) -> tuple[str, ...]:
    """Returns the GPU–NIC paths no farther than ``farthest``, nearest first (PXB → PIX, PXB)."""
    require_choice("farthest", farthest, PCIE_PATHS)
    return PCIE_PATHS[:PCIE_PATHS.index(farthest) + 1]


def cpu_cores(sockets: int, cores_per_socket: int) -> int:
    """Returns a server's CPU cores: sockets × cores per socket, as ``lscpu`` reports "Socket(s)" and
    "Core(s) per socket" (DGX H100 user guide: 2 × 56-core Xeon Platinum 8480C = 112 cores).
    """
    require_positive_int("sockets", sockets)
    require_positive_int("cores_per_socket", cores_per_socket)
    return sockets * cores_per_socket


@dataclass(frozen=True)
class GpuNicEntry:
    """Where one GPU and its compute NIC sit, as a node's PCIe layout states it."""

    gpu: str | int | None
    nic: str | None
    nic_numa_node: int | None
    numa_node: int | None = None
    pcie_switch: str | None = None
    nic_pcie_switch: str | None = None

    @property
    def located(self) -> bool:
        """Returns whether the entry places the NIC at all (a NIC and its NUMA node)."""
        return self.nic is not None and self.nic_numa_node is not None


@dataclass(frozen=True)
class NicPlacement:
    """The PCIe path of each stated GPU–NIC pair, those that cross the CPU, and the GPUs left unplaced."""

    links: tuple[str, ...]  # per entry: a PCIE_PATHS name, or "unknown" when the entry does not locate the NIC
    cross_cpu: tuple[str, ...]  # "GPU0→mlx5_0 SYS" for each pair farther than PXB
    unmapped_gpus: int  # GPUs of the node without a located NIC (0 when no layout is stated)


def nic_placement(entries: list[GpuNicEntry], gpus_per_node: int,
                  farthest: str = GPUDIRECT_RDMA_FARTHEST) -> NicPlacement:
    """Returns each entry's path (:func:`pcie_path`), the pairs farther than ``farthest`` (:func:`crosses_cpu`),
    and how many of the node's GPUs the stated layout leaves without a located compute NIC.
    """
    links, cross_cpu, located = [], [], 0
    for entry in entries:
        link = "unknown"
        if entry.located:
            link = pcie_path(entry.numa_node, entry.pcie_switch, entry.nic_numa_node, entry.nic_pcie_switch)
            located += 1
            if crosses_cpu(link, farthest):
                cross_cpu.append(f"GPU{entry.gpu}→{entry.nic} {link}")
        links.append(link)
    unmapped = max(0, gpus_per_node - located) if entries else 0
    return NicPlacement(tuple(links), tuple(cross_cpu), unmapped)

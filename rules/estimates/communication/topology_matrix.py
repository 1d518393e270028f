"""A node's measured topology (``nvidia-smi topo -m``): each GPU's compute NIC and path, socket crossings, NVLinks.

The matrix's cells name the path between two devices in the legend nvidia-smi prints under it: ``X`` (self),
``SYS`` (PCIe plus the SMP interconnect between NUMA nodes, e.g. QPI/UPI), ``NODE`` (PCIe plus the
interconnect between PCIe host bridges within a NUMA node), ``PHB`` (a PCIe host bridge, typically the CPU),
``PXB`` (several PCIe bridges, not through a host bridge), ``PIX`` (at most one PCIe bridge), ``NV#`` (a bonded
set of # NVLinks). Drivers before R384 printed ``SOC`` for SYS. Nearest means first in PIX, PXB, PHB, NODE, SYS
(rules.estimates.communication.topology.PCIE_PATHS); a tie keeps the NIC first in the header, as parsers.topology does.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from rules.errors import InconsistentInput
from rules.estimates.communication.topology import GPUDIRECT_RDMA_FARTHEST, PCIE_PATHS, crosses_cpu

_NVLINK = re.compile(r"NV(\d+)")
_OLD_NAMES = {"SOC": "SYS"}  # pre-R384 drivers


@dataclass(frozen=True)
class MatrixNic:
    """One NIC column of the matrix: its column name (NIC0, or mlx5_0 on drivers without a legend), its device."""

    name: str
    device: str | None

    @property
    def label(self) -> str:
        """Returns the name the record shows: the device where the legend gives one, else the column."""
        return self.device or self.name


@dataclass(frozen=True)
class TopologyMatrix:
    """The parsed ``nvidia-smi topo -m`` of one node (parsers.topology's shape, in dataclasses)."""

    gpus: tuple[str, ...]  # GPU0, GPU1, ... in row order
    nics: tuple[MatrixNic, ...]  # in column order
    links: Mapping[str, Mapping[str, str]]  # GPU row → column name → cell as printed


@dataclass(frozen=True)
class GpuNic:
    """A GPU, its compute NIC in the matrix and the path to it; ``nic`` and ``link`` are None when it has none.

    ``stated`` tells whether the NIC is the one the quote assigns the GPU (its rail), else it is the nearest.
    """

    gpu: str
    nic: MatrixNic | None
    link: str | None
    stated: bool = False
    nearest: MatrixNic | None = None  # the GPU's nearest compute NIC, whichever NIC ``nic`` is
    nearest_link: str | None = None


@dataclass(frozen=True)
class MatrixPlacement:
    """What the matrix says of the node's GPUs and compute NICs."""

    gpus: tuple[GpuNic, ...]
    compute_nics: tuple[MatrixNic, ...]  # the NICs counted as compute
    cross_cpu: tuple[str, ...]  # "GPU0→mlx5_0 SYS" for each GPU whose compute NIC is farther than allowed
    unmapped_gpus: int  # GPUs of the node with no compute NIC in the matrix (GPUs it does not show included)
    gpu_pairs_across_sockets: tuple[str, ...]  # "GPU0–GPU4 SYS": pairs whose path crosses the SMP interconnect
    nvlinks_per_pair: Mapping[str, int]  # "GPU0–GPU1" → NVLinks between them (0 without NVLink)

    @property
    def fewest_nvlinks(self) -> int | None:
        """Returns the fewest NVLinks between any two GPUs (0 when a pair has none); None for a one-GPU matrix."""
        return min(self.nvlinks_per_pair.values(), default=None)

    @property
    def most_nvlinks(self) -> int | None:
        """Returns the most NVLinks between any two GPUs; None for a one-GPU matrix."""
        return max(self.nvlinks_per_pair.values(), default=None)


def path_name(cell: str) -> str:
    """Returns the PCIe path type of a GPU–NIC cell (SOC as SYS); InconsistentInput for one that is not a path."""
    path = _OLD_NAMES.get(cell, cell)
    if path not in PCIE_PATHS:
        raise InconsistentInput(f"nvidia-smi topo -m: a GPU–NIC cell reads {cell!r}, not a PCIe path "
                                f"({', '.join(PCIE_PATHS)})")
    return path


def nvlinks(cell: str) -> int:
    """Returns the number of bonded NVLinks a GPU–GPU cell names (NV18 → 18); 0 for a PCIe path."""
    match = _NVLINK.fullmatch(cell)
    return int(match.group(1)) if match else 0


def compute_nics_of(matrix: TopologyMatrix, named: Collection[str] | None) -> tuple[MatrixNic, ...]:
    """Returns the matrix's NICs named in ``named`` (by device or column name), every NIC when ``named`` is None.

    InconsistentInput naming the names the matrix does not have.
    """
    if named is None:
        return matrix.nics
    unknown = [name for name in named if not any(name in (nic.name, nic.device) for nic in matrix.nics)]
    if unknown:
        known = ", ".join(nic.label for nic in matrix.nics) or "none"
        raise InconsistentInput(f"the compute NICs {', '.join(unknown)} are not in the nvidia-smi topo -m matrix "
                                f"(its NICs: {known})")
    return tuple(nic for nic in matrix.nics if nic.name in named or nic.device in named)


def nearest_nic(matrix: TopologyMatrix, gpu: str, nics: tuple[MatrixNic, ...]) -> GpuNic:
    """Returns ``gpu``'s nearest NIC among ``nics`` and the path to it; the first in column order on a tie."""
    best: tuple[int, MatrixNic, str] | None = None
    for nic in nics:
        link = path_name(matrix.links[gpu][nic.name])
        rank = PCIE_PATHS.index(link)
        if best is None or rank < best[0]:
            best = (rank, nic, link)
    if best is None:
        return GpuNic(gpu, None, None)
    return GpuNic(gpu, best[1], best[2], nearest=best[1], nearest_link=best[2])


def gpu_nic(matrix: TopologyMatrix, gpu: str, nics: tuple[MatrixNic, ...], stated: str | None) -> GpuNic:
    """Returns ``gpu``'s compute NIC: the one the quote assigns it (``stated``, by device or column name) where the
    matrix shows that NIC, else its nearest (:func:`nearest_nic`); the nearest is kept beside a stated one.

    In a rail-optimised fabric a GPU's NIC is its rail (the leaf switch its traffic enters), so the stated NIC is
    the one whose path matters even when another GPU's NIC sits nearer.
    """
    nearest = nearest_nic(matrix, gpu, nics)
    assigned = next((nic for nic in matrix.nics if stated in (nic.name, nic.device)), None) if stated else None
    if assigned is None:
        return nearest
    link = path_name(matrix.links[gpu][assigned.name])
    return GpuNic(gpu, assigned, link, True, nearest.nearest, nearest.nearest_link)


def matrix_placement(matrix: TopologyMatrix, gpus_per_node: int, compute_nics: Collection[str] | None = None,
                     farthest: str = GPUDIRECT_RDMA_FARTHEST,
                     stated: Mapping[str, str] | None = None) -> MatrixPlacement:
    """Returns each GPU's compute NIC and link, those farther than ``farthest``, and the GPU pairs across sockets.

    A GPU's compute NIC is the one ``stated`` assigns it (GPU0 → mlx5_0, the quote's pcie_topology), else its
    nearest among ``compute_nics`` (default all the matrix's NICs) (:func:`gpu_nic`); one farther than
    ``farthest`` (NCCL's GPUDirect RDMA limit, PXB by default) is listed in ``cross_cpu``
    (:func:`rules.estimates.communication.topology.crosses_cpu`). GPUs of the node without a compute NIC in the
    matrix, those it
    does not show included, are ``unmapped_gpus``. A GPU pair at SYS crosses the sockets' interconnect; NVLinks
    per pair come from the NV# cells.
    """
    nics = compute_nics_of(matrix, compute_nics)
    placed = tuple(gpu_nic(matrix, gpu, nics, (stated or {}).get(gpu)) for gpu in matrix.gpus)
    cross_cpu = tuple(f"{p.gpu}→{p.nic.label} {p.link}" for p in placed
                      if p.nic is not None and crosses_cpu(p.link, farthest))
    mapped = sum(1 for p in placed if p.nic is not None)
    across, links = [], {}
    for index, first in enumerate(matrix.gpus):
        for second in matrix.gpus[index + 1:]:
            cell = matrix.links[first][second]
            links[f"{first}–{second}"] = nvlinks(cell)
            if _OLD_NAMES.get(cell, cell) == "SYS":
                across.append(f"{first}–{second} SYS")
    return MatrixPlacement(placed, nics, cross_cpu, max(0, gpus_per_node - mapped), tuple(across), links)

"""A quoted node's measured topology: its ``nvidia-smi topo -m`` matrix, placed by
rules.estimates.communication.topology_matrix."""

from __future__ import annotations

from dataclasses import dataclass

from rules.artifacts import TOPOLOGY
from rules.checks.base import Context
from rules.checks.facts.artifacts import read_artifact, source
from rules.estimates.communication.topology_matrix import MatrixNic, MatrixPlacement, TopologyMatrix, matrix_placement


@dataclass(frozen=True)
class MeasuredTopology:
    """The matrix's placement of the node's GPUs and compute NICs, and where it came from."""

    placement: MatrixPlacement
    source: str
    compute_nics_named: bool  # the submission named the compute NICs (else every NIC of the matrix counts)


def measured_topology(ctx: Context, gpus_per_node: int, farthest: str,
                      stated: dict[str, str] | None = None) -> MeasuredTopology | None:
    """Returns what ``measurements.topology.nvidia_smi_topo_m`` says of the node; None when it is not given.

    ``stated`` maps a GPU row (GPU0) to the NIC the quote's pcie_topology assigns it.
    """
    parsed = read_artifact(ctx, TOPOLOGY)
    if parsed is None:
        return None
    matrix = TopologyMatrix(gpus=tuple(gpu["name"] for gpu in parsed["gpus"]),
                            nics=tuple(MatrixNic(nic["name"], nic["device"]) for nic in parsed["nics"]),
                            links=parsed["links"])
    named = ctx.value(ctx.job.measurements.topology.compute_nics)
    placement = matrix_placement(matrix, gpus_per_node, tuple(named) if named is not None else None, farthest,
                                 stated)
    return MeasuredTopology(placement, source(TOPOLOGY), named is not None)

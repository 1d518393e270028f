"""Vendor-supplied figures: the datasheet figures a quote gives for hardware the catalogue lacks.

A node group's ``gpu.model`` the catalogue lacks is read with the figures the quote gives for it (memory_gib,
hbm_tbs, bf16_tflops, tdp_w, nvlink_gbs), and a ``server_model`` the catalogue lacks (by id and alias) with the
group's own figures (max_power_w, host_memory_gib, local_nvme_tb, rack_units, its CPUs' sockets and cores, its NICs'
counts and line rates): nothing fills or checks them, so every check that reads them rests on the vendor's word.
An id that describes nothing (no figures) is refused before evaluation (rules/job/models.py); a catalogued id's
figures come from its datasheet (rules/job/inputs.py) and are not listed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rules.catalogue import Catalogue
from rules.job.cluster import Cluster, QuotedNodeGroup
from rules.job.given import Given
from rules.job.inputs import GPU_FIELDS, SERVER_FIELDS

GPU, SERVER = "gpu", "server"  # what a vendor-supplied figure describes


@dataclass(frozen=True)
class VendorFigure:
    """One figure the quote supplies for hardware the catalogue lacks: its node group, what it describes (GPU or
    server) and that hardware's id (None for a GPU the quote does not name), and the figure with its pointer."""

    node_group: str
    hardware: str  # GPU or SERVER
    id: str | None
    figure: Given[Any]


def vendor_supplied_figures(cluster: Cluster, catalogue: Catalogue) -> tuple[VendorFigure, ...]:
    """Returns the figures the quote supplies for the GPUs and servers of its node groups that the catalogue lacks,
    group by group, GPU figures before server figures, each in the order of the submission contract."""
    found: list[VendorFigure] = []
    for group in cluster.node_groups:
        name = group.name.value or group.pointer
        gpu_model = group.gpu.model.value
        if catalogue.gpu(gpu_model) is None:
            found.extend(VendorFigure(name, GPU, gpu_model, given) for given in _stated(
                getattr(group.gpu, field) for field in GPU_FIELDS))
        server_model = group.server_model.value
        if isinstance(server_model, str) and catalogue.server(server_model) is None:
            found.extend(VendorFigure(name, SERVER, server_model, given) for given in _stated(_server_figures(group)))
    return tuple(found)


def _server_figures(group: QuotedNodeGroup) -> list[Given[Any]]:
    """Returns the figures of a node group that a catalogued server would fill: its own, its CPUs', its NICs'."""
    figures = [getattr(group, field) for field in SERVER_FIELDS]
    figures += [group.cpu.sockets, group.cpu.cores_per_socket]
    for nic in group.nics:
        figures += [nic.count, nic.gbps]
    return figures


def _stated(figures: Any) -> list[Given[Any]]:
    """Returns the figures the submission holds (not absent, neither a convention nor a policy default)."""
    return [given for given in figures if given.stated]

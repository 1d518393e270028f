"""The quoted cluster of the job: node groups (GPUs, CPUs, NICs, PCIe layout), fabric, storage, racks, priced lines."""

from __future__ import annotations

from dataclasses import dataclass

from rules.job.fields import at
from rules.job.given import Given


@dataclass(frozen=True)
class QuotedGpu:
    """The GPUs of one quoted server: model and count, and the figures the quote or the catalogue states."""

    model: Given[str] = at("model")
    count: Given[int] = at("count")
    memory_gib: Given[float] = at("memory_gib")
    hbm_tbs: Given[float] = at("hbm_tbs")
    bf16_tflops: Given[float] = at("bf16_tflops")
    tdp_w: Given[float] = at("tdp_w")
    nvlink_gbs: Given[float] = at("nvlink_gbs")
    pointer: str = ""


@dataclass(frozen=True)
class QuotedCpu:
    """The CPUs of one quoted server."""

    model: Given[str] = at("model")
    sockets: Given[int] = at("sockets")
    cores_per_socket: Given[int] = at("cores_per_socket")
    pointer: str = ""


@dataclass(frozen=True)
class QuotedNic:
    """One line of a quoted server's NICs: how many, their line rate, and what they are for."""

    model: Given[str] = at("model")
    count: Given[int] = at("count")
    gbps: Given[float] = at("gbps")
    purpose: Given[str] = at("purpose")
    pointer: str = ""


@dataclass(frozen=True)
class PcieEntry:
    """Where one GPU of a quoted server and its compute NIC sit: NUMA node and PCIe switch of each."""

    gpu: Given[str] = at("gpu")
    numa_node: Given[int] = at("numa_node")
    pcie_switch: Given[str] = at("pcie_switch")
    nic: Given[str] = at("nic")
    nic_numa_node: Given[int] = at("nic_numa_node")
    nic_pcie_switch: Given[str] = at("nic_pcie_switch")
    pointer: str = ""


@dataclass(frozen=True)
class QuotedNodeGroup:
    """A node group of the quote as submitted (catalogue fills included), each figure with its pointer."""

    name: Given[str] = at("name")
    count: Given[int] = at("count")
    server_model: Given[str] = at("server_model")
    unit_price: Given[float] = at("unit_price")
    gpu: QuotedGpu = at("gpu", section=QuotedGpu)
    cpu: QuotedCpu = at("cpu", section=QuotedCpu)
    host_memory_gib: Given[float] = at("host_memory_gib")
    nics: tuple[QuotedNic, ...] = at("nics", each=QuotedNic)
    pcie_topology: tuple[PcieEntry, ...] = at("pcie_topology", each=PcieEntry)
    local_nvme_tb: Given[float] = at("local_nvme_tb")
    max_power_w: Given[float] = at("max_power_w")
    rack_units: Given[float] = at("rack_units")
    pointer: str = ""


@dataclass(frozen=True)
class Fabric:
    """The compute fabric between the nodes."""

    technology: Given[str] = at("technology")
    topology: Given[str] = at("topology")
    link_gbps: Given[float] = at("link_gbps")
    oversubscription: Given[float] = at("oversubscription", 1.0)  # 1: a non-blocking fabric
    pointer: str = ""


@dataclass(frozen=True)
class Storage:
    """The quoted shared storage."""

    kind: Given[str] = at("kind")
    capacity_tb: Given[float] = at("capacity_tb")
    read_gbs: Given[float] = at("read_gbs")
    write_gbs: Given[float] = at("write_gbs")
    pointer: str = ""


@dataclass(frozen=True)
class Pdus:
    """One line of a rack's power distribution units."""

    count: Given[int] = at("count")
    rating_kw: Given[float] = at("rating_kw")
    pointer: str = ""


@dataclass(frozen=True)
class Rack:
    """One line of the quote's racks: how many, their power budget, cooling, PDUs and redundancy."""

    name: Given[str] = at("name")
    count: Given[int] = at("count", 1)
    power_budget_kw: Given[float] = at("power_budget_kw")
    cooling: Given[str] = at("cooling")
    cooling_capacity_kw: Given[float] = at("cooling_capacity_kw")
    pdus: tuple[Pdus, ...] = at("pdus", each=Pdus)
    redundancy: Given[str] = at("redundancy", "N")
    node_groups: tuple[tuple[str, Given[int]], ...] = at("node_groups", keyed=True)  # nodes of each group per rack
    pointer: str = ""


@dataclass(frozen=True)
class LineItem:
    """One priced line of the quote."""

    sku: Given[str] = at("sku")
    description: Given[str] = at("description")
    quantity: Given[float] = at("quantity")
    unit_price: Given[float] = at("unit_price")
    pointer: str = ""


@dataclass(frozen=True)
class Cluster:
    """The quoted hardware: node groups, fabric, storage, racks and PDUs, and the priced lines."""

    vendor: Given[str] = at("vendor")
    quote_id: Given[str] = at("quote_id")
    currency: Given[str] = at("currency")
    node_groups: tuple[QuotedNodeGroup, ...] = at("node_groups", each=QuotedNodeGroup)
    fabric: Fabric = at("fabric", section=Fabric)
    storage: Storage = at("storage", section=Storage)
    racks: tuple[Rack, ...] = at("racks", each=Rack)
    line_items: tuple[LineItem, ...] = at("line_items", each=LineItem)
    pointer: str = ""

    def group_at(self, pointer: str | None) -> QuotedNodeGroup | None:
        """Returns the node group whose JSON Pointer is ``pointer`` (a workload's, as its layout names it); None
        when none is."""
        return next((group for group in self.node_groups if group.pointer == pointer), None)

    def group_named(self, name: str | None) -> QuotedNodeGroup | None:
        """Returns the node group a workload names, else (``name`` None) the first with GPUs; None when none is."""
        for group in self.node_groups:
            if name is not None and group.name.value == name:
                return group
        if name is None:
            for group in self.node_groups:
                if group.gpu.count.value:
                    return group
        return None

"""gpu-nic-topology: every GPU of a multi-node job has compute network bandwidth and a NIC on its own PCIe switch."""

from __future__ import annotations

from dataclasses import replace

from rules.checks.base import Check, Context, Facts, Passing, Rule
from rules.checks.facts.layout import layout, nics
from rules.checks.facts.pointers import TRAINING
from rules.estimates import topology
from rules.status import Status

_NICS = ("{compute_nics_per_node:g} compute NICs ({compute_gbps_per_node:,.0f} Gb/s) for {gpus_per_node} GPUs per "
         "node: {compute_nics_per_gpu:.2f} NICs and {compute_gbps_per_gpu:,.0f} Gb/s per GPU")


class GpuNicTopology(Check):
    id = "gpu-nic-topology"
    title = "Map GPUs and NICs to the topology"
    plan_item = "Map GPUs and NICs to the topology"
    thresholds = {"min_compute_nics_per_gpu": "topology.min_compute_nics_per_gpu",
                  "min_compute_gbps_per_gpu": "topology.min_compute_gbps_per_gpu"}
    headline = "{compute_nics_per_gpu:.2f} NICs, {compute_gbps_per_gpu:,.0f} Gb/s per GPU; {gpus_cross_cpu} off-switch"
    rules = (
        Rule(Status.FAIL, "too-little-compute-network",
             lambda m: (m.compute_nics_per_gpu < m.min_compute_nics_per_gpu)
             | (m.compute_gbps_per_gpu < m.min_compute_gbps_per_gpu),
             "a {nodes}-node job needs at least {min_compute_nics_per_gpu:g} compute NIC and "
             "{min_compute_gbps_per_gpu:g} Gb/s per GPU; the quote has " + _NICS,
             "Quote one compute NIC per GPU at {min_compute_gbps_per_gpu:g} Gb/s or more (rail-optimised, as in "
             "DGX/HGX H100 with eight 400 Gb/s ConnectX-7), or keep the job on one node."),
        Rule(Status.FAIL, "nic-across-cpu", lambda m: m.gpus_cross_cpu > 0,
             _NICS + ", but {gpus_cross_cpu} GPU(s) reach their compute NIC through the CPU ({cross_cpu_list}); "
             "NCCL then disables GPUDirect RDMA (default NCCL_NET_GDR_LEVEL = PXB) and stages traffic in host memory",
             "Ask the vendor for a PCIe layout that puts each GPU and its compute NIC under the same PCIe switch "
             "(PIX or PXB in nvidia-smi topo -m), or re-map the NICs of {cross_cpu_list}."),
        Rule(Status.WARN, "placement-incomplete", lambda m: m.gpus_unmapped > 0,
             _NICS + "; the stated PCIe layout leaves {gpus_unmapped} GPU(s) without a located compute NIC",
             "State nic, nic_numa_node and nic_pcie_switch for every GPU in pcie_topology, or record "
             "nvidia-smi topo -m from the quoted server."),
    )
    passing = Passing("mapped", _NICS + "; {placement_note}")

    def gather(self, ctx: Context) -> Facts:
        if ctx.get(TRAINING) is None:
            return ctx.not_applicable("the submission has no training workload")
        plan = layout(ctx)
        if plan is None:
            return ctx.insufficient("the job cannot be placed on the quote's nodes")
        if plan.nodes <= 1:
            return ctx.not_applicable(
                f"single-node job ({plan.gpus} GPUs on one node): GPUs exchange gradients over NVLink/PCIe inside "
                "the node and the compute NICs carry no training traffic, so neither their count nor their PCIe "
                "placement applies")
        if not ctx.inputs.get(f"{plan.group}/nics"):
            ctx.need(f"{plan.group}/nics")
            return ctx.insufficient("the quote lists no NICs for the training nodes")
        compute = nics(ctx, plan.group, "compute")
        entries = []
        for index in range(len(ctx.inputs.get(f"{plan.group}/pcie_topology") or [])):
            base = f"{plan.group}/pcie_topology/{index}"
            gpu, nic = ctx.get(f"{base}/gpu"), ctx.get(f"{base}/nic")
            entry = topology.GpuNicEntry(gpu, nic, ctx.get(f"{base}/nic_numa_node"))
            if entry.located:
                entry = replace(entry, numa_node=ctx.get(f"{base}/numa_node"),
                                pcie_switch=ctx.get(f"{base}/pcie_switch"),
                                nic_pcie_switch=ctx.get(f"{base}/nic_pcie_switch"))
            entries.append(entry)
        placement = topology.nic_placement(entries, plan.gpus_per_node)
        gpus = [{"gpu": e.gpu, "nic": e.nic, "link": link} for e, link in zip(entries, placement.links, strict=True)]
        cross_cpu, unmapped = placement.cross_cpu, placement.unmapped_gpus
        if not entries:
            placement_note = ("the quote states no PCIe layout: confirm with nvidia-smi topo -m at acceptance that "
                              "each GPU's compute NIC is PIX or PXB")
        elif cross_cpu or unmapped:
            placement_note = "the stated PCIe layout does not give every GPU a compute NIC under its own switch"
        else:
            placement_note = "every GPU's compute NIC sits under the GPU's PCIe switch (PIX/PXB)"
        return Facts(evidence={
            "nodes": plan.nodes,
            "gpus_per_node": plan.gpus_per_node,
            "compute_nics_per_node": compute.nics,
            "compute_gbps_per_node": compute.gbps,
            "compute_nics_per_gpu": compute.nics_per_gpu,
            "compute_gbps_per_gpu": compute.gbps_per_gpu,
            "gpus": gpus,
            "gpus_cross_cpu": len(cross_cpu),
            "cross_cpu_list": ", ".join(cross_cpu) or "none",
            "gpus_unmapped": unmapped,
            "placement_stated": bool(entries),
            "placement_note": placement_note,
        })

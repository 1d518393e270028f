"""gpu-nic-topology: every GPU of a multi-node job has compute network bandwidth and a NIC on its own PCIe switch."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rules.checks.base import Check, Context, Facts, Passing, Rule
from rules.checks.facts.layout import layout, nics, training_group
from rules.checks.facts.node_topology import MeasuredTopology, measured_topology
from rules.estimates.communication import topology
from rules.job.cluster import QuotedNodeGroup
from rules.job.fields import member_pointer
from rules.job.given import absent
from rules.status import Basis, Status

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
             _NICS + ", but {gpus_cross_cpu} GPU(s) reach their compute NIC through the CPU ({cross_cpu_list}, in the "
             "{placement_from}); farther than {gdr_farthest_path} NCCL disables GPUDirect RDMA (NCCL_NET_GDR_LEVEL, "
             "default PXB) and stages traffic in host memory",
             "Ask the vendor for a PCIe layout that puts each GPU and its compute NIC under the same PCIe switch "
             "(PIX or PXB in nvidia-smi topo -m), or re-map the NICs of {cross_cpu_list}."),
        Rule(Status.WARN, "placement-incomplete", lambda m: m.gpus_unmapped > 0,
             _NICS + "; the {placement_from} leaves {gpus_unmapped} GPU(s) without a located compute NIC",
             "State nic, nic_numa_node and nic_pcie_switch for every GPU in pcie_topology, or record "
             "nvidia-smi topo -m from the quoted server (with measurements.topology.compute_nics naming its "
             "compute NICs)."),
        Rule(Status.WARN, "gpus-across-sockets", lambda m: m.gpu_pairs_across_sockets > 0,
             _NICS + "; but {gpu_pairs_across_sockets} GPU pair(s) of the node connect only across the CPU sockets "
             "({across_sockets_list} in nvidia-smi topo -m: PCIe and the SMP interconnect such as UPI or Infinity "
             "Fabric, no NVLink), so the node's collectives between them run at that interconnect's speed",
             "Quote GPUs joined by NVLink or NVSwitch, or measure the node's all-reduce busbw with nccl-tests on one "
             "node (measurements.nccl_tests) so that interconnect-scaling uses what the sockets deliver."),
    )
    passing = Passing("mapped", _NICS + "; {placement_note}")

    def gather(self, ctx: Context) -> Facts:
        if not ctx.job.trains:
            return ctx.not_applicable("the submission has no training workload")
        plan = layout(ctx)
        if plan is None:
            return ctx.insufficient("the job cannot be placed on the quote's nodes")
        if plan.nodes <= 1:
            return ctx.not_applicable(
                f"single-node job ({plan.gpus} GPUs on one node): GPUs exchange gradients over NVLink/PCIe inside "
                "the node and the compute NICs carry no training traffic, so neither their count nor their PCIe "
                "placement applies")
        group = training_group(ctx)
        if not group.nics:
            ctx.needed(absent(member_pointer(group, "nics")))
            return ctx.insufficient("the quote lists no NICs for the training nodes")
        compute = nics(ctx, group, "compute")
        farthest = ctx.setting("topology.gdr_farthest_path")
        entries = _stated_entries(ctx, group)
        stated = topology.nic_placement(entries, plan.gpus_per_node, farthest)
        gpus = [{"gpu": e.gpu, "nic": e.nic, "link": link} for e, link in zip(entries, stated.links, strict=True)]
        evidence = {
            "nodes": plan.nodes,
            "gpus_per_node": plan.gpus_per_node,
            "compute_nics_per_node": compute.nics,
            "compute_gbps_per_node": compute.gbps,
            "compute_nics_per_gpu": compute.nics_per_gpu,
            "compute_gbps_per_gpu": compute.gbps_per_gpu,
            "gdr_farthest_path": farthest,
            "placement_stated": bool(entries),
        }
        assigned = {f"GPU{e.gpu}": e.nic for e in entries if e.nic is not None}
        measured = measured_topology(ctx, plan.gpus_per_node, farthest, assigned)
        if measured is not None:
            return _measured_facts(evidence, measured, gpus)
        cross_cpu, unmapped = stated.cross_cpu, stated.unmapped_gpus
        accepted = topology.accepted_paths(farthest)
        if not entries:
            placement_note = ("the quote states no PCIe layout: confirm with nvidia-smi topo -m at acceptance that "
                              f"each GPU's compute NIC is {' or '.join(accepted)}")
        elif cross_cpu or unmapped:
            placement_note = "the stated PCIe layout does not give every GPU a compute NIC under its own switch"
        else:
            placement_note = f"every GPU's compute NIC sits under the GPU's PCIe switch ({'/'.join(accepted)})"
        return Facts(evidence={
            **evidence,
            "placement_basis": "stated",
            "placement_from": "stated PCIe layout",
            "gpus": gpus,
            "gpus_cross_cpu": len(cross_cpu),
            "cross_cpu_list": ", ".join(cross_cpu) or "none",
            "gpus_unmapped": unmapped,
            "placement_note": placement_note,
        }, unjudged=frozenset({"gpu_pairs_across_sockets"}))  # only a measured matrix shows the GPU–GPU paths


def _stated_entries(ctx: Context, group: QuotedNodeGroup) -> list[topology.GpuNicEntry]:
    """Returns the quote's PCIe layout of the node group: where each GPU and its compute NIC sit."""
    entries = []
    for stated in group.pcie_topology:
        gpu, nic = ctx.value(stated.gpu), ctx.value(stated.nic)
        entry = topology.GpuNicEntry(gpu, nic, ctx.value(stated.nic_numa_node))
        if entry.located:
            entry = replace(entry, numa_node=ctx.value(stated.numa_node), pcie_switch=ctx.value(stated.pcie_switch),
                            nic_pcie_switch=ctx.value(stated.nic_pcie_switch))
        entries.append(entry)
    return entries


def _measured_facts(evidence: dict[str, Any], measured: MeasuredTopology, stated: list[dict[str, Any]]) -> Facts:
    """Returns the facts of a node whose nvidia-smi topo -m matrix was recorded, the stated layout beside it."""
    placement = measured.placement
    by_gpu = {f"GPU{row['gpu']}": row for row in stated}
    gpus = []
    for found in placement.gpus:
        row = {"gpu": found.gpu, "nic": found.nic.label if found.nic else None,
               "nic_column": found.nic.name if found.nic else None, "link": found.link,
               "nic_from": "stated" if found.stated else "nearest"}
        if found.stated and found.nearest != found.nic:
            row.update(nearest_nic=found.nearest.label if found.nearest else None, nearest_link=found.nearest_link)
        if found.gpu in by_gpu:
            row.update(stated_nic=by_gpu[found.gpu]["nic"], stated_link=by_gpu[found.gpu]["link"])
        gpus.append(row)
    cross_cpu = placement.cross_cpu
    if not placement.compute_nics:
        note = "nvidia-smi topo -m shows no compute NIC on the node"
    elif cross_cpu or placement.unmapped_gpus:
        note = "nvidia-smi topo -m does not show every GPU with a compute NIC under its own PCIe switch"
    else:
        links = "/".join(sorted({g["link"] for g in gpus}))
        note = f"nvidia-smi topo -m shows every GPU's nearest compute NIC at {links}"
    if placement.most_nvlinks and placement.fewest_nvlinks == placement.most_nvlinks:
        note += f"; {placement.most_nvlinks} NVLinks between every two GPUs"
    elif placement.most_nvlinks:
        note += f"; {placement.fewest_nvlinks} to {placement.most_nvlinks} NVLinks between two GPUs"
    return Facts(basis=Basis.MEASURED, evidence={
        **evidence,
        "placement_basis": "measured",
        "placement_from": "nvidia-smi topo -m matrix",
        "measurement_source": measured.source,
        "gpus": gpus,
        "gpus_cross_cpu": len(cross_cpu),
        "cross_cpu_list": ", ".join(cross_cpu) or "none",
        "gpus_unmapped": placement.unmapped_gpus,
        "placement_note": note,
        "matrix_gpus": len(placement.gpus),
        "compute_nics_in_matrix": [nic.label for nic in placement.compute_nics],
        "compute_nics_named": measured.compute_nics_named,
        "gpu_pairs_across_sockets": len(placement.gpu_pairs_across_sockets),
        "across_sockets_list": ", ".join(placement.gpu_pairs_across_sockets) or "none",
        "nvlinks_per_pair": dict(placement.nvlinks_per_pair),
        "fewest_nvlinks_per_pair": placement.fewest_nvlinks,
        "most_nvlinks_per_pair": placement.most_nvlinks,
    })

"""How the training job communicates: the collectives of one step, the bandwidths they reach, scaling efficiency."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rules.checks.base import Context
from rules.checks.facts.batch import accumulation
from rules.checks.facts.layout import Placement, layout, nics
from rules.checks.facts.model import TRAINABLE_PARAMETERS, model_state_inputs, note_missing_formats
from rules.checks.facts.pointers import FABRIC, NCCL_TESTS_RUNS, SCALING_RUNS, TRAINING
from rules.checks.facts.throughput import throughput_facts
from rules.estimates import communication as collectives
from rules.estimates import interconnect
from rules.estimates import scaling as scaling_estimates
from rules.estimates.communication import StepCommunication
from rules.estimates.interconnect import Bandwidth, BusbwFractions, ComputeNetwork, IntraNodeLink
from rules.estimates.model_state import TrainedModel
from rules.estimates.nccl_tests import MeasuredBusbw, NcclTestsRun, measured_busbw
from rules.status import Basis
from rules.units import bytes_to_gb


def communication(ctx: Context, sharding: str | None = None) -> StepCommunication | None:
    """Returns the collectives of one optimizer step (all its micro-batches) under the submitted or given sharding.

    None when an input is missing; InconsistentInput for a layout the estimator refuses (fsdp-hybrid over
    part of a node).
    """
    plan = layout(ctx)
    parameters, precision, optimizer = model_state_inputs(ctx)
    note_missing_formats(ctx, precision, optimizer)
    split = accumulation(ctx)
    if plan is None or parameters is None or precision is None or optimizer is None or split is None:
        return None
    model = TrainedModel(parameters, ctx.num(TRAINABLE_PARAMETERS, parameters), precision, optimizer)
    return collectives.step_communication(model, plan, split.steps, ctx.setting("conventions.model_state_bytes"),
                                          sharding)


def bandwidth(ctx: Context) -> Bandwidth | None:
    """Returns the job's intra-node and cluster busbw: nccl-tests where measured, else nameplate × policy fractions."""
    return ctx.memo("communication.bandwidth", _bandwidth)


def _bandwidth(ctx: Context) -> Bandwidth | None:
    plan = layout(ctx)
    if plan is None:
        return None
    measured = _nccl_tests(ctx, plan)
    link = None
    if measured.node_busbw_gbs is None:
        nvlink = ctx.need(f"{plan.group}/gpu/nvlink_gbs")
        if nvlink is None:
            return None
        link = IntraNodeLink(nvlink) if nvlink > 0 else IntraNodeLink(0.0, *_pcie_generation(ctx, plan.group))
    network = None
    if plan.nodes != 1 and measured.cluster_busbw_gbs is None:
        compute_nics = nics(ctx, plan.group, "compute")
        if compute_nics.nics <= 0:
            ctx.reader.missing.append(f"{plan.group}/nics")
            return None
        network = ComputeNetwork(compute_nics.nics, compute_nics.gbps, ctx.num(f"{FABRIC}/link_gbps"),
                                 ctx.num(f"{FABRIC}/oversubscription", 1.0))
    fractions = BusbwFractions(nvlink=ctx.setting("interconnect.nvlink_busbw_fraction"),
                               pcie=ctx.setting("interconnect.pcie_busbw_fraction"),
                               nic=ctx.setting("interconnect.nic_busbw_fraction"))
    return interconnect.job_bandwidth(plan.nodes, plan.dp_ranks_per_node, plan.gpus_per_node, measured, link,
                                      network, fractions)


def bandwidth_evidence(links: Bandwidth) -> dict[str, Any]:
    return {"node_busbw_gbs": links.node_busbw_gbs, "cluster_busbw_gbs": links.cluster_busbw_gbs,
            "network_busbw_gbs": links.network_busbw_gbs, "busbw_bound_by": links.bound_by,
            "intra_node_link": links.intra_node_link, "bandwidth_source": links.source, "nodes": links.nodes}


def _pcie_generation(ctx: Context, group: str) -> tuple[int, str]:
    """Returns the GPU's PCIe generation from the catalogue, else the default generation, and where it came from."""
    model = ctx.get(f"{group}/gpu/model")
    spec = ctx.inputs.catalogue.gpu(model) if model else None
    if spec and spec.get("pcie_gen"):
        return int(spec["pcie_gen"]), f"catalogue {model}"
    return (interconnect.DEFAULT_PCIE_GENERATION,
            f"assumed Gen{interconnect.DEFAULT_PCIE_GENERATION}: GPU model not in the catalogue")


def _nccl_tests(ctx: Context, plan: Placement) -> MeasuredBusbw:
    """Returns what the recorded nccl-tests runs measured, inside a node and across the run nearest the job."""
    runs = []
    for index, _run in enumerate(ctx.inputs.get(NCCL_TESTS_RUNS) or []):
        base = f"{NCCL_TESTS_RUNS}/{index}"
        raw = ctx.get(f"{base}/raw", "")
        runs.append(NcclTestsRun(base, int(ctx.num(f"{base}/nodes", 1)), raw))
    return measured_busbw(runs, plan.nodes)


@dataclass(frozen=True)
class Scaling:
    """The job's scaling efficiency, whether a measurement or the step model decided it, and the terms."""

    efficiency: float
    basis: Basis
    evidence: dict[str, Any]


def applied_scaling(ctx: Context) -> Scaling | None:
    """Returns the scaling efficiency the schedule applies to the per-GPU rate.

    A rate measured at the quoted GPU count (``throughput.measured_at_gpus``) already includes that scale's
    data-parallel communication, so it is not reduced again (efficiency 1, basis measured); any other rate is
    scaled by the job's scaling efficiency (``scaling``). A rate measured at another count is scaled by the
    efficiency at the quoted count, which counts the communication of the smaller scale twice: conservative.
    """
    rate, scaled, plan = throughput_facts(ctx), scaling(ctx), layout(ctx)
    if rate is None or scaled is None or plan is None:
        return None
    if rate.measured_at_gpus == plan.gpus:
        return Scaling(1.0, Basis.MEASURED, {"efficiency": 1.0, "measured_at_gpus": rate.measured_at_gpus})
    return scaled


def scaling(ctx: Context) -> Scaling | None:
    """Returns the scaling efficiency: measured at the largest measured size (two or more points), else modelled."""
    return ctx.memo("communication.scaling", _scaling)


def _scaling(ctx: Context) -> Scaling | None:
    measured, unused = _measured_scaling(ctx)
    if measured is not None:
        return measured
    plan = layout(ctx)
    rate = throughput_facts(ctx)
    sequence_length = ctx.need(f"{TRAINING}/sequence_length")
    split = accumulation(ctx)
    links = bandwidth(ctx)
    step = communication(ctx)
    if None in (plan, rate, sequence_length, split, links, step):
        return None
    overlap = ctx.setting("interconnect.overlap_fraction")
    modelled = scaling_estimates.modelled_step(split.global_batch, int(sequence_length), rate.tokens_per_s_per_gpu,
                                               plan.gpus, step, links, overlap)
    result = modelled.scaling
    evidence = {
        "efficiency": result.efficiency, "compute_s_per_step": result.compute_s,
        "communication_s_per_step": result.communication_s,
        "exposed_communication_s_per_step": result.exposed_communication_s, "step_s": result.step_s,
        "overlap_fraction": overlap, "tokens_per_step": modelled.tokens, "accumulation_steps": split.steps,
        "comm_gb_per_step": bytes_to_gb(step.bus_bytes_per_gpu), "allreduce_equivalents": step.allreduce_equivalents,
        "sharding": step.strategy, "gpus": plan.gpus, "data_parallel": plan.data_parallel,
        "context_parallel": plan.context,
        "collectives": [{"kind": c.kind, "purpose": c.purpose, "size_gb": bytes_to_gb(c.size_bytes), "ranks": c.ranks,
                         "scope": c.scope, "times": c.times} for c in step.collectives],
        **rate.evidence(), **bandwidth_evidence(links),
    }
    if unused:
        evidence["measurements_not_used"] = unused
    return Scaling(result.efficiency, Basis.ESTIMATED, evidence)


def _measured_scaling(ctx: Context) -> tuple[Scaling | None, str]:
    """Returns the measured scaling (two or more GPU counts), or None and why measurements were not used."""
    points = []
    for index, _run in enumerate(ctx.inputs.get(SCALING_RUNS) or []):
        gpus = ctx.num(f"{SCALING_RUNS}/{index}/gpus")
        tokens_per_s = ctx.num(f"{SCALING_RUNS}/{index}/tokens_per_s")
        if gpus and tokens_per_s:
            points.append((int(gpus), tokens_per_s))
    measured, unused = scaling_estimates.measured_scaling(points)
    if measured is None:
        return None, unused
    base, largest = measured[0], measured[-1]
    plan = layout(ctx)
    return Scaling(largest.efficiency, Basis.MEASURED, {
        "efficiency": largest.efficiency, "measured_gpus": largest.gpus, "base_gpus": largest.base_gpus,
        "tokens_per_s_per_gpu_at_base": base.tokens_per_s_per_gpu,
        "tokens_per_s_per_gpu_at_largest": largest.tokens_per_s_per_gpu,
        "gpus": plan.gpus if plan else largest.gpus,
        "scaling_points": [{"gpus": p.gpus, "tokens_per_s": p.tokens_per_s, "efficiency": p.efficiency}
                           for p in measured],
    }), ""

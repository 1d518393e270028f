"""How the training job communicates: the collectives of one step, the bandwidths they reach, scaling efficiency."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from rules.artifacts import SCALING_CSV
from rules.checks.base import Context
from rules.checks.facts.artifacts import read_artifact, source
from rules.checks.facts.batch import accumulation
from rules.checks.facts.layout import layout, nics, training_group
from rules.checks.facts.model import architecture, model_state_inputs, note_missing_formats, trainable_parameters
from rules.checks.facts.nccl_runs import measured_bandwidth_evidence, measured_runs
from rules.checks.facts.step_model import not_modelled_reason
from rules.checks.facts.throughput import throughput_facts
from rules.errors import InconsistentInput
from rules.estimates.communication import collectives, interconnect
from rules.estimates.communication.collectives import StepCommunication
from rules.estimates.communication.interconnect import Bandwidth, BusbwFractions, ComputeNetwork, IntraNodeLink
from rules.estimates.communication.nccl_tests import NOT_MEASURED
from rules.estimates.memory.model_state import TrainedModel
from rules.estimates.model import batch
from rules.estimates.model.batch import Accumulation
from rules.estimates.model.layout import Layout, NotWholeReplicas, require_whole_replicas, resized
from rules.estimates.model.parameters import routed_expert_parameters
from rules.estimates.training_time import scaling as scaling_estimates
from rules.estimates.training_time.scaling import ModelledStep, ScalingPoint
from rules.job.cluster import QuotedGpu
from rules.job.fields import member_pointer
from rules.status import Basis
from rules.units import bytes_to_gb


def communication(ctx: Context, sharding: str | None = None, plan: Layout | None = None,
                  split: Accumulation | None = None) -> StepCommunication | None:
    """Returns the collectives of one optimizer step (all its micro-batches) under the submitted or given sharding.

    On the submitted layout and batch split, or on ``plan`` with ``split``. None when an input is missing;
    InconsistentInput for a layout the estimator refuses (fsdp-hybrid over part of a node). On the submitted
    layout and split the inputs are read once an evaluation, and each strategy's collectives are sized once.
    """
    if plan is None and split is None:
        submitted = ctx.memo(_submitted_inputs, reads_of_refusal=True)
        if submitted is None:
            return None
        strategy = sharding or submitted.plan.sharding
        steps = submitted.steps
        if strategy not in steps:  # a refusal keeps nothing, so it is raised again
            steps[strategy] = submitted.step(strategy)
        return steps[strategy]
    found = _step_inputs(ctx, plan, split)
    return None if found is None else found.step(sharding)


@dataclass
class _StepInputs:
    """What sizes a step's collectives: the layout, the trained model, the batch split, the model-state convention,
    and (for the submitted layout and split) the collectives sized so far, by strategy."""

    plan: Layout
    model: TrainedModel
    split: Accumulation
    convention: str
    routed: float = 0.0  # a mixture of experts' routed-expert parameters, reduced over their own ranks
    steps: dict[str, StepCommunication] = field(default_factory=dict)

    def step(self, sharding: str | None) -> StepCommunication:
        return collectives.step_communication(self.model, self.plan, self.split.steps, self.convention, sharding,
                                              self.routed)


def _submitted_inputs(ctx: Context) -> _StepInputs | None:
    return _step_inputs(ctx, None, None)


def _step_inputs(ctx: Context, plan: Layout | None, split: Accumulation | None) -> _StepInputs | None:
    """Returns the inputs of :func:`communication` on ``plan`` (else the submitted layout) with ``split`` (else the
    submitted one); None (noted missing) when one is missing."""
    plan = plan or layout(ctx)
    parameters, precision, optimizer = model_state_inputs(ctx)
    note_missing_formats(ctx, precision, optimizer)
    split = split or accumulation(ctx)
    if plan is None or parameters is None or precision is None or optimizer is None or split is None:
        return None
    model = TrainedModel(parameters, trainable_parameters(ctx), precision, optimizer)
    routed = 0.0
    if ctx.job.training.model.architecture.experts.count.value is not None:  # a mixture of experts
        shape = architecture(ctx)
        if shape is None:  # without its layers, hidden and heads (noted missing)
            return None
        routed = routed_expert_parameters(shape)
    return _StepInputs(plan, model, split, ctx.setting("conventions.model_state_bytes"), routed)


def bandwidth(ctx: Context, plan: Layout | None = None) -> Bandwidth | None:
    """Returns the job's intra-node and cluster busbw: nccl-tests where measured, else nameplate × policy fractions.

    For the submitted layout, or for ``plan`` (the same job on another number of GPUs and nodes).
    """
    if plan is not None:
        return _bandwidth(ctx, plan)
    return ctx.memo(_bandwidth)


def _bandwidth(ctx: Context, plan: Layout | None = None) -> Bandwidth | None:
    plan = plan or layout(ctx)
    if plan is None:
        return None
    measured = measured_runs(ctx, plan)
    link = _intra_node_link(ctx, needed=measured.node_busbw_gbs is None)
    network = _compute_network(ctx, plan, needed=plan.nodes != 1 and measured.cluster_busbw_gbs is None)
    if (link is None and measured.node_busbw_gbs is None) or (
            plan.nodes != 1 and network is None and measured.cluster_busbw_gbs is None):
        return None
    fractions = BusbwFractions(nvlink=ctx.setting("interconnect.nvlink_busbw_fraction"),
                               pcie=ctx.setting("interconnect.pcie_busbw_fraction"),
                               nic=ctx.setting("interconnect.nic_busbw_fraction"))
    links = interconnect.job_bandwidth(plan.nodes, plan.dp_ranks_per_node, plan.gpus_per_node, measured, link,
                                       network, fractions)
    if measured.measured and link is not None and (plan.nodes == 1 or network is not None):
        estimate = interconnect.job_bandwidth(plan.nodes, plan.dp_ranks_per_node, plan.gpus_per_node, NOT_MEASURED,
                                              link, network, fractions)
        links = replace(links, estimate=estimate)
    return links


def _intra_node_link(ctx: Context, needed: bool) -> IntraNodeLink | None:
    """Returns how the node's GPUs reach each other; None (noted missing when ``needed``) without the NVLink figure."""
    gpu = training_group(ctx).gpu
    nvlink = ctx.needed(gpu.nvlink_gbs) if needed else ctx.value(gpu.nvlink_gbs)
    if nvlink is None:
        return None
    return IntraNodeLink(nvlink) if nvlink > 0 else IntraNodeLink(0.0, *_pcie_generation(ctx, gpu))


def _compute_network(ctx: Context, plan: Layout, needed: bool) -> ComputeNetwork | None:
    """Returns the node's compute NICs and fabric; None (noted missing when ``needed``) without compute NICs."""
    if plan.nodes == 1:
        return None
    group = training_group(ctx)
    compute_nics = nics(ctx, group, "compute")
    if compute_nics.nics <= 0:
        if needed:
            ctx.reader.missing.append(member_pointer(group, "nics"))
        return None
    fabric = ctx.job.cluster.fabric
    return ComputeNetwork(compute_nics.nics, compute_nics.gbps, ctx.value(fabric.link_gbps),
                          ctx.value(fabric.oversubscription))


def bandwidth_evidence(links: Bandwidth) -> dict[str, Any]:
    """Returns the job's bandwidths for the record, the nccl-tests runs and the nameplate estimate beside them."""
    evidence = {"node_busbw_gbs": links.node_busbw_gbs, "cluster_busbw_gbs": links.cluster_busbw_gbs,
                "network_busbw_gbs": links.network_busbw_gbs, "busbw_bound_by": links.bound_by,
                "intra_node_link": links.intra_node_link, "bandwidth_source": links.source, "nodes": links.nodes}
    return {**evidence, **measured_bandwidth_evidence(links)}


def _pcie_generation(ctx: Context, gpu: QuotedGpu) -> tuple[int, str]:
    """Returns the GPU's PCIe generation from the catalogue, else the default generation, and where it came from."""
    model = ctx.value(gpu.model)
    spec = ctx.inputs.catalogue.gpu(model) if model else None
    if spec and spec.get("pcie_gen"):
        return int(spec["pcie_gen"]), f"catalogue {model}"
    return (interconnect.DEFAULT_PCIE_GENERATION,
            f"assumed Gen{interconnect.DEFAULT_PCIE_GENERATION}: GPU model not in the catalogue")


@dataclass(frozen=True)
class Scaling:
    """The job's scaling efficiency, whether a measurement or the step model decided it, and the terms."""

    efficiency: float
    basis: Basis
    evidence: dict[str, Any]

    def schedule_evidence(self) -> dict[str, Any]:
        """Returns what a schedule reports of the efficiency it applies: the value, its basis, and for a rate
        carried from another scale the efficiencies at both scales."""
        out = {"efficiency": self.efficiency, "efficiency_basis": self.evidence.get("efficiency_basis",
                                                                                    self.basis.value)}
        out.update({name: self.evidence[name] for name in ("efficiency_at_measured_scale",
                                                            "efficiency_at_quoted_scale") if name in self.evidence})
        return out


def applied_scaling(ctx: Context) -> Scaling | None:
    """Returns the scaling efficiency the schedule applies to the per-GPU rate, in this order of precedence.

    1. A stated rate measured at the quoted GPU count (``throughput.measured_at_gpus``) already includes that
       scale's data-parallel communication, so it is not reduced again: efficiency 1, basis measured.
    2. A stated rate measured at another count m is carried to the quoted count n by E(n) / E(m)
       (:func:`rules.estimates.training_time.scaling.extrapolated_efficiency`), so that the communication of the
       measured
       scale is replaced, not counted twice: from ``measurements.scaling`` when it has a point at both counts
       (basis measured), else from the modelled step (``rules.estimates.training_time.scaling.modelled_step``) of the
       submitted layout at both scales, each rank keeping its batch (basis estimated). The ratio exceeds 1
       when the rate was measured on more GPUs than quoted.
    3. Any other rate (no ``measured_at_gpus``, or the modelled one) is scaled by the job's scaling efficiency
       (:func:`scaling`: measured at the largest measured size with two or more points, else modelled; a mixture of
       experts' is not modelled, so without measurements its rate needs ``measured_at_gpus``, noted missing).

    InconsistentInput naming ``measured_at_gpus`` when it is not a whole number of the layout's model
    replicas (tensor × pipeline × context GPUs): the rate cannot have been measured with this layout.
    """
    rate, scaled, plan = throughput_facts(ctx), scaling(ctx), layout(ctx)
    if rate is None or plan is None:
        return None
    measured_at = rate.measured_at_gpus
    if measured_at == plan.gpus:  # whether or not the step can be modelled (a mixture of experts cannot yet)
        return Scaling(1.0, Basis.MEASURED, {"efficiency": 1.0, "measured_at_gpus": measured_at})
    if scaled is None:
        if not_modelled_reason(ctx) is not None:  # a rate measured at the quoted scale would do
            ctx.needed(ctx.job.training.throughput.measured_at_gpus)
        return None
    if measured_at is None:
        return scaled
    try:
        require_whole_replicas(measured_at, plan.tensor, plan.pipeline, plan.context)
    except NotWholeReplicas as error:
        stated = ctx.job.training.throughput.measured_at_gpus.pointer
        raise InconsistentInput(f"{stated}: {error}, so the stated rate cannot have been "
                                f"measured with the submitted layout") from None
    points, unused = _scaling_points(ctx)
    at_scale = {point.gpus: point for point in points or ()}
    if measured_at in at_scale and plan.gpus in at_scale:
        return _carried(at_scale[plan.gpus].efficiency, at_scale[measured_at].efficiency, Basis.MEASURED,
                        f"measured ratio from {measured_at:,} to {plan.gpus:,} GPUs ({_scaling_member(ctx)})", {})
    quoted = _modelled(ctx)
    if quoted is None:
        return None
    elsewhere = resized(plan, measured_at)
    measured = _modelled(ctx, elsewhere, batch.per_rank_global_batch(quoted.split, elsewhere.data_parallel))
    if measured is None:
        return None
    evidence = {**_modelled_evidence(ctx, plan, quoted), "measured_scale_nodes": elsewhere.nodes,
                "measured_scale_global_batch": measured.split.global_batch,
                "measured_scale_exposed_communication_s_per_step":
                    measured.modelled.scaling.exposed_communication_s}
    if points is not None or unused:
        evidence["measurements_not_used"] = unused or (f"measurements.scaling has no point at both {measured_at:,} "
                                                       f"and {plan.gpus:,} GPUs")
    return _carried(quoted.modelled.scaling.efficiency, measured.modelled.scaling.efficiency, Basis.ESTIMATED,
                    f"modelled ratio from {measured_at:,} to {plan.gpus:,} GPUs", evidence)


def unmodelled_scaling(ctx: Context) -> str | None:
    """Returns why the job's scaling efficiency cannot be modelled whatever its inputs (a mixture of experts), noting
    ``measurements.scaling`` missing; None when it can."""
    reason = not_modelled_reason(ctx)
    if reason is not None:
        ctx.reader.missing.append(member_pointer(ctx.job.measurements, "scaling"))
    return reason


def _carried(at_quoted: float, at_measured: float, basis: Basis, words: str, evidence: dict[str, Any]) -> Scaling:
    """Returns the efficiency that carries a rate from the scale it was measured at to the quoted one."""
    ratio = scaling_estimates.extrapolated_efficiency(at_quoted, at_measured)
    return Scaling(ratio, basis, {**evidence, "efficiency": ratio, "efficiency_basis": words,
                                  "efficiency_at_measured_scale": at_measured,
                                  "efficiency_at_quoted_scale": at_quoted})


def scaling(ctx: Context) -> Scaling | None:
    """Returns the scaling efficiency: measured at the largest measured size (two or more points), else modelled."""
    return ctx.memo(_scaling)


def _scaling(ctx: Context) -> Scaling | None:
    measured, unused = _measured_scaling(ctx)
    if measured is not None:
        return measured
    plan = layout(ctx)
    modelled = _modelled(ctx)
    if plan is None or modelled is None:
        return None
    evidence = _modelled_evidence(ctx, plan, modelled)
    if unused:
        evidence["measurements_not_used"] = unused
    return Scaling(modelled.modelled.scaling.efficiency, Basis.ESTIMATED, evidence)


@dataclass(frozen=True)
class _Modelled:
    """One modelled step of the job on a layout: its scaling, collectives, links and batch split."""

    modelled: ModelledStep
    step: StepCommunication
    links: Bandwidth
    split: Accumulation


def _modelled(ctx: Context, plan: Layout | None = None, global_batch: int | None = None) -> _Modelled | None:
    """Returns the modelled step on the submitted layout, or on ``plan`` with ``global_batch`` sequences per step.

    The per-GPU rate is the job's (stated or modelled) on either layout: a rate measured at scale stands for the
    compute rate at both, to first order, as it does for the efficiency at the quoted scale alone. None when an
    input is missing; each is noted. None, noting nothing, for a mixture of experts: its expert-parallel all-to-all
    is not modelled (rules/checks/facts/step_model.py ``not_modelled_reason``).
    """
    if not_modelled_reason(ctx) is not None:
        return None
    submitted = plan is None
    plan = plan or layout(ctx)
    rate = throughput_facts(ctx)
    sequence_length = ctx.needed(ctx.job.training.sequence_length)
    split = accumulation(ctx, plan=plan, global_batch=global_batch)
    links = bandwidth(ctx) if submitted else bandwidth(ctx, plan)
    # On the submitted layout the split is the submitted one: its collectives are those the sharding check sized.
    step = communication(ctx) if submitted and global_batch is None else communication(ctx, plan=plan, split=split)
    if plan is None or rate is None or sequence_length is None or split is None or links is None or step is None:
        return None
    modelled = scaling_estimates.modelled_step(split.global_batch, int(sequence_length), rate.tokens_per_s_per_gpu,
                                               plan.gpus, step, links, ctx.setting("interconnect.overlap_fraction"))
    return _Modelled(modelled, step, links, split)


def _modelled_evidence(ctx: Context, plan: Layout, found: _Modelled) -> dict[str, Any]:
    """Returns the evidence of a modelled step: its times, collectives, links and the rate it ran at."""
    result, step, split = found.modelled.scaling, found.step, found.split
    rate = throughput_facts(ctx)
    return {
        "efficiency": result.efficiency, "compute_s_per_step": result.compute_s,
        "communication_s_per_step": result.communication_s,
        "exposed_communication_s_per_step": result.exposed_communication_s, "step_s": result.step_s,
        "overlap_fraction": ctx.setting("interconnect.overlap_fraction"), "tokens_per_step": found.modelled.tokens,
        "accumulation_steps": split.steps, "comm_gb_per_step": bytes_to_gb(step.bus_bytes_per_gpu),
        "allreduce_equivalents": step.allreduce_equivalents, "sharding": step.strategy, "gpus": plan.gpus,
        "data_parallel": plan.data_parallel, "context_parallel": plan.context,
        "collectives": [{"kind": c.kind, "purpose": c.purpose, "size_gb": bytes_to_gb(c.size_bytes), "ranks": c.ranks,
                         "scope": c.scope, "times": c.times} for c in step.collectives],
        **(rate.evidence() if rate is not None else {}), **bandwidth_evidence(found.links),
    }


def _scaling_points(ctx: Context) -> tuple[list[ScalingPoint] | None, str]:
    """Returns the measured scaling points (two or more GPU counts) with their efficiencies, or None and why not.

    From ``measurements.scaling_csv`` where given (the runs as exported, replacing the retyped
    ``measurements.scaling``), else from ``measurements.scaling``.
    """
    parsed = read_artifact(ctx, SCALING_CSV)
    if parsed is not None:
        return scaling_estimates.measured_scaling([(p["gpus"], p["tokens_per_s"]) for p in parsed["points"]])
    points = []
    for run in ctx.job.measurements.scaling:
        gpus = ctx.value(run.gpus)
        tokens_per_s = ctx.value(run.tokens_per_s)
        if gpus and tokens_per_s:
            points.append((int(gpus), tokens_per_s))
    return scaling_estimates.measured_scaling(points)


def _measured_scaling(ctx: Context) -> tuple[Scaling | None, str]:
    """Returns the measured scaling (two or more GPU counts), or None and why measurements were not used."""
    measured, unused = _scaling_points(ctx)
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
        **_scaling_source(ctx),
    }), ""


def _scaling_member(ctx: Context) -> str:
    """Returns the submission member the measured scaling points came from."""
    return "measurements.scaling_csv" if ctx.get(SCALING_CSV.pointer) is not None else "measurements.scaling"


def _scaling_source(ctx: Context) -> dict[str, Any]:
    """Returns where the measured scaling points came from, and the retyped ones a CSV replaced."""
    if ctx.get(SCALING_CSV.pointer) is None:
        return {}
    words = {"measurement_source": source(SCALING_CSV)}
    if ctx.job.measurements.scaling:
        words["measurements_not_used"] = "measurements.scaling: measurements.scaling_csv replaces it"
    return words

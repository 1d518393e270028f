"""interconnect-scaling: communication leaves the job its scaling efficiency, measured or modelled per step."""

from __future__ import annotations

from rules.checks.base import Check, Context, Facts, Passing, Rule
from rules.checks.facts.communication import scaling, unmodelled_scaling
from rules.checks.facts.nccl_runs import REFERENCE_FIGURES
from rules.estimates.communication.interconnect import MEASURED_BOUND
from rules.status import Basis, Status

_REMEDY = ("Quote more or faster compute NICs (one 400 Gb/s NIC per GPU), a non-blocking fabric, or NVLink GPUs; "
           "reduce communication (fsdp-hybrid or zero1/zero2 instead of zero3, a larger micro-batch, fewer "
           "accumulation steps under zero3/FSDP); or run fewer GPUs at higher efficiency. Then run scaling tests at "
           "two or more GPU counts (measurements.scaling) before buying the next tier.")


class InterconnectScaling(Check):
    id = "interconnect-scaling"
    title = "Size interconnect from scaling efficiency"
    plan_item = "Size interconnect from scaling efficiency"
    thresholds = {"min_scaling_efficiency": "interconnect.min_scaling_efficiency",
                  "warn_scaling_efficiency": "interconnect.warn_scaling_efficiency",
                  "min_node_reference_fraction": "interconnect.min_node_reference_fraction",
                  "min_cluster_reference_fraction": "interconnect.min_cluster_reference_fraction"}
    headline = "scaling efficiency {efficiency:.1%} ({decided_by})"
    rules = (
        Rule(Status.FAIL, "below-minimum", lambda m: m.efficiency < m.min_scaling_efficiency,
             "scaling efficiency {efficiency:.1%} is below the minimum {min_scaling_efficiency:.0%}; {detail}",
             _REMEDY),
        Rule(Status.WARN, "below-target", lambda m: m.efficiency < m.warn_scaling_efficiency,
             "scaling efficiency {efficiency:.1%} is above the minimum {min_scaling_efficiency:.0%} but below "
             "{warn_scaling_efficiency:.0%}; {detail}",
             _REMEDY),
        # A delivered system whose nccl-tests fall far below what its quoted links should deliver is faulty or
        # misconfigured, whether or not this workload hides its communication: the next workload may not.
        Rule(Status.WARN, "below-reference",
             lambda m: (m.node_reference_fraction < m.min_node_reference_fraction)
             | (m.cluster_reference_fraction < m.min_cluster_reference_fraction),
             "the delivered links measure below what the quoted ones should deliver: {reference_detail} (at least "
             "{min_node_reference_fraction:.0%} inside a node and {min_cluster_reference_fraction:.0%} across nodes "
             "accepted); scaling "
             "efficiency {efficiency:.1%} is enough for this job only because it hides its communication; {detail}",
             "Have the vendor find the fault before acceptance (GPUDirect RDMA off, a NIC or cable down or at a lower "
             "rate, NCCL on the wrong interfaces, a switch misconfigured) and rerun nccl-tests all_reduce_perf up to "
             "8 GiB on the same nodes; accept when the large-message bus bandwidth is within the policy's share of "
             "the reference."),
    )
    passing = Passing("efficient",
                      "scaling efficiency {efficiency:.1%} (at least {warn_scaling_efficiency:.0%}); {detail}")

    def gather(self, ctx: Context) -> Facts:
        if not ctx.job.trains:
            return ctx.not_applicable("the submission has no training workload")
        result = scaling(ctx)
        if result is None:
            return ctx.insufficient(unmodelled_scaling(ctx) or "the step cannot be modelled without its throughput, "
                                    "batch shape and links; or give two or more measurements.scaling points")
        evidence = dict(result.evidence)
        if result.basis is Basis.MEASURED:
            evidence["decided_by"] = f"measured at {evidence['measured_gpus']} GPUs"
            reach = ("" if evidence["measured_gpus"] >= evidence["gpus"] else
                     f"; the job uses {evidence['gpus']} GPUs, beyond the largest measurement, so measure there too")
            evidence["detail"] = (
                f"measured {evidence['tokens_per_s_per_gpu_at_largest']:,.0f} tokens/s per GPU at "
                f"{evidence['measured_gpus']} GPUs against {evidence['tokens_per_s_per_gpu_at_base']:,.0f} at "
                f"{evidence['base_gpus']}{reach}")
            if evidence.get("measurement_source"):
                evidence["detail"] += f" ({evidence['measurement_source']})"
            if evidence.get("measurements_not_used"):
                evidence["detail"] += f"; not used: {evidence['measurements_not_used']}"
        else:
            evidence["decided_by"] = "modelled"
            evidence["detail"] = _modelled_detail(evidence)
            if evidence.get("measurements_not_used"):
                evidence["detail"] += f"; {evidence['measurements_not_used']}"
        evidence["reference_detail"] = _reference_detail(evidence)
        unjudged = frozenset(name for name in REFERENCE_FIGURES if evidence.get(name) is None)
        return Facts(evidence=evidence, basis=result.basis, unjudged=unjudged)


def _reference_detail(e: dict) -> str:
    parts = [f"{e[peak]:,.1f} GB/s peak busbw {where}, {e[fraction]:.0%} of the {e[reference]:,.1f} GB/s its "
             "nameplates give"
             for peak, reference, fraction, where in (
                 ("measured_peak_node_busbw_gbs", "estimated_node_busbw_gbs", "node_reference_fraction",
                  "inside a node"),
                 ("measured_peak_cluster_busbw_gbs", "estimated_cluster_busbw_gbs", "cluster_reference_fraction",
                  "across nodes"))
             if e.get(fraction) is not None]
    return "; ".join(parts) or "no nccl-tests run recorded"


def _modelled_detail(e: dict) -> str:
    network = (f", network tier {e['network_busbw_gbs']:.0f} GB/s" if e.get("network_busbw_gbs") is not None else "")
    bound = "measured" if e["busbw_bound_by"] == MEASURED_BOUND else f"bound by the {e['busbw_bound_by']} tier"
    if e.get("estimated_cluster_busbw_gbs") is not None:
        bound += (f"; nameplates would give {e['estimated_node_busbw_gbs']:.0f} GB/s in a node and "
                  f"{e['estimated_cluster_busbw_gbs']:.0f} GB/s across the job")
    return (f"modelled step on {e['gpus']} GPUs ({e['nodes']} nodes): compute {e['compute_s_per_step']:.2f} s, "
            f"{e['sharding']} communication {e['communication_s_per_step']:.2f} s ({e['comm_gb_per_step']:,.1f} GB per "
            f"GPU per optimizer step of {e['accumulation_steps']} micro-batches), {e['overlap_fraction']:.0%} of "
            f"compute overlappable, "
            f"{e['exposed_communication_s_per_step']:.2f} s exposed; busbw {e['node_busbw_gbs']:.0f} GB/s in a node "
            f"({e['intra_node_link']}), {e['cluster_busbw_gbs']:.0f} GB/s across the job{network} "
            f"({bound}); bandwidths from {e['bandwidth_source']}; throughput "
            f"{e['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU from {e['throughput_from']}, taken as one model "
            f"replica's rate (tensor and pipeline communication inside it) before data-parallel communication")

"""peak-memory: one training step fits in a GPU's memory with the policy's headroom."""

from __future__ import annotations

from rules.checks.base import CAPACITY_PLANNING_GUIDE, Check, Context, Facts, Passing, Rule
from rules.checks.facts.gpu_context import training_cuda_context
from rules.checks.facts.layout import training_group
from rules.checks.facts.memory import measured_peak, memory_estimate, memory_evidence
from rules.estimates.ratios import fraction_of, spare_fraction
from rules.status import Basis, Status

# The capacity-planning guide's rough rule (2 + 2 + 8 bytes/param) that this check corrects.
SEED_RULE_BYTES_PER_PARAM = 12

_WHY = ("model state {model_state_bytes_per_param:g} B/param under the {convention} convention "
        "({model_state_total_gb:,.1f} GB for the model, {model_state_gb_per_gpu:,.3f} GB per GPU under {sharding}), "
        "activations under the {activation_convention} convention at {activation_bytes_per_element:g} B per element"
        "{offload_note}{seed_note}")


class PeakMemory(Check):
    id = "peak-memory"
    title = "Measure peak accelerator memory"
    plan_item = "Measure peak accelerator memory"
    thresholds = {"headroom_fraction": "memory.headroom_fraction",
                  "warn_headroom_fraction": "memory.warn_headroom_fraction"}
    headline = "{total_gib:.1f} GiB of {usable_gib:.1f} GiB usable per GPU"
    rules = (
        Rule(Status.FAIL, "exceeds-usable-memory", lambda m: m.total_gib > m.usable_gib,
             "{decided_by} peak {total_gib:.1f} GiB per GPU exceeds the usable {usable_gib:.1f} GiB "
             "({capacity_gib:.1f} GiB less {headroom_fraction:.0%} headroom); " + _WHY,
             "Shard more (zero3/fsdp-full), add tensor or pipeline parallelism, enable activation "
             "checkpointing or a smaller micro-batch, or quote GPUs with more memory."),
        Rule(Status.WARN, "little-headroom", lambda m: m.spare_fraction < m.warn_headroom_fraction,
             "{decided_by} peak {total_gib:.1f} GiB per GPU fits the usable {usable_gib:.1f} GiB with less than "
             "{warn_headroom_fraction:.0%} to spare; " + _WHY,
             "Measure peak allocated and reserved memory on a representative step before buying; a longer "
             "sequence or a framework upgrade can tip it over."),
    )
    passing = Passing("fits",
                      "{decided_by} peak {total_gib:.1f} GiB per GPU fits the usable {usable_gib:.1f} GiB; " + _WHY)

    def gather(self, ctx: Context) -> Facts:
        if not ctx.job.trains:
            return ctx.not_applicable("the submission has no training workload")
        estimate = memory_estimate(ctx)
        if estimate is None:
            return ctx.insufficient("model state cannot be sized")
        counting = estimate.activation_counting
        evidence = {**memory_evidence(estimate), "sharding": estimate.sharding, "convention": estimate.convention,
                    "activation_convention": counting.convention,
                    "activation_bytes_per_element": counting.element_bytes,
                    "decided_by": "estimated", "seed_rule_bytes_per_param": SEED_RULE_BYTES_PER_PARAM,
                    "cuda_context_source": training_cuda_context(ctx, training_group(ctx)).source}
        missing_shape = list(ctx.missing)
        if estimate.activations_bytes is None:
            # Model state alone already decides a failure; otherwise the activations are needed.
            if estimate.total_bytes <= estimate.usable_bytes:
                return ctx.insufficient("activations cannot be estimated without the architecture and batch shape",
                                        **evidence)
            ctx.missing.clear()
            evidence["lower_bound_without"] = ", ".join(missing_shape)
            evidence["decided_by"] = "model state alone (a lower bound)"
        evidence["seed_note"] = _seed_note(estimate.state.total_bytes_per_param,
                                           estimate.state.master_weights_bytes_per_param)
        evidence["offload"] = ctx.value(ctx.job.training.parallelism.offload)
        evidence["offload_note"] = _offload_note(evidence["offload"], evidence["host_offload_gib"])
        basis = Basis.ESTIMATED
        measured = measured_peak(ctx, estimate.micro_batch)
        if measured is not None:
            estimated_gib = evidence["total_gib"]
            evidence.update(estimated_total_gib=estimated_gib, measured_total_gib=measured.gib,
                            measured_to_estimated_ratio=fraction_of(measured.gib, estimated_gib),
                            total_gib=measured.gib, decided_by=f"measured {measured.figure}",
                            spare_fraction=spare_fraction(measured.gib, evidence["usable_gib"]),
                            measurement_source=measured.source)
            basis = Basis.MEASURED
        return Facts(evidence=evidence, basis=basis)


def _offload_note(offload: str, host_offload_gib: float) -> str:
    if host_offload_gib <= 0:
        return ""
    return (f"; offload {offload} keeps {host_offload_gib:,.1f} GiB of each rank's model state in host memory "
            "(host-ram sizes the node)")


def _seed_note(bytes_per_param: float, master_bytes: float) -> str:
    if master_bytes <= 0 or bytes_per_param <= SEED_RULE_BYTES_PER_PARAM:
        return ""
    return (f"; the rough {SEED_RULE_BYTES_PER_PARAM} B/param rule of the capacity-planning guide "
            f"(\"{CAPACITY_PLANNING_GUIDE}\") undercounts because "
            f"it omits the {master_bytes:g} B/param fp32 master weights that mixed-precision optimizers keep")


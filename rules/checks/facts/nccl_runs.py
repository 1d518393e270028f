"""The recorded nccl-tests runs as the bandwidth facts read them: parsed, read at the job's gradient message size."""

from __future__ import annotations

from typing import Any

from rules.artifacts import NCCL_TESTS
from rules.checks.base import Context
from rules.checks.facts.artifacts import read_artifact, source
from rules.checks.facts.model import architecture, trainable_parameters
from rules.estimates.communication import collectives
from rules.estimates.communication.interconnect import Bandwidth
from rules.estimates.communication.nccl_tests import (
    NOT_MEASURED,
    GradientBuckets,
    GradientMessage,
    MeasuredBusbw,
    NcclTestsRow,
    NcclTestsRun,
    gradient_message,
    measured_busbw,
    reference_fraction,
)
from rules.estimates.memory.comm_buffers import framework_of
from rules.estimates.memory.model_state import TrainedModel, model_state_bytes_per_param
from rules.estimates.model.layout import Layout


def measured_runs(ctx: Context, plan: Layout) -> MeasuredBusbw:
    """Returns what the recorded nccl-tests runs measured, inside a node and across the run nearest the job.

    Each run is read at the message size of the job's gradient collectives (:func:`_gradient_message`) where the
    model is known, else at its peak.
    """
    runs = []
    for run in ctx.job.measurements.nccl_tests:
        collective = ctx.value(run.collective)
        parsed = read_artifact(ctx, NCCL_TESTS, run.raw.pointer, collective)
        if parsed is None:
            continue
        rows = tuple(NcclTestsRow(row["size_bytes"], row["out_of_place"]["busbw_gbs"], row["in_place"]["busbw_gbs"])
                     for row in parsed["rows"])
        runs.append(NcclTestsRun(run.raw.pointer, int(ctx.value(run.nodes)), rows, parsed["collective"],
                                 parsed["avg_busbw_gbs"]))
    if not runs:
        return NOT_MEASURED
    return measured_busbw(runs, plan.nodes, _gradient_message(ctx, plan))


def _gradient_message(ctx: Context, plan: Layout) -> GradientMessage | None:
    """Returns the size of the job's gradient collectives; None, noting nothing missing, without the model."""
    training = ctx.job.training
    parameters = ctx.value(training.model.parameters)
    precision, optimizer = ctx.value(training.precision), ctx.value(training.optimizer)
    if parameters is None or precision is None or optimizer is None:
        return None
    convention = ctx.setting("conventions.model_state_bytes")
    model = TrainedModel(parameters, trainable_parameters(ctx), precision, optimizer)
    step = collectives.step_communication(model, plan, 1, convention)
    stated_shape = training.model.architecture
    stated = all(ctx.value(given) is not None
                 for given in (stated_shape.layers, stated_shape.hidden, stated_shape.heads))
    buckets = GradientBuckets(framework=framework_of(plan.sharding, convention), gradient_bytes=step.gradient_bytes,
                              working_bytes_per_param=model_state_bytes_per_param(precision, optimizer,
                                                                                  convention).weights_bytes_per_param,
                              data_parallel_ranks=plan.shard_ranks, model_shape=architecture(ctx) if stated else None,
                              tensor_parallel=plan.tensor)
    return gradient_message(buckets)


def measured_bandwidth_evidence(links: Bandwidth) -> dict[str, Any]:
    """Returns what the nccl-tests runs behind ``links`` measured, and the nameplate estimate beside it ({} if none)."""
    measured = links.measured
    if not measured.measured:
        return {}
    runs = [run for run in (measured.node_run, measured.cluster_run) if run is not None]
    evidence = {
        "bandwidth_basis": "measured",
        "measurement_source": "; ".join(
            f"{source(NCCL_TESTS, run.name)}, {run.collective or 'collective not named'}, {run.nodes} node(s)"
            for run in runs),
        "measured_node_busbw_gbs": measured.node_busbw_gbs,
        "measured_cluster_busbw_gbs": measured.cluster_busbw_gbs,
        "nccl_avg_busbw_gbs": [run.avg_busbw_gbs for run in runs],
        "nccl_message_bytes": measured.message.size_bytes if measured.message else None,
        "nccl_message_from": measured.message.set_by if measured.message else "each run's peak busbw",
    }
    if links.estimate is not None:
        evidence.update(estimated_node_busbw_gbs=links.estimate.node_busbw_gbs,
                        estimated_cluster_busbw_gbs=links.estimate.cluster_busbw_gbs,
                        estimated_bandwidth_source=links.estimate.source)
    return {**evidence, **reference_evidence(links)}


# What the delivered links measured against what the quoted ones should deliver (interconnect-scaling's
# below-reference); None where a run or the nameplate estimate is missing.
REFERENCE_FIGURES = ("measured_peak_node_busbw_gbs", "node_reference_fraction", "measured_peak_cluster_busbw_gbs",
                     "cluster_reference_fraction")


def reference_evidence(links: Bandwidth) -> dict[str, Any]:
    """Returns each measured run's peak busbw and its share of the nameplate estimate of the same links."""
    estimate, measured = links.estimate, links.measured
    node = reference_fraction(measured.node_run, estimate.node_busbw_gbs if estimate else None)
    cluster = reference_fraction(measured.cluster_run, estimate.cluster_busbw_gbs if estimate else None)
    return dict(zip(REFERENCE_FIGURES, (*node, *cluster), strict=True))

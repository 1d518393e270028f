"""Checkpoints, failures and goodput of the training job: what several checks share about its reliability.

Checkpoint size and save time (checkpoint-bandwidth, host-ram, restart-behavior), the job's MTBF and the
first-order goodput (restart-behavior, time-to-result) are memoised per evaluation, so the checks agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rules.artifacts import FIO
from rules.checks.base import Context
from rules.checks.facts.artifacts import read_artifact, source
from rules.checks.facts.layout import layout, nics, training_group
from rules.checks.facts.model import model_state_inputs, note_missing_formats, trainable_parameters
from rules.estimates.reliability import checkpoint
from rules.estimates.reliability import failures as reliability
from rules.job.fields import member_pointer
from rules.status import Basis, FigureFrom, Source
from rules.units import bytes_to_gb, h_to_s, min_to_s, s_to_min


# ---- checkpoints -----------------------------------------------------------------------------------
def checkpoint_size_facts(ctx: Context) -> checkpoint.CheckpointSize | None:
    """Returns the size of one resumable checkpoint of the job (weights, optimizer state, gradients if saved)."""
    return ctx.memo(_checkpoint_size)


def _checkpoint_size(ctx: Context) -> checkpoint.CheckpointSize | None:
    parameters, precision, optimizer = model_state_inputs(ctx)
    note_missing_formats(ctx, precision, optimizer)
    if parameters is None or precision is None or optimizer is None:
        return None
    training = ctx.job.training
    return checkpoint.training_checkpoint_size(
        parameters, precision, optimizer,
        trainable_parameters=trainable_parameters(ctx),
        save_gradients=bool(ctx.value(training.checkpoint.include_gradients)),
        # An adapter run saves the adapter and its optimizer state; the frozen base is re-read from its files.
        save_frozen_weights=ctx.value(training.objective) != "adapter",
        convention=ctx.setting("conventions.model_state_bytes"))


@dataclass(frozen=True)
class CheckpointFacts:
    """One checkpoint of the job: its size and how long all nodes take to write it."""

    size: checkpoint.CheckpointSize
    save: checkpoint.CheckpointSave
    storage_write_gbs: float  # measured, else quoted nameplate (before the write efficiency)
    write_efficiency: float  # applied to a quoted figure; 1 for a measured one
    basis: Basis
    storage_path: str
    nodes: int
    include_gradients: bool
    measured_from: str | None = None  # the measurement's source, when a measurement gave the write bandwidth
    estimate: checkpoint.CheckpointSave | None = None  # the save at the quoted write bandwidth, beside a measured one
    quoted_write_gbs: float | None = None
    not_used: str = ""  # a storage measurement that gave no write figure, and why

    @property
    def checkpoint_gb(self) -> float:
        return self.size.total_gb

    @property
    def save_s(self) -> float:
        return self.save.save_s

    def evidence(self) -> dict[str, Any]:
        """Returns checkpoint-bandwidth's stable names (checkpoint_gb, save_s) and the breakdown behind them."""
        return {
            "checkpoint_gb": self.checkpoint_gb,
            "checkpoint_weights_gb": bytes_to_gb(self.size.weights_bytes),
            "checkpoint_master_weights_gb": bytes_to_gb(self.size.master_weights_bytes),
            "checkpoint_optimizer_gb": bytes_to_gb(self.size.optimizer_bytes),
            "checkpoint_gradients_gb": bytes_to_gb(self.size.gradients_bytes),
            "checkpoint_bytes_per_param": self.size.bytes_per_parameter,
            "include_gradients": self.include_gradients,
            "save_s": self.save_s,
            "write_gbs": self.save.write_gbs,
            "storage_write_gbs": self.storage_write_gbs,
            "write_efficiency": self.write_efficiency,
            "storage_write_from": FigureFrom.MEASURED if self.basis is Basis.MEASURED else FigureFrom.QUOTED,
            "node_nics_gbs": self.save.node_nics_gbs,
            "storage_path": self.storage_path,
            "writing_nodes": self.nodes,
            "save_bound_by": self.save.bound_by,
            **self._measured_evidence(),
        }

    def _measured_evidence(self) -> dict[str, Any]:
        """Returns the measurement's source and the quoted estimate beside it ({} for a quoted figure alone)."""
        evidence: dict[str, Any] = {"storage_measurement_not_used": self.not_used} if self.not_used else {}
        if self.measured_from is None:
            return evidence
        evidence["measurement_source"] = self.measured_from
        if self.estimate is not None:
            evidence.update(quoted_storage_write_gbs=self.quoted_write_gbs, estimated_save_s=self.estimate.save_s,
                            estimated_write_gbs=self.estimate.write_gbs, measured_save_s=self.save_s)
        return evidence


def checkpoint_facts(ctx: Context) -> CheckpointFacts | None:
    """Returns the checkpoint size and save time: bytes / min(storage write × efficiency, nodes × storage NICs)."""
    return ctx.memo(_checkpoint)


def _checkpoint(ctx: Context) -> CheckpointFacts | None:
    plan, group = layout(ctx), training_group(ctx)
    size = checkpoint_size_facts(ctx)
    measured, measured_from, not_used = _measured_write(ctx)
    stated = ctx.job.cluster.storage.write_gbs
    quoted = ctx.value(stated) if measured is not None else ctx.needed(stated)
    if plan is None or size is None or (measured is None and quoted is None):
        return None
    path = nics(ctx, group, "storage")
    storage_path = "storage NICs"
    if path.gbps <= 0:
        # Without a storage network the checkpoint travels over the compute fabric (a converged network).
        path, storage_path = nics(ctx, group, "compute"), "compute NICs (no storage NIC quoted)"
    if path.gbps <= 0:
        ctx.reader.missing.append(member_pointer(group, "nics"))
        return None
    efficiency = ctx.setting("checkpoint.write_efficiency")
    estimate = None
    if quoted is not None:
        estimate = checkpoint.checkpoint_save(size.total_bytes, quoted, plan.nodes, path.gbs,
                                              write_efficiency=efficiency)
    if measured is not None:
        save = checkpoint.checkpoint_save(size.total_bytes, measured, plan.nodes, path.gbs, write_efficiency=1.0)
        write, efficiency, basis = measured, 1.0, Basis.MEASURED
    else:
        save, write, basis, estimate = estimate, quoted, Basis.ESTIMATED, None
    return CheckpointFacts(size=size, save=save, storage_write_gbs=write, write_efficiency=efficiency, basis=basis,
                           storage_path=storage_path, nodes=plan.nodes,
                           include_gradients=bool(ctx.value(ctx.job.training.checkpoint.include_gradients)),
                           measured_from=measured_from, estimate=estimate, quoted_write_gbs=quoted, not_used=not_used)


def _measured_write(ctx: Context) -> tuple[float | None, str | None, str]:
    """Returns the measured storage write GB/s, its source, and a measurement not used and why.

    fio's aggregate write (measurements.fio, the highest reporting group's total) replaces the retyped
    measurements.storage.write_gbs; a fio run that wrote nothing (a read test) gives no write figure.
    """
    fio = read_artifact(ctx, FIO)
    typed = ctx.value(ctx.job.measurements.storage.write_gbs)
    if fio is not None and fio["write_gbs"]:
        not_used = "measurements.storage.write_gbs: measurements.fio replaces it" if typed is not None else ""
        return fio["write_gbs"], f"{source(FIO)}, aggregate write of {len(fio['jobs'])} job(s)", not_used
    not_used = "measurements.fio: the run wrote nothing (a read test)" if fio is not None else ""
    if typed is not None:
        return typed, "measurements.storage.write_gbs", not_used
    return None, None, not_used


# ---- failures and goodput --------------------------------------------------------------------------
def job_mtbf_h(ctx: Context) -> float | None:
    """Returns the job's mean time between failures, h: node MTBF ÷ nodes (independent node failures)."""
    return ctx.memo(_job_mtbf_h)


def _job_mtbf_h(ctx: Context) -> float | None:
    plan = layout(ctx)
    node_mtbf_h = ctx.needed(ctx.job.training.reliability.node_mtbf_h)
    if plan is None or node_mtbf_h is None:
        return None
    return reliability.job_mtbf_h(node_mtbf_h, plan.nodes)


def restore_test(ctx: Context) -> str:
    """Returns "passed", "failed" or "not recorded" for /measurements/restore_test."""
    passed = ctx.value(ctx.job.measurements.restore_test.passed)
    if passed is None:
        return "not recorded"
    return "passed" if passed else "failed"


@dataclass(frozen=True)
class GoodputFacts:
    """Expected share of wall time doing new work, after checkpoint saves, lost work and restarts."""

    goodput: float
    job_mtbf_h: float
    save_s: float
    interval_s: float
    restart_s: float
    lost_per_failure_s: float
    save_overhead: float
    failure_overhead: float
    failures_per_day: float
    young_daly_interval_s: float
    restart_from: str  # "restore test", "submission" or "policy default"
    restore_test: str  # "passed", "failed" or "not recorded"
    basis: Basis  # measured once a restore test passed
    checkpoint: CheckpointFacts

    def evidence(self) -> dict[str, Any]:
        """Returns restart-behavior's stable names (cluster_mtbf_h, goodput) and the terms behind them."""
        return {
            "goodput": self.goodput,
            "cluster_mtbf_h": self.job_mtbf_h,
            "failures_per_day": self.failures_per_day,
            "interval_min": s_to_min(self.interval_s),
            "save_s": self.save_s,
            "restart_min": s_to_min(self.restart_s),
            "restart_from": self.restart_from,
            "lost_per_failure_min": s_to_min(self.lost_per_failure_s),
            "save_overhead": self.save_overhead,
            "failure_overhead": self.failure_overhead,
            "young_daly_interval_min": s_to_min(self.young_daly_interval_s),
            "restore_test": self.restore_test,
        }


def goodput_facts(ctx: Context) -> GoodputFacts | None:
    """Returns the job's first-order goodput (Daly 2006) with its MTBF, save, interval and restart times."""
    return ctx.memo(_goodput)


def _goodput(ctx: Context) -> GoodputFacts | None:
    saved = checkpoint_facts(ctx)
    mtbf_h = job_mtbf_h(ctx)
    training = ctx.job.training
    interval_min = ctx.needed(training.checkpoint.interval_min)
    outcome = restore_test(ctx)
    restart_min, restart_from = None, FigureFrom.RESTORE_TEST
    if outcome == "passed":
        restart_min = ctx.value(ctx.job.measurements.restore_test.restore_min)
    if restart_min is None:
        # Stated, or the policy's cited default (rules/job/defaults.py), which the check's assumptions then list.
        stated_restart = training.reliability.restart_min
        restart_min = ctx.needed(stated_restart)
        restart_from = FigureFrom.POLICY_DEFAULT if stated_restart.source == Source.DEFAULT else FigureFrom.SUBMISSION
    if saved is None or mtbf_h is None or interval_min is None or restart_min is None:
        return None
    mtbf_s = h_to_s(mtbf_h)
    interval_s, restart_s = min_to_s(interval_min), min_to_s(restart_min)
    result = reliability.job_goodput(interval_s, saved.save_s, restart_s, mtbf_s,
                                     save_lost_fraction=ctx.setting("restart.save_lost_fraction"))
    return GoodputFacts(
        goodput=result.goodput, job_mtbf_h=mtbf_h, save_s=saved.save_s, interval_s=interval_s, restart_s=restart_s,
        lost_per_failure_s=result.lost_per_failure_s, save_overhead=result.save_overhead,
        failure_overhead=result.failure_overhead, failures_per_day=result.failures_per_day,
        young_daly_interval_s=checkpoint.young_daly_interval_s(saved.save_s, mtbf_s),
        restart_from=restart_from, restore_test=outcome,
        basis=Basis.MEASURED if outcome == "passed" else Basis.ESTIMATED, checkpoint=saved)

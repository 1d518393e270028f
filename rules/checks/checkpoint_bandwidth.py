"""checkpoint-bandwidth: a checkpoint saves within the allowed time, and the interval suits the failure rate."""

from __future__ import annotations

from rules.checks.base import Check, Context, Exemption, Facts, Passing, Rule
from rules.checks.facts.reliability import checkpoint_facts, job_mtbf_h
from rules.estimates.reliability import checkpoint
from rules.status import Status
from rules.units import h_to_s, min_to_s, s_to_min

_SIZE = ("one checkpoint of {checkpoint_gb:,.1f} GB ({checkpoint_bytes_per_param:g} B/param: weights "
         "{checkpoint_weights_gb:,.1f}, fp32 master {checkpoint_master_weights_gb:,.1f}, optimizer "
         "{checkpoint_optimizer_gb:,.1f}, gradients {checkpoint_gradients_gb:,.1f} GB)")
_WRITE = ("{write_gbs:,.1f} GB/s (the lower of {storage_write_from} storage write {storage_write_gbs:,.1f} GB/s × "
          "{write_efficiency:.0%} and {writing_nodes} nodes × {storage_path}, {node_nics_gbs:,.0f} GB/s)")
_INTERVAL = ("the {interval_min:g}-minute interval against the Young/Daly optimum √(2 × {save_s:,.0f} s × "
             "{cluster_mtbf_h:,.1f} h job MTBF) = {young_daly_interval_min:,.0f} min")


class CheckpointBandwidth(Check):
    id = "checkpoint-bandwidth"
    title = "Design checkpoint bandwidth"
    plan_item = "Design checkpoint bandwidth"
    thresholds = {"interval_warn_ratio": "checkpoint.interval_warn_ratio",
                  "interval_warn_excess_overhead": "checkpoint.interval_warn_excess_overhead"}
    headline = "{checkpoint_gb:,.0f} GB saved in {save_s:,.0f} s (max {max_save_s:g} s)"
    rules = (
        Rule(Status.FAIL, "save-too-slow", lambda m: m.save_s > m.max_save_s,
             _SIZE + " takes {save_s:,.0f} s to write at " + _WRITE + ", above the {max_save_s:g} s allowed "
             "(bound by {save_bound_by})",
             "Quote storage that sustains the checkpoint burst (the save is bound by {save_bound_by}), add storage "
             "NICs, save asynchronously (PyTorch DCP async_save) so training blocks only for the host copy, or "
             "justify a longer max_save_s."),
        # The policy tolerates an interval far from the optimum while it costs little wall time.
        Rule(Status.WARN, "interval-off-optimum", lambda m: m.interval_off_ratio > m.interval_warn_ratio,
             _SIZE + " saves in {save_s:,.0f} s (≤ {max_save_s:g} s) at " + _WRITE + ", but " + _INTERVAL
             + " is {interval_off_ratio:.1f}× off (more than {interval_warn_ratio:g}×), losing "
             "{interval_excess_overhead:.2%} more wall time than the optimum",
             "Set the checkpoint interval near {young_daly_interval_min:,.0f} min, or state why it differs "
             "(e.g. evaluation snapshots) and check the node MTBF and save time it rests on.",
             unless=Exemption(
                 "interval-off-but-cheap",
                 lambda m: m.interval_excess_overhead <= m.interval_warn_excess_overhead,
                 _SIZE + " saves in {save_s:,.0f} s (≤ {max_save_s:g} s) at " + _WRITE + "; " + _INTERVAL
                 + " is {interval_off_ratio:.1f}× off, but that costs only {interval_excess_overhead:.2%} of wall "
                 "time (at most {interval_warn_excess_overhead:.0%} tolerated)")),
    )
    passing = Passing("saves-in-time", _SIZE + " saves in {save_s:,.0f} s (≤ {max_save_s:g} s) at " + _WRITE + "; "
                      + _INTERVAL + " is within {interval_warn_ratio:g}×")

    def gather(self, ctx: Context) -> Facts:
        if not ctx.job.trains:
            return ctx.not_applicable("the submission has no training workload")
        saved = checkpoint_facts(ctx)
        stated = ctx.job.training.checkpoint
        max_save_s = ctx.needed(stated.max_save_s)
        interval_min = ctx.needed(stated.interval_min)
        mtbf_h = job_mtbf_h(ctx)
        if saved is None or max_save_s is None:
            return ctx.insufficient("the checkpoint save time cannot be judged")
        evidence = {**saved.evidence(), "max_save_s": max_save_s}
        if mtbf_h is None or interval_min is None:
            if saved.save_s > max_save_s:
                # The save time alone decides a failure; the interval needs the missing inputs.
                evidence["interval_not_judged_without"] = ", ".join(ctx.missing)
                ctx.missing.clear()
                return Facts(evidence=evidence, basis=saved.basis)
            return ctx.insufficient("the checkpoint interval cannot be judged", **evidence)
        review = checkpoint.interval_review(min_to_s(interval_min), saved.save_s, h_to_s(mtbf_h))
        evidence.update(
            interval_min=interval_min,
            cluster_mtbf_h=mtbf_h,
            young_daly_interval_min=s_to_min(review.optimum_s),
            interval_off_ratio=review.off_ratio,
            interval_excess_overhead=review.excess_overhead,
        )
        return Facts(evidence=evidence, basis=saved.basis)

"""restart-behavior: the job recovers from failures without losing too much of its wall time."""

from __future__ import annotations

from typing import Any

from rules.checks.base import Check, Context, Facts, Passing, Rule
from rules.checks.facts.goodput import NEVER_FINISHES, SimulatedRun, simulated_run
from rules.checks.facts.reliability import goodput_facts, restore_test
from rules.status import Basis, Status

_GOODPUT = ("expected goodput {goodput:.1%}: the job fails every {cluster_mtbf_h:,.1f} h ({failures_per_day:.2f} "
            "failures a day from node MTBF ÷ nodes), each failure losing {lost_per_failure_min:,.1f} min (half the "
            "{interval_min:g}-minute interval + a {save_s:,.0f} s save + a {restart_min:g}-minute restart from "
            "{restart_from}), and saves take {save_overhead:.2%} of the time")

_RESTORE_NOTES = {
    "passed": "the recorded restore test passed",
    "not recorded": "no restore test is recorded yet: test restore and scheduler restart with a controlled failure "
                    "before long production runs and record /measurements/restore_test",
}


class RestartBehavior(Check):
    id = "restart-behavior"
    title = "Plan restart behavior"
    plan_item = "Plan restart behavior"
    thresholds = {"min_goodput": "restart.min_goodput", "warn_goodput": "restart.warn_goodput"}
    headline = "goodput {goodput:.1%}, job MTBF {cluster_mtbf_h:,.1f} h"
    rules = (
        Rule(Status.FAIL, "restore-test-failed", lambda m: m.restore_test == "failed",
             "the recorded restore test (/measurements/restore_test) failed: a checkpoint that cannot be restored "
             "turns a failure into the loss of the whole run so far",
             "Fix the restore path (checkpoint format and completeness, storage mounts, scheduler requeue) and repeat "
             "the controlled-failure test until it passes; record restore_min."),
        Rule(Status.FAIL, "goodput-too-low", lambda m: m.goodput < m.min_goodput,
             _GOODPUT + ", below the {min_goodput:.0%} minimum; {restore_note}; {simulated_note}",
             "Checkpoint near the Young/Daly interval ({young_daly_interval_min:,.0f} min), make saves faster "
             "(asynchronous checkpointing, more storage write bandwidth), restart faster (hot-spare nodes, "
             "pre-staged containers) or run on fewer, more reliable nodes."),
        Rule(Status.WARN, "goodput-marginal", lambda m: m.goodput < m.warn_goodput,
             _GOODPUT + ", above the {min_goodput:.0%} minimum but below {warn_goodput:.0%}; {restore_note}; "
             "{simulated_note}",
             "Shorten the restart and the save, or move the interval towards the Young/Daly optimum "
             "({young_daly_interval_min:,.0f} min); confirm node MTBF from the vendor's field data."),
    )
    passing = Passing("recovers", _GOODPUT + ", at least {warn_goodput:.0%}; {restore_note}; {simulated_note}")

    def gather(self, ctx: Context) -> Facts:
        if not ctx.job.trains:
            return ctx.not_applicable("the submission has no training workload")
        outcome = restore_test(ctx)
        facts = goodput_facts(ctx)
        simulated: dict[str, Any] = {}
        if facts is not None:
            # The simulation also needs the run's length (time-to-result's inputs); without it the goodput
            # still decides this check, so what only the simulation lacks is not this check's missing input.
            own_missing = list(ctx.missing)
            simulated = _simulated_evidence(simulated_run(ctx))
            ctx.missing[:] = own_missing
        if outcome == "failed":
            # A failed restore decides the check whatever the goodput arithmetic would say.
            evidence = ({**facts.evidence(), **simulated, "restore_note": "the recorded restore test failed"}
                        if facts else {})
            ctx.missing.clear()
            return Facts(evidence={**evidence, "restore_test": outcome}, basis=Basis.MEASURED)
        if facts is None:
            return ctx.insufficient("goodput cannot be estimated")
        return Facts(evidence={**facts.evidence(), **simulated, "restore_note": _RESTORE_NOTES[outcome]},
                     basis=facts.basis)


def _simulated_evidence(run: SimulatedRun | None) -> dict[str, Any]:
    """Returns the simulated days to completion and interruptions per run, with a note for the message."""
    if run is None:
        return {"simulated_note": "no simulated days to completion: the simulation needs the run's length "
                                  "(dataset tokens, completion window and throughput, as time-to-result reads them)"}
    evidence = run.evidence()
    if not run.finishes:
        note = NEVER_FINISHES
    else:
        note = (f"{evidence['goodput_trials']:,} simulated runs take {evidence['days_p90']:,.2f} days at p90 "
                f"({evidence['failures_mean']:,.2f} interruptions per run)")
    return {**evidence, "simulated_note": note}

"""time-to-result: the run finishes inside its completion window, failures and restarts included."""

from __future__ import annotations

from rules.checks.base import Check, Context, Facts, Passing, Rule
from rules.checks.facts.communication import applied_scaling
from rules.checks.facts.cost import cost_note, rent_note, training_cost
from rules.checks.facts.envelope import FIGURES as ENVELOPE_FIGURES
from rules.checks.facts.envelope import published_envelope
from rules.checks.facts.goodput import NEVER_FINISHES, SIMULATED_DAYS, SimulatedRun, simulated_run
from rules.checks.facts.reliability import goodput_facts
from rules.checks.facts.schedule import quote_cost, quoted_run_plan
from rules.checks.facts.step_model import not_modelled_reason
from rules.checks.facts.throughput import MODELLED, throughput_facts
from rules.estimates.reliability.queue import NOT_SHARED
from rules.status import Basis, Status

_RUN = ("{tokens:,.0f} tokens on {gpus} GPUs at {tokens_per_s_per_gpu:,.0f} tokens/s per GPU ({throughput_from}) × "
        "{efficiency:.1%} scaling efficiency ({efficiency_basis}) = {compute_days:.2f} days without failures; goodput "
        "{goodput:.1%} (job MTBF {cluster_mtbf_h:.1f} h, checkpoint every {interval_min:g} min, save {save_s:.0f} s, "
        "restart {restart_min:g} min); simulated with failures: {simulated_days_text}; {queue_note}")
_WHY = (_RUN + "the window needs {gpus_needed} GPUs ({memory_need} for memory, {throughput_need} for throughput); "
        "{cost_note}")

# When no GPU count fits one step in memory the run cannot start: its expected days (and their share of the
# window, and the simulated days and share of runs inside it) are shown as what the run would take were it
# to fit, and no GPU count is needed to compare the quote with, so no rule judges these figures.
_HYPOTHETICAL_WHEN_NOTHING_FITS = frozenset({"days", "window_fraction", "oversize_ratio", "window_probability",
                                            "days_at_published_envelope", *SIMULATED_DAYS})
# The figures that judge a stated throughput; absent when there is none to judge (a modelled rate, or a model
# the inputs cannot build), and then no rule reads them.
_THROUGHPUT_FIGURES = ("implied_hardware_tflops_per_gpu", "gpu_peak_tflops", "claim_over_model")
# The days at both ends of the step-time model's band: only when the run's rate is the modelled one.
_BAND_FIGURES = ("days_range", "days_slow_end")


class TimeToResult(Check):
    id = "time-to-result"
    title = "Optimize for time-to-result"
    plan_item = "Optimize for time-to-result"
    thresholds = {"warn_fraction_of_window": "time_to_result.warn_fraction_of_window",
                  "max_oversize_ratio": "time_to_result.max_oversize_ratio",
                  "max_claim_over_model": "time_to_result.max_claim_over_model",
                  "min_window_probability": "time_to_result.min_window_probability",
                  "envelope_tolerance": "time_to_result.envelope_tolerance",
                  "quote_price_tolerance": "time_to_result.quote_price_tolerance"}
    headline = "{days:.1f} of {window_days:g} days expected; {gpus_needed} GPUs needed, {gpus} quoted"
    rules = (
        # A stated rate that needs more FLOP/s than the GPU has cannot be achieved: the inputs contradict the
        # hardware, whatever the schedule says.
        Rule(Status.FAIL, "throughput-beyond-peak", lambda m: m.implied_hardware_tflops_per_gpu > m.gpu_peak_tflops,
             "the inputs are inconsistent: the stated throughput ({throughput_from}: {tokens_per_s_per_gpu:,.0f} "
             "tokens/s per GPU) implies {implied_hardware_tflops_per_gpu:,.0f} TFLOP/s per GPU with "
             "{activation_checkpointing} activation recompute counted, above the GPU's dense peak of "
             "{gpu_peak_tflops:,.0f} TFLOP/s at {training_precision}; the step-time model of this layout gives "
             "{modelled_tokens_per_s_per_gpu_text}",
             "Correct the stated throughput: give a measured tokens/s per GPU, an MFU with the peak it was divided "
             "by (mfu_peak_tflops), or hardware TFLOP/s per GPU as Megatron-LM logs them; or leave it out to use "
             "the modelled rate."),
        Rule(Status.WARN, "throughput-above-model", lambda m: m.claim_over_model > m.max_claim_over_model,
             "the stated throughput ({throughput_from}: {tokens_per_s_per_gpu:,.0f} tokens/s per GPU) is "
             "{claim_over_model:.2f}× the step-time model's {modelled_tokens_per_s_per_gpu:,.0f} for this layout "
             "(modelled MFU {modelled_mfu:.1%} of {modelled_mfu_peak_tflops:,.0f} TFLOP/s), more than "
             "{max_claim_over_model:g}×; expected {days:.1f} days of the {window_days:g}-day window rest on it: "
             + _WHY,
             "Measure tokens/s per GPU on a representative step of the quoted hardware with the planned layout "
             "(and give measured_at_gpus), or plan with the modelled rate."),
        # No GPU count fits memory: peak-memory fails (the quoted count does not fit either), so this check
        # only says plainly that no count can be advised, and how long the run would take if it fitted.
        Rule(Status.WARN, "no-gpu-count-fits", lambda m: m.no_gpu_count_fits == True,  # noqa: E712
             "{gpus_needed_reason}, so no GPU count is advised; were it to fit, the run would take {days:.1f} days "
             "of the {window_days:g}-day window: " + _RUN + "{cost_note}",
             "Make one training step fit first (see peak-memory and sharding): choose a sharding that fits or GPUs "
             "with more memory, then evaluate again for the GPU count the window needs."),
        Rule(Status.FAIL, "misses-window", lambda m: m.days > m.window_days,
             "expected {days:.1f} days exceeds the {window_days:g}-day window; " + _WHY,
             "Quote at least {gpus_needed} GPUs ({nodes_needed} nodes) at this throughput, raise the achieved "
             "throughput (measure MFU on a representative step), cut checkpoint and restart overhead, or extend "
             "the completion window."),
        # A modelled rate is known to its calibration's residuals (catalogue step_time.residual_band): the run
        # passes only when the slower end of that band also fits the window.
        Rule(Status.WARN, "slow-end-misses-window", lambda m: m.days_slow_end > m.window_days,
             "expected {days:.1f} days fit the {window_days:g}-day window at the modelled rate, but not at the slower "
             "end of the step-time model's band ({modelled_tokens_per_s_per_gpu_range[0]:,.0f} to "
             "{modelled_tokens_per_s_per_gpu_range[1]:,.0f} tokens/s per GPU, its calibration runs' errors): "
             "{days_range[0]:.1f} to {days_range[1]:.1f} days; " + _WHY,
             "Measure tokens/s per GPU on a representative step of the quoted hardware and state it, or quote "
             "{gpus_needed} or more GPUs so that the slower end fits too."),
        Rule(Status.WARN, "little-slack", lambda m: m.window_fraction > m.warn_fraction_of_window,
             "expected {days:.1f} days is {window_fraction:.0%} of the {window_days:g}-day window, above "
             "{warn_fraction_of_window:.0%}; " + _WHY,
             "Keep slack for queueing and reruns: quote {gpus_needed} or more GPUs, or measure step time and "
             "utilisation on the quoted hardware before committing to the window."),
        # The expected days can fit the window while failures spread the runs around them: a few long
        # restarts, or a window close to the expectation, leave many runs outside it.
        Rule(Status.WARN, "window-at-risk", lambda m: m.window_probability < m.min_window_probability,
             "only {window_probability:.0%} of {goodput_trials:,} simulated runs finish inside the "
             "{window_days:g}-day window, fewer than {min_window_probability:.0%}, though the expected "
             "{days:.1f} days are {window_fraction:.0%} of it; " + _WHY,
             "Cut what a failure costs so that at least {min_window_probability:.0%} of runs finish in time: "
             "restart faster (hot-spare nodes, pre-staged containers, automatic requeue), checkpoint near the "
             "Young/Daly interval ({young_daly_interval_min:,.0f} min) and make saves faster; or leave a restart's "
             "room in the window: more GPUs than the {gpus} quoted, or a longer completion window."),
        # The step-time model predicts a rate no published, measured run of the model's size class reached on this
        # GPU architecture at this precision (catalogue published_mfu_envelope), counted as that run's source counts
        # FLOPs: the days rest on an MFU nobody has shown. After the window rules, which a change of quote or
        # workload can answer (rules/advice/remedies.py does not try this one: no change supplies a measurement);
        # before oversized, whose GPU count rests on the same rate.
        Rule(Status.WARN, "beyond-published-envelope",
             lambda m: m.mfu_beyond_published_envelope > m.envelope_tolerance,
             "the step-time model's {modelled_tokens_per_s_per_gpu:,.0f} tokens/s per GPU is "
             "{modelled_mfu_in_envelope_convention:.1%} MFU counted as the published run's source counts FLOPs "
             "(convention {published_envelope_convention}, over {published_envelope_peak_tflops:,.1f} TFLOP/s; "
             "{modelled_mfu:.1%} of {modelled_mfu_peak_tflops:,.1f} TFLOP/s as quotecheck counts them), "
             "{mfu_beyond_published_envelope:.1%} of the peak above the highest published, measured MFU for this model "
             "size, GPU architecture and precision, more than the {envelope_tolerance:.1%} tolerated: "
             "{published_envelope_mfu:.1%} ({published_envelope_tflops_per_gpu:,.1f} TFLOP/s per GPU), "
             "{published_envelope_run} ({published_envelope_source}); at that MFU the run takes "
             "{days_at_published_envelope:.1f} days of the {window_days:g}-day window, not {days:.1f}: " + _WHY,
             "Measure tokens/s per GPU on a representative step of the quoted hardware with the planned layout and "
             "state it (workload.training.throughput), or plan with the published figure: "
             "{days_at_published_envelope:.1f} days at {published_envelope_mfu:.1%} MFU."),
        Rule(Status.WARN, "oversized", lambda m: m.oversize_ratio > m.max_oversize_ratio,
             "expected {days:.1f} days is {window_fraction:.0%} of the {window_days:g}-day window, but the quote has "
             "{oversize_ratio:.1f}× the {gpus_needed} GPUs the window needs (more than {max_oversize_ratio:g}×); "
             + _WHY,
             "The plan asks for time-to-result, not the largest cluster: quote about {gpus_needed} GPUs "
             "({nodes_needed} nodes), or record the other work that justifies {gpus} GPUs."),
        # The quote states its servers twice, as node groups (what every check sizes) and as line items (what its total
        # and so the cost figures come from): where they disagree the cost is that of other hardware.
        Rule(Status.WARN, "quote-arithmetic",
             lambda m: (m.quote_count_mismatches > 0) | (m.quote_price_gap > m.quote_price_tolerance),
             "the quote's line items and its node groups disagree ({quote_count_mismatches} server model(s) counted "
             "differently; unit prices up to {quote_price_gap:.1%} apart, {quote_price_tolerance:.1%} tolerated): "
             "{quote_lines_text}; the quote total ({quote_total_from}) and the cost figures rest on the line items, "
             "the other checks on the node groups; " + _WHY,
             "Ask the vendor for a quote whose line items and node groups agree, or correct whichever was copied "
             "wrong, so that the cost judged is that of the hardware judged."),
    )
    passing = Passing("within-window",
                      "expected {days:.1f} days is {window_fraction:.0%} of the {window_days:g}-day window, and "
                      "{window_probability:.0%} of the simulated runs finish inside it; " + _WHY)

    def gather(self, ctx: Context) -> Facts:
        if not ctx.job.trains:
            return ctx.not_applicable("the submission has no training workload")
        rate = throughput_facts(ctx)
        scaled = applied_scaling(ctx)
        reliability = goodput_facts(ctx)
        if rate is None or scaled is None or reliability is None:
            unmodelled = not_modelled_reason(ctx) if rate is None or scaled is None else None
            return ctx.insufficient(unmodelled or "the schedule needs the throughput, the scaling efficiency and the "
                                                  "goodput")
        run = quoted_run_plan(ctx)
        simulated = simulated_run(ctx)
        if run is None or simulated is None:
            return ctx.insufficient("the schedule needs the dataset size and the completion window")
        plan = run.schedule
        price = quote_cost(ctx)
        currency = ctx.value(ctx.job.cluster.currency)
        evidence = {
            **run.evidence(),
            **rate.evidence(),
            **reliability.evidence(),
            **simulated.window_evidence(),
            "simulated_days_text": _simulated_days_text(simulated),
            "no_gpu_count_fits": plan.gpus_needed is None,
            "oversize_ratio": plan.oversize_ratio,
            **scaled.schedule_evidence(),
            "memory_need": plan.memory_min_gpus or ("none fits" if plan.gpus_needed is None else "not estimated"),
            "throughput_need": plan.throughput_min_gpus or (
                "none (the queue wait fills the window)" if plan.run_window_days <= 0 else "none (goodput 0)"),
            "currency": "" if currency is None else currency,
            "quote_total": price.total,
            "quote_total_from": price.from_,
            "training_nodes_cost": price.training_nodes,
            **price.arithmetic_evidence(),
            **training_cost(ctx, run, simulated.job),
        }
        evidence["cost_note"] = _cost_note(evidence, price.unpriced_line_items)
        evidence["queue_note"] = _queue_note(evidence)
        training = ctx.job.training
        recompute, precision = ctx.value(training.activation_checkpointing), ctx.value(training.precision)
        evidence.update(activation_checkpointing=recompute,
                        training_precision="bf16-mixed" if precision is None else precision,
                        modelled_tokens_per_s_per_gpu_text=_modelled_text(evidence))
        evidence.update(_band_days(evidence))
        evidence.update(published_envelope(ctx).evidence())
        unjudged = {name for name in (*_THROUGHPUT_FIGURES, *_BAND_FIGURES, *ENVELOPE_FIGURES)
                    if evidence.get(name) is None}
        if plan.gpus_needed is None:
            unjudged.update(_HYPOTHETICAL_WHEN_NOTHING_FITS)
        if not simulated.finishes:
            unjudged.update(SIMULATED_DAYS)  # None: no simulated run finishes (JSON holds no infinity)
        # Days combine throughput, efficiency and failure assumptions: estimated even where one term is measured.
        return Facts(evidence=evidence, basis=Basis.ESTIMATED, unjudged=frozenset(unjudged))


def _band_days(e: dict) -> dict:
    """Returns the days at the fast and slow ends of the modelled rate's band (``days_range``) and the slow end alone
    (``days_slow_end``), for a run at the modelled rate; None for a stated one. The queue wait does not move; the
    run's days scale as the modelled rate over the rate at each end."""
    band = e.get("modelled_tokens_per_s_per_gpu_range")
    if e["throughput_from"] != MODELLED or band is None or e["run_days"] is None:
        return {"days_range": None, "days_slow_end": None}
    rate, wait = e["modelled_tokens_per_s_per_gpu"], e["queue_wait_days"] or 0.0
    fast, slow = (wait + e["run_days"] * rate / end for end in (band[1], band[0]))
    return {"days_range": [fast, slow], "days_slow_end": slow}


def _simulated_days_text(run: SimulatedRun) -> str:
    """Returns the simulated days (p50, p90, p99, mean) and interruptions per run, for the messages."""
    if not run.finishes:
        return NEVER_FINISHES
    e = run.evidence()
    return (f"p50 {e['days_p50']:,.2f}, p90 {e['days_p90']:,.2f}, p99 {e['days_p99']:,.2f} days over "
            f"{e['goodput_trials']:,} seeded runs (mean {e['days_mean']:,.2f}, {e['failures_mean']:,.2f} "
            "interruptions per run)")


def _modelled_text(e: dict) -> str:
    if e.get("modelled_tokens_per_s_per_gpu") is None:
        return "no figure (the inputs do not determine its step)"
    return (f"{e['modelled_tokens_per_s_per_gpu']:,.0f} tokens/s per GPU (MFU {e['modelled_mfu']:.1%} of "
            f"{e['modelled_mfu_peak_tflops']:,.0f} TFLOP/s)")


def _cost_note(e: dict, unpriced: int) -> str:
    if e["quote_total"] is None:
        return f"the quote carries no prices; {rent_note(e)}"
    unit = f"{e['currency']} " if e["currency"] else ""
    gaps = f", {unpriced} line items unpriced" if unpriced else ""
    return f"quote total {unit}{e['quote_total']:,.0f} (from its {e['quote_total_from']}{gaps}); {cost_note(e)}"


def _queue_note(e: dict) -> str:
    """Returns the queue wait, in words, for a shared cluster; nothing when the cluster is not shared."""
    if e["queue_basis"] == NOT_SHARED:
        return ""
    return (f"shared cluster: {e['queue_wait_days']:,.2f} days' wait in its queue ({e['queue_basis']}) before "
            f"{e['run_days']:,.2f} days of run, {e['days']:,.2f} days to result; ")

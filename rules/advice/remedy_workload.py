"""Changes to the workload that a failing or warning check's evidence proposes: how the quoted hardware is used.

Each function reads one Situation (rules/advice/remedy_changes.py) and returns the changes it proposes, none when
its checks pass: another sharding strategy that the sharding check found to fit, the layout search's best
layout (rules/best_layout.layout_patch), the largest fitting micro-batch that divides the batch, full
activation recompute, the Young/Daly checkpoint interval that checkpoint-bandwidth and restart-behavior
computed, and fp8 GEMMs for a 16-bit run that misses its schedule on GPUs with FP8 Tensor Cores (a numerics
decision, labelled as one: the layout search never changes precision). Workload changes add nothing to the quote
(price 0). The figures are the checks' own: nothing is
estimated here, so what a change claims is what the evaluation of the changed submission will judge.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rules.advice.best_layout import describe_layout, layout_patch
from rules.advice.remedy_changes import WORKLOAD, Change, Situation, patch_edits
from rules.checks.facts.throughput import MODELLED
from rules.estimates.search.remedy_sizing import whole_minutes
from rules.estimates.training_time import compute

# The checks whose outcome depends on the layout (those rules/advice/best_layout.py shows at the best layout).
MEMORY_CHECKS = ("peak-memory", "sharding", "gradient-accumulation")
LAYOUT_CHECKS = (*MEMORY_CHECKS, "time-to-result")
INTERVAL_CHECKS = ("checkpoint-bandwidth", "restart-behavior", "time-to-result")
# time-to-result's rules about the schedule (not about a stated rate or an oversized quote).
SCHEDULE_RULES = ("misses-window", "slow-end-misses-window", "little-slack", "window-at-risk")
SIXTEEN_BIT = ("bf16-mixed", "fp16-mixed")
FP8 = "fp8-mixed"
NUMERICS_DECISION = ("numerics: fp8 GEMMs round every GEMM input to 8 bits with per-tensor scales, which changes the "
                     "training numerics; confirm on a representative run that the loss curve matches the 16-bit one "
                     "before committing the schedule to it")


def sharding_changes(s: Situation) -> list[Change]:
    """Returns a change to each sharding strategy that fits (the recommended one first), when memory or sharding
    fails or warns; for a warning that only prefers another strategy, the recommended one alone."""
    if not (s.open("sharding") or s.open("peak-memory", "exceeds-usable-memory")):
        return []
    evidence = s.evidence("sharding")
    current, recommended = evidence.get("sharding"), evidence.get("recommended")
    fitting = [row for row in evidence.get("strategies", []) if row.get("fits")]
    if s.open("sharding", "other-strategy-preferred"):
        fitting = [row for row in fitting if row["strategy"] == recommended]
    fitting.sort(key=lambda row: row["strategy"] != recommended)
    return [Change(f"sharding={row['strategy']}", WORKLOAD,
                   f"shard with {row['strategy']} instead of {current}: {row['total_gib']:.1f} GiB per GPU of "
                   f"{evidence['usable_gib']:.1f} GiB usable, {row['comm_gb_per_step']:,.1f} GB per GPU per step",
                   ((s.job.training.parallelism.sharding.pointer, row["strategy"]),), (*LAYOUT_CHECKS,))
            for row in fitting if row["strategy"] != current]


def layout_change(s: Situation) -> list[Change]:
    """Returns the layout search's best layout of the quoted GPUs as a change, when a layout check fails or warns.

    Only for the submission as submitted (where the search ran): another quote has another best layout.
    """
    best = s.best_layout
    if best is None or not any(s.open(check_id) for check_id in LAYOUT_CHECKS):
        return []
    patch, removed = layout_patch(s.document, best)
    text = f"lay the job out as the layout search's best: {describe_layout(best)}"
    if removed:
        text += "; without " + "; ".join(removed)
    return [Change("layout=best", WORKLOAD, text, patch_edits(patch), (*LAYOUT_CHECKS,))]


def micro_batch_change(s: Situation) -> list[Change]:
    """Returns the largest fitting micro-batch that divides the batch (gradient-accumulation's suggestion)."""
    if not s.open("gradient-accumulation"):
        return []
    evidence = s.evidence("gradient-accumulation")
    suggested, current = evidence.get("suggested_micro_batch"), evidence.get("micro_batch")
    if not suggested or suggested == current:
        return []
    steps = evidence["suggested_accumulation_steps"]
    return [Change(f"micro_batch={suggested}", WORKLOAD,
                   f"micro-batch {suggested} instead of {current} ({steps} accumulation step{'' if steps == 1 else 's'}"
                   f", the largest micro-batch that fits and divides the global batch {evidence['global_batch']})",
                   ((s.job.training.micro_batch.pointer, suggested),), ("gradient-accumulation", "time-to-result"))]


def recompute_change(s: Situation) -> list[Change]:
    """Returns full activation recompute, when one step does not fit memory without it.

    Recompute is not free: a modelled rate pays for the recomputed forward in the step model; a stated tokens/s or
    MFU was measured without it, so the change scales it by the work per token it adds
    (``compute.rate_under_recompute``) and the days of the changed submission show the cost."""
    memory_short = s.open("peak-memory", "exceeds-usable-memory") or s.open(
        "gradient-accumulation", "micro-batch-does-not-fit")
    recompute = s.job.training.activation_checkpointing
    current = recompute.value  # "none" when the submission leaves it out (its documented default)
    if not memory_short or current == "full":
        return []
    edits: list[tuple[str, Any]] = [(recompute.pointer, "full")]
    text = (f"recompute activations in full (activation_checkpointing full instead of {current}): one layer's input "
            "is kept per layer and the rest recomputed in the backward pass")
    rate = _stated_rate_under_full_recompute(s, current)
    if rate is not None:
        pointer, before, after = rate
        edits.append((pointer, _restated(s.submitted(pointer), after, before, current)))
        text += (f"; the stated {pointer.rsplit('/', 1)[-1]} {before:,.4g} becomes {after:,.4g}, the same hardware "
                 "rate doing the recomputed forward too")
    return [Change("recompute=full", WORKLOAD, text, tuple(edits), MEMORY_CHECKS)]


def _stated_rate_under_full_recompute(s: Situation, current: str) -> tuple[str, float, float] | None:
    """Returns (pointer, stated, under full recompute) of a stated tokens/s per GPU or MFU; None without one (a
    hardware TFLOP/s rate already counts the recompute, and a modelled rate is the step model's)."""
    training = s.job.training
    stated = next((given for given in (training.throughput.tokens_per_s_per_gpu, training.throughput.mfu)
                   if given.value is not None), None)
    parameters = training.model.parameters.value
    if stated is None or not parameters:
        return None
    shape = training.model.architecture
    dims = (shape.layers.value, training.sequence_length.value, shape.hidden.value)
    after = compute.rate_under_recompute(stated.value, parameters, current, "full",
                                         *(dims if None not in dims else (None, None, None)))
    return stated.pointer, stated.value, after


def _restated(member: Any, value: float, before: float, recompute: str) -> Any:
    """Returns the stated rate's member with ``value``: a quantity keeps its form, now an assumption that says why."""
    if not isinstance(member, dict):
        return value
    return {"value": value, "source": "assumption",
            "ref": f"{before:g} as stated ({member.get('source', 'stated')}: {member.get('ref', '')}), measured with "
                   f"{recompute} recompute, scaled to full recompute by the work per token it adds"}


def interval_change(s: Situation) -> list[Change]:
    """Returns the Young/Daly checkpoint interval, when an interval or goodput rule fails or warns."""
    interval_off = s.open("checkpoint-bandwidth", "interval-off-optimum")
    goodput_low = s.open("restart-behavior", "goodput-too-low", "goodput-marginal")
    if not (interval_off or goodput_low or s.open("time-to-result", "window-at-risk")):
        return []
    source = "checkpoint-bandwidth" if "young_daly_interval_min" in s.evidence("checkpoint-bandwidth") else \
        "restart-behavior"
    evidence = s.evidence(source)
    interval = s.job.training.checkpoint.interval_min
    optimum, current = evidence.get("young_daly_interval_min"), interval.value
    if optimum is None or current is None or whole_minutes(optimum) == current:
        return []
    minutes = whole_minutes(optimum)
    return [Change(f"checkpoint_interval={minutes}", WORKLOAD,
                   f"checkpoint every {minutes:,} min instead of {current:g}: the Young/Daly optimum for a "
                   f"{evidence['save_s']:,.0f} s save and a {evidence['cluster_mtbf_h']:,.1f} h job MTBF",
                   ((interval.pointer, minutes),), INTERVAL_CHECKS)]


def precision_change(s: Situation) -> list[Change]:
    """Returns fp8 GEMMs (precision fp8-mixed) when a 16-bit run's modelled schedule fails or warns and the training
    GPUs have FP8 Tensor Cores (the catalogue's fp8_tflops for their model).

    The change is a numerics decision, not a layout: it carries ``decision`` so that remedies rank it after those
    that leave the numerics as they are and the buyer reads what it asks. A stated throughput was measured at its
    own precision, so the change is proposed only when the schedule rests on the modelled rate.
    """
    precision = s.job.training.precision
    group = s.training_group()
    if (not s.open("time-to-result", *SCHEDULE_RULES) or precision.value not in SIXTEEN_BIT or group is None
            or s.evidence("time-to-result").get("throughput_from") != MODELLED
            or not (s.catalogue.gpu(s.group(group).gpu.model.value) or {}).get("fp8_tflops")):
        return []
    return [Change(f"precision={FP8}", WORKLOAD,
                   f"train with fp8 GEMMs (precision {FP8} instead of {precision.value}; a numerics decision)",
                   ((precision.pointer, FP8),), ("time-to-result",), decision=NUMERICS_DECISION)]


WORKLOAD_CHANGES: tuple[Callable[[Situation], list[Change]], ...] = (
    sharding_changes, layout_change, micro_batch_change, recompute_change, interval_change, precision_change)

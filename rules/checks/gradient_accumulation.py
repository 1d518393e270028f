"""gradient-accumulation: global batch = micro-batch × accumulation steps × data-parallel size, and it fits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.checks.base import Check, Context, Facts, Passing, Rule
from rules.checks.facts.batch import accumulation
from rules.checks.facts.layout import layout
from rules.checks.facts.memory import largest_fitting_micro_batch, measured_peak_gib, memory_estimate
from rules.estimates.memory.measured_fit import MeasuredPeak, largest_fitting_given_measurement
from rules.estimates.model import batch
from rules.estimates.model.batch import MicroBatchOptions
from rules.status import Basis, Status
from rules.units import bytes_to_gib

_SPLIT = ("global batch {global_batch} = micro-batch {micro_batch} × {accumulation_steps:g} accumulation steps × "
          "{data_parallel} data-parallel ranks")


class GradientAccumulation(Check):
    id = "gradient-accumulation"
    title = "Account for gradient accumulation"
    plan_item = "Account for gradient accumulation"
    thresholds = {"max_accumulation_steps": "gradient_accumulation.max_accumulation_steps"}
    headline = ("{accumulation_steps:g} steps of micro-batch {micro_batch} on {data_parallel} ranks; largest "
                "fitting micro-batch {largest_fitting_micro_batch}")
    rules = (
        Rule(Status.FAIL, "not-a-whole-number", lambda m: m.remainder_sequences > 0,
             "global batch {global_batch} is not a whole number of rounds of micro-batch {micro_batch} × "
             "{data_parallel} data-parallel ranks ({sequences_per_round} sequences): accumulation would be "
             "{accumulation_steps:.3g} steps, which DeepSpeed and Megatron-LM refuse; {nearest}",
             lambda e: _whole_batch_remedy(e)),
        Rule(Status.FAIL, "micro-batch-does-not-fit", lambda m: m.micro_batch > m.largest_fitting_micro_batch,
             _SPLIT + ", but micro-batch {micro_batch} does not fit usable GPU memory; the largest that fits is "
             "{largest_fitting_micro_batch} ({largest_fitting_from}){at_largest}",
             lambda e: _fitting_micro_batch_remedy(e)),
        Rule(Status.WARN, "many-accumulation-steps", lambda m: m.accumulation_steps > m.max_accumulation_steps,
             _SPLIT + ": more than {max_accumulation_steps} micro-batches per optimizer step; the largest micro-batch "
             "that fits is {largest_fitting_micro_batch} ({largest_fitting_from}){at_largest}",
             lambda e: _fewer_steps_remedy(e)),
    )
    passing = Passing("accumulation-fits", _SPLIT + "; the largest micro-batch that fits is "
                      "{largest_fitting_micro_batch} ({largest_fitting_from}){at_largest}")

    def gather(self, ctx: Context) -> Facts:
        if not ctx.job.trains:
            return ctx.not_applicable("the submission has no training workload")
        plan = layout(ctx)
        split = accumulation(ctx)
        if plan is None or split is None:
            return ctx.insufficient("the batch split needs the global batch, the micro-batch and the GPU layout")
        dp = split.data_parallel
        estimated = largest_fitting_micro_batch(ctx, batch.sequences_per_rank(split.global_batch, dp))
        planned = memory_estimate(ctx)
        if estimated is None or planned is None:
            return ctx.insufficient("activation memory, which bounds the micro-batch, cannot be estimated")
        # A measured peak at the planned micro-batch overrides the estimate for that micro-batch (as in peak-memory).
        measured = measured_peak_gib(ctx, split.micro_batch)
        usable_gib = bytes_to_gib(planned.usable_bytes)
        fitting = largest_fitting_given_measurement(
            estimated, usable_gib, MeasuredPeak(split.micro_batch, measured) if measured is not None else None)
        options = batch.micro_batch_options(split, fitting.largest)
        evidence = {
            "global_batch": split.global_batch,
            "micro_batch": split.micro_batch,
            "data_parallel": dp,
            "accumulation_steps": split.split.accumulation_steps,
            "accumulation_whole": split.split.whole,
            "sequences_per_round": split.split.sequences_per_round,
            "remainder_sequences": split.split.remainder_sequences,
            "largest_fitting_micro_batch": fitting.largest,
            "largest_fitting_from": _LARGEST_FROM[fitting.measured_fits],
            "measured_peak_gib": measured,
            "usable_gib": usable_gib,
            "valid_micro_batches": options.valid_micro_batches,
            "suggested_micro_batch": options.suggested_micro_batch,
            "suggested_accumulation_steps": options.suggested_accumulation_steps,
            "nearest_global_batches": options.nearest_global_batches,
        }
        evidence["at_largest"] = _at_largest(evidence)
        evidence["nearest"] = _nearest(evidence, options)
        return Facts(evidence=evidence, basis=Basis.ESTIMATED if measured is None else Basis.MEASURED)


# Where the largest fitting micro-batch came from, by whether the measured micro-batch fitted (None: none measured).
_LARGEST_FROM = {None: "estimated", True: "estimated, at least the measured micro-batch",
                 False: "estimated, below the measured micro-batch"}


def _at_largest(e: dict) -> str:
    if e["suggested_micro_batch"] is None:
        return ""
    steps = e["suggested_accumulation_steps"]
    return (f"; micro-batch {e['suggested_micro_batch']}, the largest fitting one that divides the batch, "
            f"implies {steps} accumulation step{'' if steps == 1 else 's'}")


def _nearest(e: dict, options: MicroBatchOptions) -> str:
    globals_ = " or ".join(str(b) for b in e["nearest_global_batches"])
    text = f"with micro-batch {e['micro_batch']} the nearest valid global batches are {globals_}"
    if options.fitting_micro_batches:
        return text + (f"; global batch {e['global_batch']} works with micro-batch "
                       f"{', '.join(map(str, options.fitting_micro_batches))}")
    if not options.divides_over_ranks:
        return text + (f"; no micro-batch divides {e['global_batch']} sequences over {e['data_parallel']} ranks, "
                       f"so keeping it needs a GPU count whose data-parallel size divides it")
    return text


def _whole_batch_remedy(e: Mapping[str, Any]) -> str:
    """Returns how to make the global batch a whole number of rounds: the nearest valid global batches at this
    micro-batch, or the largest fitting micro-batch that divides it."""
    nearest = " or ".join(str(b) for b in e["nearest_global_batches"])
    suggested = e["suggested_micro_batch"]  # the largest valid micro-batch that fits, if any does
    other = (f", or keep {e['global_batch']} and set micro_batch to {suggested}" if suggested else
             ", or change the GPU count so that the data-parallel size divides the global batch")
    return f"Set global_batch to {nearest} (with micro_batch {e['micro_batch']}){other}."


def _fitting_micro_batch_remedy(e: Mapping[str, Any]) -> str:
    """Returns how to make the micro-batch fit: the largest fitting one that divides the batch, if any fits."""
    if e["largest_fitting_micro_batch"] == 0:
        return ("Not even micro-batch 1 fits: shard more, add tensor or pipeline parallelism, enable activation "
                "checkpointing, or quote GPUs with more memory (see peak-memory).")
    if e["suggested_micro_batch"]:
        return (f"Set micro_batch to {e['suggested_micro_batch']} with {e['suggested_accumulation_steps']} "
                f"accumulation steps, or enable activation checkpointing.")
    return (f"Set micro_batch to at most {e['largest_fitting_micro_batch']} and a global batch it divides, or "
            f"enable activation checkpointing.")


def _fewer_steps_remedy(e: Mapping[str, Any]) -> str:
    """Returns how to shorten the accumulation: a larger fitting micro-batch where there is one, more GPUs."""
    target = e["suggested_micro_batch"]
    larger = (f"Raise micro_batch to {target} ({e['suggested_accumulation_steps']} steps), quote"
              if target and target > e["micro_batch"] else "Quote")
    return (f"{larger} more GPUs (more data-parallel ranks), or benchmark the optimizer at this "
            f"accumulation: long accumulation lengthens each step and delays every update.")

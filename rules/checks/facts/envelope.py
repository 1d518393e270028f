"""The highest published training MFU a modelled rate is held against (catalogue ``published_mfu_envelope``).

Reads the modelled rate (rules/checks/facts/throughput.py), the model's shape and sequence length, the quoted GPU's
catalogued architecture and the run's days, and hands them to rules/estimates/training_time/mfu_envelope.py, which
converts the rate into each covering row's FLOP convention and over its peak. Only a modelled rate of a job that
trains every weight is held against the envelope: a stated rate is judged against the model instead
(``throughput-above-model``), and an adapter fine-tune does less work per token than the runs the table holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rules.checks.base import Context
from rules.checks.facts.layout import training_group
from rules.checks.facts.model import architecture
from rules.checks.facts.schedule import quoted_run_plan
from rules.checks.facts.throughput import MODELLED, throughput_facts
from rules.estimates.training_time import mfu_envelope
from rules.estimates.training_time.mfu_envelope import EnvelopeComparison

# The evidence an envelope comparison gives; all None (and unjudged) when there is none.
FIGURES = ("published_envelope_mfu", "published_envelope_tflops_per_gpu", "published_envelope_peak_tflops",
           "published_envelope_convention", "published_envelope_run", "published_envelope_source",
           "modelled_mfu_in_envelope_convention", "mfu_beyond_published_envelope", "days_at_published_envelope")


@dataclass(frozen=True)
class PublishedEnvelope:
    """The envelope row a modelled rate is held against and how it compares, or why there is none."""

    comparison: EnvelopeComparison | None
    reason: str | None = None  # why there is no comparison
    days: float | None = None  # days to result at the row's MFU

    def evidence(self) -> dict[str, Any]:
        if self.comparison is None:
            return {"published_envelope": None, "published_envelope_reason": self.reason, **dict.fromkeys(FIGURES)}
        found, row = self.comparison, self.comparison.row
        return {"published_envelope": row.summary(), "published_envelope_reason": None,
                "published_envelope_mfu": row.mfu, "published_envelope_tflops_per_gpu": row.tflops_per_gpu,
                "published_envelope_peak_tflops": row.peak_tflops, "published_envelope_convention": row.convention,
                "published_envelope_run": row.run_words(), "published_envelope_source": row.source,
                "modelled_mfu_in_envelope_convention": found.modelled_mfu,
                "mfu_beyond_published_envelope": found.beyond, "days_at_published_envelope": self.days}


# The envelope table of each catalogue document seen, with the document it was built from (ids are reused once an
# object is gone): built once per process for the bundled catalogue instead of in every evaluation (54 µs of a
# 5 ms evaluation on this machine). A handful of documents at most: tests and custom catalogues.
_TABLES: dict[int, tuple[Any, mfu_envelope.EnvelopeTable]] = {}
_MAX_TABLES = 8


def _table(data: Any) -> mfu_envelope.EnvelopeTable:
    """Returns ``mfu_envelope.table_from_data(data)``, built once per catalogue document."""
    held = _TABLES.get(id(data))
    if held is None or held[0] is not data:
        if len(_TABLES) >= _MAX_TABLES:
            _TABLES.clear()
        held = _TABLES[id(data)] = (data, mfu_envelope.table_from_data(data))
    return held[1]


def published_envelope(ctx: Context) -> PublishedEnvelope:
    """Returns the modelled rate against the highest published MFU of its size class, GPU and precision."""
    return ctx.memo(_published_envelope)


def _published_envelope(ctx: Context) -> PublishedEnvelope:
    rate = throughput_facts(ctx)
    if rate is None or rate.modelled is None:
        return PublishedEnvelope(None, "the step-time model gives no rate for this job")
    if rate.source != MODELLED:
        return PublishedEnvelope(None, f"the run's rate is stated ({rate.source}), not modelled; the published "
                                       "envelope holds the step-time model's rate")
    training = ctx.job.training
    if ctx.value(training.objective) == "adapter":
        return PublishedEnvelope(None, "an adapter fine-tune does less work per token than the full-training runs "
                                       "the published envelope holds")
    data = ctx.inputs.catalogue.mfu_envelope()
    shape, group = architecture(ctx), training_group(ctx)
    sequence_length = ctx.value(training.sequence_length)
    if data is None or shape is None or group is None or not sequence_length:
        return PublishedEnvelope(None, "the catalogue holds no published envelope for this job")
    table = _table(data)
    counted = mfu_envelope.token_flop_shape(shape, int(sequence_length))
    size = table.size_class(counted.parameters)
    gpu_model = ctx.value(group.gpu.model)
    generation = (ctx.inputs.catalogue.gpu(gpu_model) or {}).get("architecture")
    precision = rate.modelled.mfu_precision
    rows = table.rows_for(size.name, generation, gpu_model, precision) if size is not None else ()
    found = mfu_envelope.binding_comparison(rate.modelled.tokens_per_s_per_gpu, counted, rows)
    if found is None:
        size_words = f"the {size.name} size class" if size is not None else "a model of this size"
        return PublishedEnvelope(None, f"no published, measured {precision} training MFU for {size_words} on "
                                       f"{generation or 'uncatalogued'} GPUs ({gpu_model}) in the catalogue's "
                                       "envelope table")
    plan = quoted_run_plan(ctx)
    days = (mfu_envelope.days_at_envelope(plan.schedule.run_days, plan.schedule.queue_wait_days,
                                          found.rate_over_envelope) if plan is not None else None)
    return PublishedEnvelope(found, days=days)

"""How the global batch splits into micro-batches on the job's data-parallel ranks."""

from __future__ import annotations

from rules.checks.base import Context
from rules.checks.facts.layout import layout
from rules.estimates.model import batch
from rules.estimates.model.batch import Accumulation
from rules.estimates.model.layout import Layout


def accumulation(ctx: Context, micro_batch: int | None = None, plan: Layout | None = None,
                 global_batch: int | None = None) -> Accumulation | None:
    """Returns the split of the global batch for the submitted (or the given) micro-batch; None if unknown.

    On the submitted layout with the submitted global batch, or on ``plan`` with ``global_batch`` sequences.
    """
    plan = plan or layout(ctx)
    training = ctx.job.training
    global_batch = global_batch or ctx.needed(training.global_batch)
    micro = micro_batch or ctx.needed(training.micro_batch)
    if plan is None or global_batch is None or micro is None:
        return None
    return batch.accumulation(int(global_batch), int(micro), plan.data_parallel)

"""Every sharding strategy sized on the quoted hardware, for the sharding check's comparison."""

from __future__ import annotations

from rules.checks.base import Context
from rules.checks.facts.communication import bandwidth, communication
from rules.checks.facts.memory import memory_estimate
from rules.errors import InconsistentInput
from rules.estimates.memory import sharding
from rules.estimates.memory.sharding import SHARDING_ORDER, ShardingOption


def sharding_options(ctx: Context) -> list[ShardingOption] | None:
    """Returns every strategy of SHARDING_ORDER sized on the quoted hardware; None when inputs are missing.

    A strategy the estimators refuse (fsdp-hybrid over part of a node) is listed with the reason; when they
    refuse every strategy the inputs themselves contradict each other, and that InconsistentInput is raised.
    """
    links = bandwidth(ctx)
    comfortable = ctx.setting("sharding.comfortable_headroom_fraction")
    options: list[ShardingOption] = []
    refusals: list[InconsistentInput] = []
    for strategy in SHARDING_ORDER:
        try:
            estimate = memory_estimate(ctx, sharding=strategy)
            step = communication(ctx, sharding=strategy)
        except InconsistentInput as error:
            options.append(sharding.refused_option(strategy, str(error)))
            refusals.append(error)
            continue
        if estimate is None or estimate.activations_bytes is None or step is None or links is None:
            if estimate is not None and estimate.activations_bytes is None:
                ctx.needed(ctx.job.training.micro_batch)
            return None
        options.append(sharding.sized_option(strategy, estimate, step, links, comfortable))
    if len(refusals) == len(SHARDING_ORDER):
        raise refusals[0]
    return sharding.with_common_usable(options)

"""sharding: the chosen sharding strategy fits, and no less aggressive one would fit with less communication."""

from __future__ import annotations

from rules.checks.base import Check, Context, Facts, Passing, Rule
from rules.checks.facts.batch import accumulation
from rules.checks.facts.layout import layout, training_group
from rules.checks.facts.sharding import sharding_options
from rules.estimates.memory.sharding import SHARDING_ORDER, ShardingOption, compare_strategies
from rules.status import Status

_RECOMMENDED = ("{recommended} needs {recommended_total_gib:.1f} GiB ({recommended_spare_fraction:.0%} spare) and "
                "moves {recommended_comm_gb_per_step:,.1f} GB per GPU per step ({recommended_comm_s_per_step:.2f} s)")


class Sharding(Check):
    id = "sharding"
    title = "Choose sharding deliberately"
    plan_item = "Choose sharding deliberately"
    thresholds = {"comfortable_headroom_fraction": "sharding.comfortable_headroom_fraction",
                  "max_communication_ratio": "sharding.max_communication_ratio"}
    headline = ("{sharding}: {chosen_total_gib:.1f} of {usable_gib:.1f} GiB, {chosen_comm_s_per_step:.2f} s "
                "communication per step; recommended {recommended}")
    rules = (
        Rule(Status.FAIL, "nothing-fits", lambda m: m.fitting_count == 0,
             "no sharding strategy fits {data_parallel} data-parallel ranks of {capacity_gib:.1f} GiB GPUs: the "
             "leanest, {leanest}, needs {leanest_total_gib:.1f} GiB per GPU of {usable_gib:.1f} GiB usable",
             "Quote more GPUs (more data-parallel ranks shard the state further), add tensor or pipeline "
             "parallelism, offload the optimizer state (parallelism.offload: optimizer), enable activation "
             "checkpointing, or quote GPUs with more memory."),
        Rule(Status.FAIL, "chosen-does-not-fit", lambda m: m.chosen_fits == False,  # noqa: E712
             "{sharding} needs {chosen_total_gib:.1f} GiB per GPU, above the usable {usable_gib:.1f} GiB, while "
             "{fitting_list} fit; " + _RECOMMENDED,
             "Set parallelism.sharding to {recommended}."),
        Rule(Status.WARN, "other-strategy-preferred",
             lambda m: (m.chosen_spare_fraction < m.comfortable_headroom_fraction)
             | (m.chosen_comm_ratio > m.max_communication_ratio),
             "{sharding} fits ({chosen_total_gib:.1f} of {usable_gib:.1f} GiB, {chosen_spare_fraction:.0%} spare, "
             "{chosen_comm_gb_per_step:,.1f} GB per GPU per step in {chosen_comm_s_per_step:.2f} s) but {why}",
             "Set parallelism.sharding to {recommended}, or measure both on a representative step: the most "
             "aggressive sharding is not automatically the fastest."),
    )
    passing = Passing(
        "chosen-is-recommended",
        "{sharding} fits with {chosen_spare_fraction:.0%} spare ({chosen_total_gib:.1f} of {usable_gib:.1f} GiB) "
        "and communicates least among the strategies that fit with {comfortable_headroom_fraction:.0%} "
        "spare ({chosen_comm_gb_per_step:,.1f} GB per GPU per step, {chosen_comm_s_per_step:.2f} s); "
        "fitting: {fitting_list}")

    def gather(self, ctx: Context) -> Facts:
        if not ctx.job.trains:
            return ctx.not_applicable("the submission has no training workload")
        plan = layout(ctx)
        options = sharding_options(ctx)
        split = accumulation(ctx)
        if plan is None or options is None or split is None:
            return ctx.insufficient("the strategies cannot be sized without the model, batch shape and hardware")
        # Whether the chosen strategy is close enough to the recommended one, or fits with enough to spare, is
        # for the rules to judge.
        compared = compare_strategies(options, plan.sharding)
        chosen, recommended, leanest = compared.chosen, compared.recommended, compared.leanest
        return Facts(evidence={
            "strategies": [o.row() for o in options],
            "sharding": chosen.strategy,
            "chosen_fits": chosen.fits,
            "chosen_total_gib": chosen.total_gib or 0.0,
            "chosen_spare_fraction": chosen.spare_fraction,
            "chosen_comm_gb_per_step": chosen.comm_gb_per_step or 0.0,
            "chosen_comm_s_per_step": chosen.comm_s_per_step or 0.0,
            "chosen_comm_ratio": compared.chosen_comm_ratio,
            "usable_gib": chosen.usable_gib,
            "capacity_gib": ctx.value(training_group(ctx).gpu.memory_gib) or 0,
            "fitting_count": len(compared.fitting),
            "fitting_list": ", ".join(o.strategy for o in compared.fitting) or "none",
            "comfortable_list": ", ".join(o.strategy for o in compared.comfortable) or "none",
            "recommended": recommended.strategy,
            "recommended_total_gib": recommended.total_gib or 0.0,
            "recommended_spare_fraction": recommended.spare_fraction,
            "recommended_comm_gb_per_step": recommended.comm_gb_per_step or 0.0,
            "recommended_comm_s_per_step": recommended.comm_s_per_step or 0.0,
            "leanest": leanest.strategy,
            "leanest_total_gib": leanest.total_gib or 0.0,
            "why": _why(chosen, recommended, compared.comfortable, ctx.threshold("comfortable_headroom_fraction")),
            "data_parallel": plan.data_parallel,
            "context_parallel": plan.context,
            "accumulation_steps": split.steps,
            "aggressiveness_order": ", ".join(SHARDING_ORDER),
        })


def _why(chosen: ShardingOption, recommended: ShardingOption, comfortable: tuple[ShardingOption, ...],
         headroom: float) -> str:
    """Returns, in words, what the recommended strategy offers against the chosen one (for the messages).

    Empty when the chosen strategy is the recommendation and fits comfortably; ``headroom`` is the
    policy's comfortable headroom, quoted in the words.
    """
    if recommended.strategy == chosen.strategy and chosen.comfortable:
        return ""
    if recommended.strategy == chosen.strategy:
        return f"no strategy leaves {headroom:.0%} of usable memory spare; {chosen.strategy} is the best that fits"
    tight = "" if chosen.comfortable else f"leaves less than {headroom:.0%} spare, and "
    return (f"{tight}{recommended.strategy} fits with {recommended.spare_fraction:.0%} spare "
            f"({recommended.total_gib:.1f} GiB) and moves {recommended.comm_gb_per_step:,.1f} GB per GPU per step "
            f"({recommended.comm_s_per_step:.2f} s){'' if comfortable else ' (nothing fits comfortably)'}")

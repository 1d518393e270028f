"""The sharding strategies side by side on one job's hardware: per-GPU memory and communication per step.

Each strategy is sized with rules/estimates/memory/step_memory.py and rules/estimates/communication/collectives.py;
this module
puts the figures in one row per strategy and picks the one that communicates least.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from rules.estimates.communication.collectives import StepCommunication, communication_time_s
from rules.estimates.communication.interconnect import Bandwidth
from rules.estimates.memory.step_memory import TrainingMemory
from rules.units import GB, GIB

# Least to most aggressive (what each strategy shards: ZeRO arXiv 1910.02054 §5; PyTorch FSDP's
# ShardingStrategy). Where two strategies communicate equally the less aggressive one is preferred.
SHARDING_ORDER: tuple[str, ...] = ("ddp", "zero1", "zero2", "fsdp-hybrid", "zero3", "fsdp-full")


@dataclass(frozen=True)
class ShardingOption:
    """One sharding strategy on the quoted hardware: per-GPU memory and communication per optimizer step."""

    strategy: str
    total_gib: float | None  # None when the estimators refuse the layout (see note)
    usable_gib: float
    spare_fraction: float
    fits: bool
    comfortable: bool  # fits with sharding.comfortable_headroom_fraction of usable memory to spare
    comm_gb_per_step: float | None  # bus bytes each GPU moves per optimizer step, GB
    comm_s_per_step: float | None  # their bandwidth-bound time at the job's busbw
    note: str = ""

    def row(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "total_gib": self.total_gib, "spare_fraction": self.spare_fraction,
                "fits": self.fits, "comfortable": self.comfortable, "comm_gb_per_step": self.comm_gb_per_step,
                "comm_s_per_step": self.comm_s_per_step, "note": self.note}


def sized_option(strategy: str, memory: TrainingMemory, step: StepCommunication, links: Bandwidth,
                 comfortable_headroom_fraction: float) -> ShardingOption:
    """Returns a strategy's row: its step's memory against usable memory, and its communication time.

    Comfortable: it fits with at least ``comfortable_headroom_fraction`` of usable memory spare.
    Communication time: :func:`rules.estimates.communication.collectives.communication_time_s` at the job's busbw.
    """
    spare, fitting = memory.spare_fraction, memory.within_usable
    seconds = communication_time_s(step, links.node_busbw_gbs, links.cluster_busbw_gbs)
    return ShardingOption(strategy, memory.total_bytes / GIB, memory.usable_bytes / GIB, spare, fitting,
                          fitting and spare >= comfortable_headroom_fraction, step.bus_bytes_per_gpu / GB, seconds)


def refused_option(strategy: str, reason: str) -> ShardingOption:
    """Returns the row of a strategy the estimators refuse for this layout (fsdp-hybrid on part of a node)."""
    return ShardingOption(strategy, None, 0.0, -1.0, False, False, None, None, reason)


def with_common_usable(options: list[ShardingOption]) -> list[ShardingOption]:
    """Returns the rows with the usable memory of the sized ones on every row (it does not depend on strategy)."""
    usable_gib = [o.usable_gib for o in options if o.total_gib is not None][-1]
    return [o if _same_float(o.usable_gib, usable_gib) else replace(o, usable_gib=usable_gib) for o in options]


def _same_float(a: float, b: float) -> bool:
    """Returns whether two floats are the same to the bit (0.0 and -0.0 differ), so that a row keeps its own."""
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def least_communication(options: list[ShardingOption]) -> ShardingOption | None:
    """Returns the option with the least communication time, the less aggressive one on a tie; None if empty."""
    usable = [o for o in options if o.comm_s_per_step is not None]
    if not usable:
        return None
    return min(usable, key=lambda o: (round(o.comm_s_per_step or 0.0, 9), SHARDING_ORDER.index(o.strategy)))


@dataclass(frozen=True)
class ShardingComparison:
    """The submitted strategy against the others on the same hardware, and the one to recommend."""

    chosen: ShardingOption
    fitting: tuple[ShardingOption, ...]  # the strategies whose step fits usable memory, least aggressive first
    comfortable: tuple[ShardingOption, ...]  # those of ``fitting`` with the comfortable headroom to spare
    recommended: ShardingOption
    leanest: ShardingOption  # the sized strategy that needs the least memory per GPU
    chosen_comm_ratio: float  # chosen communication time / the least among the candidates (1 when either is 0)


def compare_strategies(options: list[ShardingOption], chosen_strategy: str) -> ShardingComparison:
    """Returns ``chosen_strategy`` against the other rows of ``options`` and the strategy to recommend.

    The candidates are the strategies that fit comfortably, else those that fit; the recommendation is the
    candidate that communicates least (:func:`least_communication`), or the chosen strategy when it is a
    candidate and communicates no more than that one. The trade-off it weighs: each ZeRO stage shards more
    model state, and stage 3 moves more bytes per step than the others (ZeRO, arXiv 1910.02054: stages 1 and 2
    move 2Ψ per step as DDP does, §7.2.1; stage 3 moves 3Ψ, 1.5× as much, §7.2.2), so the most aggressive
    strategy that fits is not automatically the best. The ratio compares communication times, 1 when either
    strategy moves nothing.
    """
    chosen = next(o for o in options if o.strategy == chosen_strategy)
    fitting = tuple(o for o in options if o.fits)
    comfortable = tuple(o for o in fitting if o.comfortable)
    candidates = comfortable or fitting
    best = least_communication(list(candidates)) or chosen
    ratio = (chosen.comm_s_per_step / best.comm_s_per_step
             if chosen.comm_s_per_step and best.comm_s_per_step else 1.0)
    recommended = chosen if chosen in candidates and ratio <= 1 else best
    leanest = min((o for o in options if o.total_gib is not None), key=lambda o: o.total_gib or 0.0)
    return ShardingComparison(chosen, fitting, comfortable, recommended, leanest, ratio)

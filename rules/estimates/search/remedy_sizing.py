"""What a remedy must quote: the inputs that bring a check's figure within its policy limit.

Each function inverts an estimator a check uses, so that a proposed change is sized by the same arithmetic
that judges it: rack draw against its binding limit (rules/estimates/power_cost/power.py), PDU capacity after
derating and redundancy (``power.pdu_capacity_kw``), checkpoint save time (``checkpoint.checkpoint_save``),
the spare share of a capacity (``1 − need ÷ capacity``, as data-feed, host-ram and inference-capacity
define it), and a quote's priced total (``cost.priced_total``). Every proposed figure is rounded up to the
unit it is quoted in, so that the rounded figure still meets the limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rules.errors import InconsistentInput
from rules.estimates._args import (
    require_choice,
    require_fraction,
    require_non_negative,
    require_positive,
    require_positive_int,
)
from rules.estimates.power_cost.power import REDUNDANCY_MODES, pdus_required


def round_up(value: float, step: float) -> float:
    """Returns the smallest multiple of ``step`` that is at least ``value`` (a figure quoted in steps of ``step``).

    The multiple is rounded to the step's decimals first, so 28.300000000000001 in steps of 0.1 is 28.3, not 28.4.
    """
    require_non_negative("value", value)
    require_positive("step", step)
    decimals = max(0, -math.floor(math.log10(step))) + 6
    return math.ceil(round(value / step, decimals)) * step


def whole_minutes(minutes: float) -> int:
    """Returns ``minutes`` to the nearest whole minute, at least 1 (a checkpoint interval as a trainer takes it)."""
    require_positive("minutes", minutes)
    return max(1, round(minutes))


@dataclass(frozen=True)
class RackLoad:
    """One kind of rack as rack-power sized it: the nodes of one group it holds, their draw, and its limits."""

    nodes_per_rack: int
    draw_kw: float  # one rack's draw (power.rack_draw_kw)
    budget_kw: float | None  # facility power budget per rack, if stated
    cooling_kw: float | None  # heat one rack may reject, if known
    pdu_derated_kw: float  # PDU capacity after derating and redundancy (power.pdu_capacity_kw)

    @property
    def node_kw(self) -> float:
        """Returns the draw of one node: the rack's draw ÷ the nodes it holds (power.rack_draw_kw summed them)."""
        require_positive_int("nodes per rack", self.nodes_per_rack)
        return self.draw_kw / self.nodes_per_rack


def nodes_per_rack_within(limit_kw: float, node_kw: float, max_utilisation: float) -> int:
    """Returns the most nodes one rack holds with draw ≤ ``max_utilisation`` × ``limit_kw`` (0 when not one does).

    Inverse of power.rack_power's utilisation = draw ÷ limit with draw = nodes × node kW: ⌊u × limit ÷ node kW⌋.
    """
    require_positive("limit_kw", limit_kw)
    require_positive("node_kw", node_kw)
    require_fraction("max_utilisation", max_utilisation)
    return math.floor(round(max_utilisation * limit_kw / node_kw, 9))


def facility_limit_kw(load: RackLoad) -> float | None:
    """Returns the lower of a rack's facility limits (power budget and cooling), which no quoted item raises."""
    limits = [limit for limit in (load.budget_kw, load.cooling_kw) if limit is not None]
    return min(limits) if limits else None


def rack_split(nodes: int, per_rack: int) -> tuple[tuple[int, int], ...]:
    """Returns ``(racks, nodes per rack)`` kinds that place ``nodes`` at most ``per_rack`` to a rack.

    Full racks of ``per_rack`` nodes, then one rack for the remainder: ⌊n ÷ m⌋ racks of m and, when m does not
    divide n, one rack of n mod m (rack-power counts racks × nodes per rack against the nodes quoted).
    """
    require_positive_int("nodes", nodes)
    require_positive_int("per_rack", per_rack)
    full, remainder = divmod(nodes, per_rack)
    kinds = [(full, per_rack)] if full else []
    if remainder:
        kinds.append((1, remainder))
    return tuple(kinds)


def racks_needed(nodes: int, per_rack: int) -> int:
    """Returns ⌈nodes ÷ per_rack⌉: the racks that place ``nodes`` at most ``per_rack`` to a rack."""
    return sum(racks for racks, _ in rack_split(nodes, per_rack))


def pdu_rating_kw(draw_kw: float, pdus: int, redundancy: str, continuous_load_factor: float,
                  max_utilisation: float) -> float:
    """Returns the rating each of ``pdus`` equal PDUs needs so that the rack's draw is at most ``max_utilisation``
    of their derated capacity.

    Inverse of power.pdu_capacity_kw for PDUs of one rating: capacity = usable PDUs × rating × continuous-load
    factor, where N uses every PDU, N+1 all but one and 2N one feed (half of them); so rating = draw ÷
    (``max_utilisation`` × factor × usable PDUs). Sources: US NEC Art. 100 and 210.20(A) (80 % continuous
    load); Uptime Institute Tier Standard: Topology (N+1, 2N).
    """
    require_positive("draw_kw", draw_kw)
    require_choice("redundancy", redundancy, REDUNDANCY_MODES)
    require_fraction("continuous_load_factor", continuous_load_factor)
    require_fraction("max_utilisation", max_utilisation)
    if pdus < pdus_required(redundancy):
        raise InconsistentInput(f"{redundancy} redundancy needs at least {pdus_required(redundancy)} PDUs, got {pdus}")
    usable = {"N": pdus, "N+1": pdus - 1, "2N": pdus // 2}[redundancy]
    return draw_kw / (max_utilisation * continuous_load_factor * usable)


def write_gbs_for_save(checkpoint_gb: float, max_save_s: float, write_efficiency: float) -> float:
    """Returns the quoted storage write bandwidth (GB/s) that saves ``checkpoint_gb`` within ``max_save_s``.

    Inverse of checkpoint.checkpoint_save's storage bound: save_s = checkpoint GB ÷ (quoted write × efficiency).
    """
    require_positive("checkpoint_gb", checkpoint_gb)
    require_positive("max_save_s", max_save_s)
    require_fraction("write_efficiency", write_efficiency)
    return checkpoint_gb / (max_save_s * write_efficiency)


def capacity_with_spare(need: float, spare_fraction: float) -> float:
    """Returns the capacity that leaves ``spare_fraction`` of it spare above ``need``: need ÷ (1 − spare).

    Inverse of the spare share 1 − need ÷ capacity that data-feed (storage read), host-ram and
    inference-capacity judge against their policy margins.
    """
    require_non_negative("need", need)
    require_fraction("spare_fraction", spare_fraction)
    if spare_fraction >= 1:
        raise InconsistentInput(f"spare_fraction must be below 1, got {spare_fraction!r}")
    return need / (1 - spare_fraction)


def nodes_for_gpus(gpus: float, gpus_per_node: int) -> int:
    """Returns ⌈gpus ÷ GPUs per node⌉: the whole nodes that hold ``gpus`` GPUs."""
    require_positive("gpus", gpus)
    require_positive_int("gpus_per_node", gpus_per_node)
    return math.ceil(round(gpus / gpus_per_node, 9))


def nodes_for_window(nodes: int, window_fraction: float, target_fraction: float) -> int:
    """Returns the nodes that bring a run's share of its window from ``window_fraction`` to ``target_fraction``.

    First order, as rules/estimates/training_time/schedule.py sizes the GPUs a window needs: days scale with 1 ÷
    nodes at
    the quoted per-GPU rate, so nodes' = ⌈nodes × fraction ÷ target⌉; the full evaluation of the patched
    submission then says whether scaling efficiency and goodput hold at that size.
    """
    require_positive_int("nodes", nodes)
    require_positive("window_fraction", window_fraction)
    require_positive("target_fraction", target_fraction)
    return max(nodes, math.ceil(round(nodes * window_fraction / target_fraction, 9)))


def price_change(count_change: int, unit_price: float) -> float:
    """Returns what ``count_change`` more (or fewer) units add to a quote at ``unit_price`` each (cost.priced_total)."""
    require_non_negative("unit_price", unit_price)
    return count_change * unit_price


def rack_draw_kw(nodes: int, node_kw: float) -> float:
    """Returns the draw of a rack of ``nodes`` nodes of one kind: nodes × node kW (power.rack_draw_kw)."""
    require_positive_int("nodes", nodes)
    require_positive("node_kw", node_kw)
    return nodes * node_kw


def gpus_on(nodes: int, gpus_per_node: int) -> int:
    """Returns the GPUs of ``nodes`` nodes: nodes × GPUs per node."""
    require_positive_int("nodes", nodes)
    require_positive_int("gpus_per_node", gpus_per_node)
    return nodes * gpus_per_node


def compute_nics(gpus_per_node: int, min_nics_per_gpu: float, min_gbps_per_gpu: float,
                 quoted_gbps: float | None) -> tuple[int, float]:
    """Returns the compute NICs per node and the line rate of each (Gb/s) that give every GPU the policy's share.

    Inverse of gpu-nic-topology's per-GPU figures (NICs per node ÷ GPUs per node, Gb/s per node ÷ GPUs per
    node): ⌈GPUs × min NICs per GPU⌉ NICs, each at the quoted rate or, where that falls short,
    GPUs × min Gb/s per GPU ÷ NICs rounded up to a whole Gb/s.
    """
    require_positive_int("gpus_per_node", gpus_per_node)
    require_positive("min_nics_per_gpu", min_nics_per_gpu)
    require_non_negative("min_gbps_per_gpu", min_gbps_per_gpu)
    count = math.ceil(round(gpus_per_node * min_nics_per_gpu, 9))
    needed = round_up(gpus_per_node * min_gbps_per_gpu / count, 1)
    return count, max(needed, quoted_gbps or 0.0)


def host_ram_gib(required_gib: float, margin_fraction: float, gpu_memory_gib: float,
                 gpu_memory_ratio: float | None) -> float:
    """Returns the host RAM per node (GiB) that host-ram passes: the need with its margin spare, and at least
    ``gpu_memory_ratio`` × the node's GPU memory when the rule of thumb is to be met too.

    Inverse of host-ram's spare share (1 − need ÷ RAM) and of its ratio RAM ÷ GPU memory.
    """
    require_non_negative("gpu_memory_gib", gpu_memory_gib)
    need = capacity_with_spare(required_gib, margin_fraction)
    if gpu_memory_ratio is None:
        return need
    require_non_negative("gpu_memory_ratio", gpu_memory_ratio)
    return max(need, gpu_memory_gib * gpu_memory_ratio)


def added_cost(prices: list[float]) -> float:
    """Returns what changes add to a quote together: Σ of their price changes (negative when they save)."""
    return sum(prices, 0.0)


def cost_difference(after: float, before: float) -> float:
    """Returns how much a cost rose from ``before`` to ``after`` (negative when it fell)."""
    return after - before


def nodes_dividing_batch(min_nodes: int, gpus_per_node: int, gpus: int, data_parallel: int, global_batch: int,
                         micro_batch: int) -> int | None:
    """Returns the fewest nodes, at least ``min_nodes``, on which the global batch splits into whole rounds of
    micro-batches: data-parallel size = nodes × GPUs per node ÷ (the ``gpus`` ÷ ``data_parallel`` model-parallel
    GPUs of one replica), and global batch mod (micro-batch × data-parallel size) = 0 (rules/estimates/model/batch.py,
    as DeepSpeed and Megatron-LM assert). None when no count up to one micro-batch per rank does.
    """
    for name, value in (("min_nodes", min_nodes), ("gpus_per_node", gpus_per_node), ("gpus", gpus),
                        ("data_parallel", data_parallel), ("global_batch", global_batch), ("micro_batch", micro_batch)):
        require_positive_int(name, value)
    replica = gpus // data_parallel
    nodes = min_nodes
    while (nodes * gpus_per_node) // replica * micro_batch <= global_batch:
        ranks, rest = divmod(nodes * gpus_per_node, replica)
        if not rest and global_batch % (micro_batch * ranks) == 0:
            return nodes
        nodes += 1
    return None


def nodes_dividing_batch_below(max_nodes: int, gpus_per_node: int, gpus: int, data_parallel: int,
                               global_batch: int, micro_batch: int) -> int | None:
    """Returns the most nodes, at most ``max_nodes``, on which the global batch splits into whole micro-batch
    rounds (as :func:`nodes_dividing_batch` counts them); None when not even one replica's nodes do."""
    for name, value in (("max_nodes", max_nodes), ("gpus_per_node", gpus_per_node), ("gpus", gpus),
                        ("data_parallel", data_parallel), ("global_batch", global_batch), ("micro_batch", micro_batch)):
        require_positive_int(name, value)
    replica = gpus // data_parallel
    for nodes in range(max_nodes, 0, -1):
        ranks, rest = divmod(nodes * gpus_per_node, replica)
        if ranks and not rest and global_batch % (micro_batch * ranks) == 0:
            return nodes
    return None

"""Rack power draw against the facility budget, the PDUs (derated, with redundancy) and cooling; the site's racks.

Per rack: :func:`rack_power`. Over the quote's racks: :func:`site_power` places the node groups, sizes each
rack that can be sized under its redundancy mode, and sums the site's draw.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rules.errors import InconsistentInput
from rules.estimates._args import (
    require_choice,
    require_fraction,
    require_non_negative,
    require_positive,
    require_positive_int,
)

REDUNDANCY_MODES: tuple[str, ...] = ("N", "N+1", "2N")
# The fewest PDUs each redundancy mode is built from, by definition of the mode: N runs on what it has; N+1 has
# one PDU more than the load needs, so that one may fail; 2N feeds the rack from two independent sources (A and
# B), each through its own PDU (Uptime Institute, Tier Standard: Topology; ANSI/TIA-942 redundancy ratings).
PDUS_REQUIRED: dict[str, int] = {"N": 1, "N+1": 2, "2N": 2}
# US NEC 210.20(A): the overcurrent device must be rated ≥ 125 % of the continuous load (one lasting
# 3 h or more, Art. 100), i.e. a continuous load may use at most 80 % of the rating.
NEC_CONTINUOUS_LOAD_FACTOR = 0.8


@dataclass(frozen=True)
class NodePower:
    """Nodes of one model in a rack and their power figures."""

    count: int
    max_w: float  # nameplate maximum input (e.g. DGX H100: 10.2 kW, NVIDIA DGX H100 user guide)
    sustained_w: float | None = None  # measured long-run draw under training, if known

    @property
    def basis(self) -> str:
        """Return "measured" when a sustained figure is given, else "nameplate"."""
        return "measured" if self.sustained_w is not None else "nameplate"

    @property
    def watts(self) -> float:
        """Per-node watts used for the draw: sustained measured if given, else nameplate maximum."""
        return self.sustained_w if self.sustained_w is not None else self.max_w


@dataclass(frozen=True)
class PduGroup:
    """PDUs of one rating in a rack."""

    count: int
    rating_kw: float  # rated capacity, e.g. 17.3 kW for 3-phase 208 V 48 A (√3 × 208 V × 48 A)


@dataclass(frozen=True)
class RackPower:
    """A rack's draw against each of its limits, and the limit that binds."""

    draw_kw: float
    basis: str  # "measured", "nameplate" or "mixed": where the per-node watts came from
    budget_kw: float | None  # facility power budget for the rack, if given
    pdu_derated_kw: float  # PDU capacity usable for a continuous load under the redundancy mode
    cooling_kw: float | None  # rack cooling capacity, if given (all electrical draw becomes heat)
    limit_kw: float  # the lowest of the limits above
    binding_limit: str  # "budget", "pdu" or "cooling"
    headroom_kw: float  # max(0, limit − draw)
    shortfall_kw: float  # max(0, draw − limit)
    utilisation: float  # draw / limit: above 1 the rack is over its binding limit


def _validate_nodes(nodes: Iterable[NodePower]) -> list[NodePower]:
    groups = list(nodes)
    if not groups:
        raise InconsistentInput("a rack needs at least one node group")
    for g in groups:
        require_positive_int("node count", g.count)
        require_positive("max_w", g.max_w)
        if g.sustained_w is not None:
            require_positive("sustained_w", g.sustained_w)
    return groups


def rack_draw_kw(nodes: Iterable[NodePower]) -> float:
    """Return the rack draw in kW: Σ nodes × per-node watts (sustained measured, else nameplate max).

    Source: the acceptance plan's "Calculate power at sustained utilization"
    ("use measured long-run server power … to validate rack capacity");
    nameplate maxima from the vendor guides (DGX H100/H200 10.2 kW, DGX B200 14.3 kW, DGX A100 6.5 kW).
    """
    return sum(g.count * g.watts for g in _validate_nodes(nodes)) / 1000.0


def typical_sustained_w(max_w: float, sustained_fraction: float) -> float:
    """Returns a GPU node's typical sustained draw under training: nameplate maximum × the sustained fraction.

    Source of the default fraction (policy ``cost.sustained_power_fraction``): A. C. Newkirk et al.,
    "Empirically-Calibrated H100 Node Power Models for Reducing Uncertainty in AI Training Energy Estimation",
    arXiv:2506.14551 (2025): measured at Brookhaven National Laboratory on 8-GPU H100 (HGX) nodes, even
    computationally intensive training runs at 76 % of the node's 10.2 kW rating. For energy, not for sizing a
    rack: its peak (8.4 kW, 82 % of the rating, in Latif et al., IEEE Access 13, 2025, 61740-61747) is higher.
    """
    require_positive("max_w", max_w)
    require_fraction("sustained_fraction", sustained_fraction)
    return max_w * sustained_fraction


def quoted_node_count(nodes: Iterable[NodePower]) -> int:
    """Returns the nodes of ``nodes``: Σ count."""
    return sum(group.count for group in nodes)


def pdus_required(redundancy: str) -> int:
    """Returns the fewest PDUs a rack under ``redundancy`` ("N", "N+1", "2N") is built from (PDUS_REQUIRED).

    N needs one; N+1 one more than the load needs, so at least two; 2N one per feed of its A/B pair, so two.
    """
    return PDUS_REQUIRED[require_choice("redundancy", redundancy, REDUNDANCY_MODES)]


def pdu_capacity_kw(
    pdus: Iterable[PduGroup],
    redundancy: str,
    continuous_load_factor: float = NEC_CONTINUOUS_LOAD_FACTOR,
) -> float:
    """Return the PDU capacity (kW) a continuous load may use under the redundancy mode, after derating.

    Redundancy: "N" counts every PDU; "N+1" all but one (the largest is assumed lost); "2N" one feed
    of the A/B pair, i.e. half the PDUs (the smaller half when ratings differ), must carry the whole
    rack. The result is multiplied by ``continuous_load_factor`` (0.8 per US NEC Art. 100 / 210.20(A):
    a continuous load ≤ 80 % of the rating; other codes or listed-100 % equipment may differ).
    """
    required = pdus_required(redundancy)
    require_fraction("continuous_load_factor", continuous_load_factor)
    # (rating, count) from the weakest up: the PDUs are counted, never listed one by one, so a rack that
    # claims 2^53 PDUs costs no memory.
    groups: list[tuple[float, int]] = []
    for group in pdus:
        require_positive_int("PDU count", group.count)
        require_positive("rating_kw", group.rating_kw)
        groups.append((group.rating_kw, group.count))
    total = sum(count for _, count in groups)
    if not total:
        raise InconsistentInput("a rack needs at least one PDU")
    groups.sort()
    if redundancy == "N":
        usable = total
    elif total < required:
        raise InconsistentInput(f"{redundancy} redundancy needs at least {required} PDUs, got {total}")
    elif redundancy == "N+1":
        usable = total - 1
    else:  # 2N: the weaker feed carries everything
        usable = total // 2
    return _weakest_kw(groups, usable) * continuous_load_factor


def pdu_rating_needed_kw(draw_kw: float, continuous_load_factor: float = NEC_CONTINUOUS_LOAD_FACTOR) -> float:
    """Returns the PDU rating (kW) that carries ``draw_kw`` as a continuous load: draw ÷ the continuous-load factor
    (US NEC Art. 100 / 210.20(A): a continuous load may use at most 80 % of the rating), before any redundancy (2N
    needs it on each feed)."""
    require_non_negative("draw_kw", draw_kw)
    require_fraction("continuous_load_factor", continuous_load_factor)
    return draw_kw / continuous_load_factor


def _weakest_kw(groups: list[tuple[float, int]], n: int) -> float:
    """Returns the summed rating of the ``n`` weakest PDUs of ``groups`` ((rating, count), weakest first)."""
    capacity = 0.0
    for rating, count in groups:
        taken = min(count, n)
        capacity += rating * taken
        n -= taken
        if not n:
            break
    return capacity


def rack_power(
    nodes: Iterable[NodePower],
    pdus: Iterable[PduGroup],
    redundancy: str,
    *,
    continuous_load_factor: float = NEC_CONTINUOUS_LOAD_FACTOR,
    budget_kw: float | None = None,
    cooling_kw: float | None = None,
) -> RackPower:
    """Return the rack's draw against its power budget, derated PDU capacity and cooling, and which binds.

    Draw: :func:`rack_draw_kw`; PDUs: :func:`pdu_capacity_kw` (NEC 80 % continuous-load rule and the
    redundancy mode); cooling: essentially all electrical input leaves the rack as heat, so the
    cooling capacity (kW of heat) is compared with the draw directly. Budget and cooling are limits only
    when given. Ties bind in the order budget, pdu, cooling. Sources: NVIDIA DGX user guides (maximum
    input); US NEC Art. 100 and 210.20(A).
    """
    groups = _validate_nodes(nodes)
    draw = rack_draw_kw(groups)
    bases = {g.basis for g in groups}
    basis = bases.pop() if len(bases) == 1 else "mixed"
    pdu = pdu_capacity_kw(pdus, redundancy, continuous_load_factor)
    limits: list[tuple[float, str]] = []
    if budget_kw is not None:
        require_positive("budget_kw", budget_kw)
        limits.append((budget_kw, "budget"))
    limits.append((pdu, "pdu"))
    if cooling_kw is not None:
        require_positive("cooling_kw", cooling_kw)
        limits.append((cooling_kw, "cooling"))
    limit, binding = min(limits, key=lambda item: item[0])
    return RackPower(
        draw_kw=draw,
        basis=basis,
        budget_kw=budget_kw,
        pdu_derated_kw=pdu,
        cooling_kw=cooling_kw,
        limit_kw=limit,
        binding_limit=binding,
        headroom_kw=max(0.0, limit - draw),
        shortfall_kw=max(0.0, draw - limit),
        utilisation=draw / limit,
    )


# The figures of a node's power readings that may stand for its sustained draw (policy power.sustained_statistic).
SUSTAINED_STATISTICS: tuple[str, ...] = ("p95", "mean")


@dataclass(frozen=True)
class NodeReadings:
    """One node's power readings over a run, as parsers.csv_series summarises them."""

    name: str
    samples: int
    mean_w: float
    p95_w: float  # nearest-rank 95th percentile
    window_s: float | None  # first to last timestamp; None without timestamps


@dataclass(frozen=True)
class SustainedDraw:
    """The sustained draw per node a set of readings gives: the highest node's statistic."""

    w_per_node: float
    node: str
    statistic: str
    samples: int
    window_s: float | None


def sustained_draw(nodes: Iterable[NodeReadings], statistic: str) -> SustainedDraw:
    """Returns the sustained draw per node: the highest node's ``statistic`` (p95 or mean) of its readings.

    The highest node stands for every node of the group, so that a rack holding that node's twins is sized for
    it. p95 is the level the draw stays at or below in 95% of the samples; the mean is the energy average
    (policy power.sustained_statistic says which and why).
    """
    require_choice("statistic", statistic, SUSTAINED_STATISTICS)
    best: NodeReadings | None = None
    for node in nodes:
        require_positive("mean_w", node.mean_w)
        require_positive("p95_w", node.p95_w)
        if best is None or _figure(node, statistic) > _figure(best, statistic):
            best = node
    if best is None:
        raise InconsistentInput("no node's power readings to take a sustained draw from")
    return SustainedDraw(_figure(best, statistic), best.name, statistic, best.samples, best.window_s)


def _figure(node: NodeReadings, statistic: str) -> float:
    return node.p95_w if statistic == "p95" else node.mean_w

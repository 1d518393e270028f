"""The quote's racks together: where its nodes are placed, each rack sized under its redundancy mode, the site's draw.

One rack's draw against its limits is :func:`rules.estimates.power_cost.power.rack_power`; this module applies it to
every kind of rack the quote lists, counts the nodes the racks place against those the quote has, and sums
the draw over every rack built. Source: the acceptance plan's "Calculate power at sustained utilization"
("validate rack capacity" with measured long-run server power).
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.estimates._args import require_non_negative_int, require_positive_int
from rules.estimates.power_cost.power import (
    NEC_CONTINUOUS_LOAD_FACTOR,
    NodePower,
    PduGroup,
    RackPower,
    pdus_required,
    rack_power,
)


@dataclass(frozen=True)
class RackKind:
    """One kind of rack of the quote: how many are built, the nodes one holds, its PDUs, redundancy and limits."""

    name: str
    count: int  # racks of this kind
    placed: tuple[tuple[str, int], ...]  # (node group, nodes of it in one rack), for the groups the quote has
    nodes: tuple[NodePower, ...]  # the power of those nodes, for the groups whose maximum power is known
    pdus: tuple[PduGroup, ...]
    redundancy: str = "N"
    budget_kw: float | None = None
    cooling_kw: float | None = None


@dataclass(frozen=True)
class Site:
    """The racks of a quote and the nodes it quotes."""

    racks: tuple[RackKind, ...]
    quoted_nodes: tuple[tuple[str, int], ...]  # (node group, nodes quoted), in the quote's order
    unknown_groups: tuple[tuple[str, str], ...] = ()  # (rack, group) a rack names that the quote does not have


@dataclass(frozen=True)
class RackSizing:
    """One kind of rack: its PDUs against what its redundancy mode needs, and its power where it can be sized."""

    rack: RackKind
    pdus: int  # PDUs in one rack
    pdus_required: int  # the fewest its redundancy mode is built from (power.PDUS_REQUIRED)
    power: RackPower | None  # None when it holds no node of known power, has no PDU, or too few for its mode

    @property
    def pdus_short(self) -> int:
        """PDUs missing from what the redundancy mode needs, 0 when it has enough."""
        return max(0, self.pdus_required - self.pdus)


@dataclass(frozen=True)
class SizedRack:
    """A kind of rack whose power could be sized, and its draw against its limits."""

    rack: RackKind
    power: RackPower


@dataclass(frozen=True)
class SitePower:
    """Every kind of rack sized, the one nearest its limit, the site's draw, and where the nodes are placed."""

    racks: tuple[RackSizing, ...]
    sized: tuple[SizedRack, ...]  # those of ``racks`` whose power could be sized
    worst: SizedRack | None  # the sized rack with the highest utilisation of its binding limit (first on a tie)
    site_kw: float  # Σ draw × racks built, over the sized kinds
    racks_over_limit: int  # sized kinds drawing more than their binding limit
    short_of_pdus: tuple[RackSizing, ...]  # kinds holding nodes with fewer PDUs than their redundancy mode needs
    placed_nodes: int  # Σ nodes per rack × racks, over the groups the quote has
    quoted_nodes: int
    unplaced: tuple[tuple[str, int, int], ...]  # (group, placed, quoted) for each group whose counts differ
    unknown_groups: tuple[tuple[str, str], ...]  # (rack, group) a rack names that the quote does not have

    @property
    def placement_problems(self) -> int:
        """Node groups placed other than quoted, plus the unknown groups the racks name."""
        return len(self.unplaced) + len(self.unknown_groups)


def size_rack(rack: RackKind, continuous_load_factor: float = NEC_CONTINUOUS_LOAD_FACTOR) -> RackSizing:
    """Returns one kind of rack sized: :func:`rules.estimates.power_cost.power.rack_power` under its redundancy mode.

    Not sized (``power`` None) when it holds no node of known power or has no PDU, and when it has fewer PDUs
    than its mode is built from (:func:`rules.estimates.power_cost.power.pdus_required`): its capacity under the mode it
    claims is then undefined.
    """
    require_positive_int("rack count", rack.count)
    pdus = sum(group.count for group in rack.pdus)
    required = pdus_required(rack.redundancy)
    if not rack.nodes or not rack.pdus or pdus < required:
        return RackSizing(rack, pdus, required, None)
    result = rack_power(rack.nodes, rack.pdus, rack.redundancy, continuous_load_factor=continuous_load_factor,
                        budget_kw=rack.budget_kw, cooling_kw=rack.cooling_kw)
    return RackSizing(rack, pdus, required, result)


def site_power(site: Site, continuous_load_factor: float = NEC_CONTINUOUS_LOAD_FACTOR) -> SitePower:
    """Returns every kind of rack sized (:func:`size_rack`), the site's draw and the placement of the nodes.

    Site draw: Σ over the kinds of rack of one rack's draw × the racks built. Placement: a group's nodes
    placed are Σ nodes per rack × racks over the racks that hold it, to be compared with the nodes quoted.
    """
    racks = tuple(size_rack(rack, continuous_load_factor) for rack in site.racks)
    sized = tuple(SizedRack(rack.rack, rack.power) for rack in racks if rack.power is not None)
    placed = dict.fromkeys((group for group, _ in site.quoted_nodes), 0)
    for rack in site.racks:
        for group, per_rack in rack.placed:
            require_non_negative_int("nodes per rack", per_rack)
            placed[group] += per_rack * rack.count
    quoted = dict(site.quoted_nodes)
    return SitePower(
        racks=racks,
        sized=sized,
        worst=max(sized, key=lambda rack: rack.power.utilisation) if sized else None,
        site_kw=sum(rack.power.draw_kw * rack.rack.count for rack in sized),
        racks_over_limit=sum(1 for rack in sized if rack.power.utilisation > 1),
        short_of_pdus=tuple(rack for rack in racks if rack.rack.nodes and rack.rack.pdus and rack.pdus_short),
        placed_nodes=sum(placed.values()),
        quoted_nodes=sum(count for _, count in site.quoted_nodes),
        unplaced=tuple((group, placed[group], quoted[group]) for group in quoted if placed[group] != quoted[group]),
        unknown_groups=site.unknown_groups,
    )


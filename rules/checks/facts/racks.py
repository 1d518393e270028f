"""The quote's racks as the power estimators take them: the nodes one rack holds, its PDUs and its limits."""

from __future__ import annotations

from typing import Any

from rules.checks.base import Context
from rules.checks.facts.pointers import MEASURED_POWER, NODE_GROUPS, RACKS
from rules.estimates.power import NodePower, PduGroup
from rules.estimates.site_power import RackKind, Site
from rules.inputs import escape


def sustained_w_per_node(ctx: Context) -> float | None:
    """Returns the measured long-run draw of one GPU node under training, W; None when not measured."""
    return ctx.num(MEASURED_POWER)


def quoted_site(ctx: Context) -> Site | None:
    """Returns the racks and the node groups of the quote; None when an input that sizes them is missing.

    A node group's nodes draw their measured sustained power when the quote has GPUs in them and a measurement
    is given, else their nameplate maximum. A rack without a stated cooling capacity is limited by the
    policy's air-cooling limit when it is air-cooled. The inputs missing (a node's maximum power, a rack's
    PDUs) are noted on ``ctx``; the nodes quoted are read only when none is.
    """
    groups = {group.get("name"): (index, group) for index, group in enumerate(ctx.inputs.get(NODE_GROUPS, []))}
    sustained_w = sustained_w_per_node(ctx)
    racks: list[RackKind] = []
    unknown: list[tuple[str, str]] = []
    for index, rack in enumerate(ctx.inputs.get(RACKS) or []):
        base = f"{RACKS}/{index}"
        count = int(ctx.num(f"{base}/count", 1))
        placed: list[tuple[str, int]] = []
        nodes: list[NodePower] = []
        for name, per_rack in rack.get("node_groups", {}).items():
            if name not in groups:
                unknown.append((rack.get("name"), name))
                continue
            group_index, group = groups[name]
            placed.append((name, int(per_rack)))
            ctx.num(f"{base}/node_groups/{escape(name)}")
            max_w = ctx.need(f"{NODE_GROUPS}/{group_index}/max_power_w")
            if max_w is not None:
                nodes.append(NodePower(int(per_rack), max_w, sustained_w if _has_gpus(group) else None))
        pdus = tuple(PduGroup(int(ctx.num(f"{base}/pdus/{p}/count")), ctx.num(f"{base}/pdus/{p}/rating_kw"))
                     for p in range(len(rack.get("pdus", []))))
        if not pdus:
            ctx.reader.missing.append(f"{base}/pdus")
        redundancy = ctx.get(f"{base}/redundancy", "N")
        budget_kw = ctx.num(f"{base}/power_budget_kw")
        cooling_kw = ctx.num(f"{base}/cooling_capacity_kw")
        if cooling_kw is None and ctx.get(f"{base}/cooling") == "air":
            cooling_kw = ctx.setting("power.air_cooling_limit_kw")
        racks.append(RackKind(rack.get("name", f"rack {index}"), count, tuple(placed), tuple(nodes), pdus,
                              redundancy, budget_kw, cooling_kw))
    if ctx.missing:
        return None
    quoted = tuple((name, int(ctx.num(f"{NODE_GROUPS}/{index}/count", 0))) for name, (index, _) in groups.items())
    return Site(tuple(racks), quoted, tuple(unknown))


def _has_gpus(group: dict[str, Any]) -> bool:
    return bool((group.get("gpu") or {}).get("count"))

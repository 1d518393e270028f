"""The quote's racks as the power estimators take them: the nodes one rack holds, its PDUs and its limits."""

from __future__ import annotations

from dataclasses import dataclass

from rules.artifacts import POWER_CSV
from rules.checks.base import Context
from rules.checks.facts.artifacts import read_artifact, source
from rules.estimates.power_cost.power import NodePower, NodeReadings, PduGroup, sustained_draw
from rules.estimates.power_cost.site_power import RackKind, Site
from rules.job.cluster import QuotedNodeGroup
from rules.job.fields import member_pointer


@dataclass(frozen=True)
class MeasuredDraw:
    """The measured long-run draw of one GPU node under training, where it comes from, and what was not used."""

    w_per_node: float | None  # None when not measured
    source: str | None
    not_used: str = ""
    statistic: str | None = None  # the readings' figure taken (p95, mean) when a CSV of readings gave the draw


def sustained_w_per_node(ctx: Context) -> float | None:
    """Returns the measured long-run draw of one GPU node under training, W; None when not measured."""
    return measured_draw(ctx).w_per_node


def measured_draw(ctx: Context) -> MeasuredDraw:
    """Returns the measured sustained draw per node: from measurements.power_csv, else power.sustained_w_per_node.

    The CSV's node readings give the highest node's policy statistic (power.sustained_statistic, p95 or mean:
    rules.estimates.power_cost.power.sustained_draw); GPU readings alone do not give a node's draw and are not used.
    """
    return ctx.memo(_measured_draw)


def _measured_draw(ctx: Context) -> MeasuredDraw:
    parsed = read_artifact(ctx, POWER_CSV)
    stated = ctx.job.measurements.power.sustained_w_per_node
    typed = ctx.value(stated)
    not_used = ""
    if parsed is not None and parsed["scope"] == "gpu":
        not_used = ("measurements.power_csv: its readings are per GPU, and a node also draws for its CPUs, memory, "
                    "NICs and fans; export the node's readings (IPMI/DCMI, PDU outlet) instead")
    elif parsed is not None:
        readings = [NodeReadings(e["name"], e["samples"], e["mean_w"], e["p95_w"], e["window_s"])
                    for e in parsed["entities"]]
        draw = sustained_draw(readings, ctx.setting("power.sustained_statistic"))
        window = f" over {draw.window_s:,.0f} s" if draw.window_s is not None else ""
        words = (f"{draw.statistic} of {draw.samples} readings of node {draw.node}{window}, "
                 f"{source(POWER_CSV)}")
        replaced = "measurements.power.sustained_w_per_node: measurements.power_csv replaces it"
        return MeasuredDraw(draw.w_per_node, words, replaced if typed is not None else "", draw.statistic)
    if typed is not None:
        return MeasuredDraw(typed, stated.pointer, not_used)
    return MeasuredDraw(None, None, not_used)


def quoted_site(ctx: Context, measured: bool = True) -> Site | None:
    """Returns the racks and the node groups of the quote; None when an input that sizes them is missing.

    A node group's nodes draw their measured sustained power when the quote has GPUs in them and a measurement
    is given (and ``measured``), else their nameplate maximum. A rack without a stated cooling capacity is
    limited by the policy's air-cooling limit when it is air-cooled. The inputs missing (a node's maximum power,
    a rack's PDUs) are noted on ``ctx``; the nodes quoted are read only when none is.
    """
    cluster = ctx.job.cluster
    groups = {group.name.value: group for group in cluster.node_groups}
    sustained_w = sustained_w_per_node(ctx) if measured else None
    racks: list[RackKind] = []
    unknown: list[tuple[str, str]] = []
    for index, rack in enumerate(cluster.racks):
        count = int(ctx.value(rack.count))
        placed: list[tuple[str, int]] = []
        nodes: list[NodePower] = []
        for name, per_rack in rack.node_groups:
            if name not in groups:
                unknown.append((rack.name.value, name))
                continue
            group, in_rack = groups[name], int(ctx.value(per_rack))
            placed.append((name, in_rack))
            max_w = ctx.needed(group.max_power_w)
            if max_w is not None:
                nodes.append(NodePower(in_rack, max_w, sustained_w if _has_gpus(group) else None))
        pdus = tuple(PduGroup(int(ctx.value(pdu.count)), ctx.value(pdu.rating_kw)) for pdu in rack.pdus)
        if not pdus:
            ctx.reader.missing.append(member_pointer(rack, "pdus"))
        redundancy = ctx.value(rack.redundancy)
        budget_kw = ctx.value(rack.power_budget_kw)
        cooling_kw = ctx.value(rack.cooling_capacity_kw)
        if cooling_kw is None and ctx.value(rack.cooling) == "air":
            cooling_kw = ctx.setting("power.air_cooling_limit_kw")
        racks.append(RackKind(rack.name.or_(f"rack {index}"), count, tuple(placed), tuple(nodes), pdus,
                              redundancy, budget_kw, cooling_kw))
    if ctx.missing:
        return None
    quoted = tuple((name, int(ctx.value(group.count) or 0)) for name, group in groups.items())
    return Site(tuple(racks), quoted, tuple(unknown))


def quoted_node_power(ctx: Context, measured: bool = True) -> tuple[NodePower, ...] | None:
    """Returns the power of every node group the quote counts, racked or not (GPU nodes at their measured sustained
    draw when one is given and ``measured``, else every node at its nameplate maximum); None when a group's maximum
    power is missing (noted on ``ctx``)."""
    sustained_w = sustained_w_per_node(ctx) if measured else None
    nodes: list[NodePower] = []
    lacking = False
    for group in ctx.job.cluster.node_groups:
        count = ctx.value(group.count)
        if not count:
            continue
        max_w = ctx.needed(group.max_power_w)
        if max_w is None:
            lacking = True
        else:
            nodes.append(NodePower(int(count), max_w, sustained_w if _has_gpus(group) else None))
    return None if lacking else tuple(nodes)


def _has_gpus(group: QuotedNodeGroup) -> bool:
    return bool(group.gpu.count.value)

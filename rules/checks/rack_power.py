"""rack-power: every rack's sustained draw fits its power budget, derated PDUs and cooling.

A quote that places no nodes in racks is decided too: a warning giving its IT load (measured sustained draw where
given, else nameplate maximum) and the PDU rating that load needs, since the racks, PDUs and cooling are not quoted.

This check, the one decided for every quote (training, serving or both), also warns when a node group's GPU or server
is not in the catalogue and the quote supplies its figures itself (``not-in-catalogue``): they are used as given,
unchecked against any datasheet, by every check that reads them. The warning ranks after the fail rules, so it never
hides a failure, and before the other warnings, whose figures stay in the evidence; the figures are listed in the
evidence (``vendor_supplied_figures``) whatever the check concludes, insufficient data included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.checks.base import Check, Context, Facts, Passing, Rule
from rules.checks.facts.racks import measured_draw, quoted_node_power, quoted_site
from rules.checks.facts.vendor_figures import vendor_supplied_rows
from rules.estimates.power_cost.power import pdu_rating_needed_kw, quoted_node_count, rack_draw_kw
from rules.estimates.power_cost.site_power import SitePower, SizedRack, site_power
from rules.job.vendor_figures import GPU
from rules.status import Basis, FigureFrom, Status


def _vendor_supplied(values: Mapping[str, Any]) -> str:
    """Returns the words of ``not-in-catalogue``: each uncatalogued GPU or server, its node group and its figures."""
    described: dict[tuple[str, str, str | None], list[str]] = {}
    for row in values["vendor_supplied_figures"]:
        key = (row["node_group"], row["hardware"], row["id"])
        described.setdefault(key, []).append(f"{row['pointer']} = {row['value']}")
    parts = [f"node group {group}: {'GPU' if hardware == GPU else 'server'} "
             f"{repr(hardware_id) if hardware_id is not None else '(model not named)'} is not in the catalogue, and "
             f"the quote supplies its figures: {', '.join(figures)}" for (group, hardware, hardware_id), figures
             in described.items()]
    return ("; ".join(parts) + ". These vendor-supplied figures are used as given, unchecked against any datasheet, "
            "by every check that reads them")


class RackPower(Check):
    id = "rack-power"
    title = "Calculate power at sustained utilization"
    plan_item = "Calculate power at sustained utilization"
    thresholds = {"continuous_load_fraction": "power.continuous_load_fraction",
                  "warn_fraction": "power.warn_fraction"}
    headline = ("{worst_rack}: {worst_draw_kw:.1f} kW of {worst_limit_kw:.1f} kW ({worst_binding}); "
                "site {site_kw:.1f} kW")
    rules = (
        Rule(Status.FAIL, "nodes-not-placed", lambda m: m.unplaced_nodes != 0,
             "the racks place {placed_nodes} nodes but the quote has {quoted_nodes}: {placement_note}",
             "List every node group in a rack's node_groups so that its draw is counted."),
        Rule(Status.FAIL, "redundancy-unmet", lambda m: m.redundancy_unmet > 0,
             "{redundancy_note}",
             "Quote at least two PDUs per rack (one per feed) for N+1 or 2N redundancy."),
        Rule(Status.FAIL, "over-limit", lambda m: m.worst_utilisation > 1,
             "rack {worst_rack} draws {worst_draw_kw:.1f} kW ({draw_basis}), above its {worst_binding} limit of "
             "{worst_limit_kw:.1f} kW (budget {worst_budget_kw}, PDUs {worst_pdu_derated_kw:.1f} kW after "
             "{continuous_load_fraction:.0%} continuous-load derating, cooling {worst_cooling_kw}); "
             "{racks_over_limit} rack type(s) over a limit; site {site_kw:.1f} kW",
             "Spread the nodes over more racks, raise the rack's power budget and PDU rating, or add cooling; "
             "a measured sustained draw (measurements.power) may replace the nameplate maximum."),
        Rule(Status.WARN, "near-limit", lambda m: m.worst_utilisation > m.warn_fraction,
             "rack {worst_rack} draws {worst_draw_kw:.1f} kW ({draw_basis}), {worst_utilisation:.0%} of its "
             "{worst_binding} limit of {worst_limit_kw:.1f} kW; site {site_kw:.1f} kW",
             "Measure long-run power and inlet temperatures at full training load before commissioning."),
        # Ranked after the failures (it never hides one) and after near-limit, which a change of racks answers (the
        # remedies read a check's rule), and before no-racks-quoted, whose figures stay in the evidence: it says on
        # what the whole evaluation's hardware figures rest. Its own figures stay in the evidence when another decides.
        Rule(Status.WARN, "not-in-catalogue", lambda m: m.vendor_supplied_figure_count > 0,
             _vendor_supplied,
             "Confirm each vendor-supplied figure against the vendor's published datasheet before accepting the "
             "quote, and measure what acceptance can measure (measurements.power, measurements.peak_memory), or "
             "quote a GPU and server the catalogue holds (docs/first-quote.md lists their ids), whose figures are "
             "read from their datasheets."),
        # Without racks nothing is placed, derated or cooled: the placement, PDU and limit figures are unjudged, and
        # the quote's IT load is what the facility must supply.
        Rule(Status.WARN, "no-racks-quoted", lambda m: m.rack_kinds_quoted == 0,
             "the quote places no nodes in racks: its {quoted_nodes} nodes draw {site_kw:.1f} kW of IT load "
             "({draw_basis}), which needs {pdu_rating_needed_kw:.1f} kW of PDU rating at the "
             "{continuous_load_fraction:.0%} continuous-load limit (on each feed under 2N); racks, PDUs and cooling "
             "are not quoted, so no rack's power, PDUs or cooling are judged",
             "Quote the racks (quote.racks: nodes per rack, power budget, PDUs and their ratings, redundancy, cooling "
             "and its capacity) so that each rack is sized, or have the facility confirm in writing that it supplies "
             "{site_kw:.1f} kW of IT power and cooling for these nodes (at least {pdu_rating_needed_kw:.1f} kW of PDU "
             "rating)."),
    )
    passing = Passing("within-limits", "every rack fits: the fullest, {worst_rack}, draws {worst_draw_kw:.1f} kW "
                      "({draw_basis}) of its {worst_binding} limit of {worst_limit_kw:.1f} kW; site {site_kw:.1f} kW")

    def gather(self, ctx: Context) -> Facts:
        cluster = ctx.job.cluster
        if not cluster.racks:
            return _unracked(ctx)
        facility = quoted_site(ctx)
        if facility is None:
            return ctx.insufficient("rack power needs every node's maximum power and every rack's PDUs",
                                    **_vendor_evidence(ctx))
        sized = site_power(facility, ctx.threshold("continuous_load_fraction"))
        draw = measured_draw(ctx)
        measured = draw.w_per_node is not None
        evidence: dict[str, Any] = {
            "racks": [_row(rack) for rack in sized.sized],
            "site_kw": sized.site_kw,
            "quoted_nodes": sized.quoted_nodes,
            "placed_nodes": sized.placed_nodes,
            "unplaced_nodes": sized.placement_problems,
            "placement_note": _placement_note(sized),
            "redundancy_unmet": len(sized.short_of_pdus),
            "redundancy_note": _redundancy_note(sized),
            "racks_over_limit": sized.racks_over_limit,
            "rack_kinds_quoted": len(cluster.racks),
            "draw_basis": FigureFrom.MEASURED_SUSTAINED_DRAW if measured else FigureFrom.NAMEPLATE_MAXIMUM,
            **_worst(sized.worst),
        }
        vendor = _vendor_evidence(ctx)
        evidence.update(vendor)
        if draw.not_used:
            evidence["power_measurement_not_used"] = draw.not_used
        if draw.statistic:
            evidence["sustained_statistic"] = draw.statistic
        if measured:
            nameplate = site_power(quoted_site(ctx, measured=False), ctx.threshold("continuous_load_fraction"))
            evidence.update(measurement_source=draw.source, measured_w_per_node=draw.w_per_node,
                            nameplate_site_kw=nameplate.site_kw,
                            nameplate_worst_draw_kw=_worst(nameplate.worst)["worst_draw_kw"])
        return Facts(evidence=evidence, basis=Basis.MEASURED if measured else Basis.ESTIMATED,
                     unjudged=_VENDOR_FIGURES if not vendor else frozenset())


# What a quote without racks leaves unjudged: nothing is placed, no PDU derated, no rack's limit known.
_RACK_FIGURES = frozenset({"unplaced_nodes", "redundancy_unmet", "worst_utilisation"})
# What a quote whose hardware the catalogue holds leaves unjudged: no figure is vendor-supplied (the evidence then
# names none, so the records of catalogued hardware do not change).
_VENDOR_FIGURES = frozenset({"vendor_supplied_figure_count"})


def _vendor_evidence(ctx: Context) -> dict[str, Any]:
    """Returns the evidence of the figures the quote supplies for hardware the catalogue lacks; empty when none."""
    rows = vendor_supplied_rows(ctx)
    return {"vendor_supplied_figures": rows, "vendor_supplied_figure_count": len(rows)} if rows else {}


def _unracked(ctx: Context) -> Facts:
    """Returns the facts of a quote that places no nodes in racks: the IT load of every node it counts (measured
    sustained draw where given), and the PDU rating that load needs; insufficient without a node's maximum power."""
    nodes = quoted_node_power(ctx)
    vendor = _vendor_evidence(ctx)
    if nodes is None:
        return ctx.insufficient("the quote places no nodes in racks, and its IT load needs every node's maximum power",
                                **vendor)
    draw = measured_draw(ctx)
    measured = draw.w_per_node is not None
    site_kw = rack_draw_kw(nodes)
    evidence: dict[str, Any] = {
        "racks": [],
        "rack_kinds_quoted": 0,
        "site_kw": site_kw,
        "quoted_nodes": quoted_node_count(nodes),
        "draw_basis": FigureFrom.MEASURED_SUSTAINED_DRAW if measured else FigureFrom.NAMEPLATE_MAXIMUM,
        "pdu_rating_needed_kw": pdu_rating_needed_kw(site_kw, ctx.threshold("continuous_load_fraction")),
        **vendor,
    }
    if draw.not_used:
        evidence["power_measurement_not_used"] = draw.not_used
    if measured:
        nameplate = quoted_node_power(ctx, measured=False) or ()
        evidence.update(measurement_source=draw.source, measured_w_per_node=draw.w_per_node,
                        nameplate_site_kw=rack_draw_kw(nameplate))
    return Facts(evidence=evidence, basis=Basis.MEASURED if measured else Basis.ESTIMATED,
                 unjudged=_RACK_FIGURES | (_VENDOR_FIGURES if not vendor else frozenset()))


def _row(rack: SizedRack) -> dict[str, Any]:
    """Returns the evidence row of a sized rack (the stable names of DESIGN.md and its utilisation)."""
    power = rack.power
    return {"name": rack.rack.name, "count": rack.rack.count, "draw_kw": power.draw_kw, "budget_kw": power.budget_kw,
            "pdu_derated_kw": power.pdu_derated_kw, "cooling_kw": power.cooling_kw, "limit_kw": power.limit_kw,
            "binding_limit": power.binding_limit, "redundancy": rack.rack.redundancy, "basis": power.basis,
            "utilisation": power.utilisation}


def _worst(rack: SizedRack | None) -> dict[str, Any]:
    """Returns the figures of the rack nearest its limit, for the messages; placeholders when none was sized."""
    if rack is None:
        return {"worst_rack": "none", "worst_draw_kw": 0.0, "worst_limit_kw": 0.0, "worst_binding": "none",
                "worst_budget_kw": "n/a", "worst_pdu_derated_kw": 0.0, "worst_cooling_kw": "n/a",
                "worst_utilisation": 0.0}
    power = rack.power
    return {"worst_rack": rack.rack.name, "worst_draw_kw": power.draw_kw, "worst_limit_kw": power.limit_kw,
            "worst_binding": power.binding_limit, "worst_budget_kw": _kw(power.budget_kw),
            "worst_pdu_derated_kw": power.pdu_derated_kw, "worst_cooling_kw": _kw(power.cooling_kw),
            "worst_utilisation": power.utilisation}


def _placement_note(sized: SitePower) -> str:
    """Returns, in words, the node groups placed other than quoted and the unknown groups the racks name."""
    unplaced = [f"{group}: {placed} of {quoted} placed" for group, placed, quoted in sized.unplaced]
    unknown = [f"rack {rack} names an unknown node group {group!r}" for rack, group in sized.unknown_groups]
    return "; ".join([*unplaced, *unknown])


def _redundancy_note(sized: SitePower) -> str:
    """Returns, in words, the racks with fewer PDUs than their redundancy mode is built from."""
    return "; ".join(f"rack {rack.rack.name} claims {rack.rack.redundancy} redundancy with "
                     f"{'one PDU' if rack.pdus == 1 else f'{rack.pdus} PDUs'}" for rack in sized.short_of_pdus)


def _kw(value: float | None) -> str:
    return "not stated" if value is None else f"{value:.1f} kW"

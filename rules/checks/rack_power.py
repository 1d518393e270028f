"""rack-power: every rack's sustained draw fits its power budget, derated PDUs and cooling."""

from __future__ import annotations

from typing import Any

from rules.checks.base import Check, Context, Facts, Passing, Rule
from rules.estimates import power
from rules.inputs import escape
from rules.status import Basis, Status

R = "/quote/racks"
MEASURED_W = "/measurements/power/sustained_w_per_node"
# The fewest PDUs a redundancy mode can be built from: N+1 keeps the rack up when one PDU fails and 2N when
# one of its two feeds fails, so both take two PDUs or more by definition (the power estimate refuses to size
# a rack that claims either with fewer). A definition of the modes, not a policy choice.
PDUS_FOR_REDUNDANCY = {"N": 1, "N+1": 2, "2N": 2}


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
    )
    passing = Passing("within-limits", "every rack fits: the fullest, {worst_rack}, draws {worst_draw_kw:.1f} kW "
                      "({draw_basis}) of its {worst_binding} limit of {worst_limit_kw:.1f} kW; site {site_kw:.1f} kW")

    def gather(self, ctx: Context) -> Facts:
        racks = ctx.inputs.get(R) or []
        if not racks:
            ctx.reader.missing.append(R)
            return ctx.insufficient("the quote places no nodes in racks")
        groups = {g.get("name"): (i, g) for i, g in enumerate(ctx.inputs.get("/quote/node_groups", []))}
        sustained_w = ctx.num(MEASURED_W)
        derating = ctx.threshold("continuous_load_fraction")
        placed = {name: 0 for name in groups}
        rows: list[dict[str, Any]] = []
        unknown_groups: list[str] = []
        redundancy_notes: list[str] = []
        for r, rack in enumerate(racks):
            base = f"{R}/{r}"
            count = int(ctx.num(f"{base}/count", 1))
            nodes = []
            for name, per_rack in rack.get("node_groups", {}).items():
                if name not in groups:
                    unknown_groups.append(f"rack {rack.get('name')} names an unknown node group {name!r}")
                    continue
                index, group = groups[name]
                placed[name] += int(per_rack) * count
                ctx.num(f"{base}/node_groups/{escape(name)}")
                max_w = ctx.need(f"/quote/node_groups/{index}/max_power_w")
                if max_w is None:
                    continue
                has_gpus = bool((group.get("gpu") or {}).get("count"))
                nodes.append(power.NodePower(int(per_rack), max_w, sustained_w if has_gpus else None))
            pdus = [power.PduGroup(int(ctx.num(f"{base}/pdus/{p}/count")), ctx.num(f"{base}/pdus/{p}/rating_kw"))
                    for p in range(len(rack.get("pdus", [])))]
            if not pdus:
                ctx.reader.missing.append(f"{base}/pdus")
            redundancy = ctx.get(f"{base}/redundancy", "N")
            budget_kw = ctx.num(f"{base}/power_budget_kw")
            cooling_kw = ctx.num(f"{base}/cooling_capacity_kw")
            if cooling_kw is None and ctx.get(f"{base}/cooling") == "air":
                cooling_kw = ctx.setting("power.air_cooling_limit_kw")
            if not nodes or not pdus:
                continue
            if sum(p.count for p in pdus) < PDUS_FOR_REDUNDANCY.get(redundancy, 1):
                # Counted for the redundancy-unmet rule; the rack's power cannot be sized under the mode it claims.
                redundancy_notes.append(f"rack {rack.get('name')} claims {redundancy} redundancy with one PDU")
                continue
            result = power.rack_power(nodes, pdus, redundancy, continuous_load_factor=derating,
                                      budget_kw=budget_kw, cooling_kw=cooling_kw)
            rows.append({"name": rack.get("name", f"rack {r}"), "count": count, "draw_kw": result.draw_kw,
                         "budget_kw": result.budget_kw, "pdu_derated_kw": result.pdu_derated_kw,
                         "cooling_kw": result.cooling_kw, "limit_kw": result.limit_kw,
                         "binding_limit": result.binding_limit, "redundancy": redundancy, "basis": result.basis,
                         "utilisation": result.draw_kw / result.limit_kw})
        if ctx.missing:
            return ctx.insufficient("rack power needs every node's maximum power and every rack's PDUs")
        quoted = sum(int(ctx.num(f"/quote/node_groups/{i}/count", 0)) for i, _ in groups.values())
        unplaced = [f"{name}: {placed[name]} of {int(g.get('count', 0))} placed"
                    for name, (_, g) in groups.items() if placed[name] != g.get("count")]
        worst = max(rows, key=lambda row: row["utilisation"]) if rows else None
        evidence: dict[str, Any] = {
            "racks": rows,
            "site_kw": sum(row["draw_kw"] * row["count"] for row in rows),
            "quoted_nodes": quoted,
            "placed_nodes": sum(placed.values()),
            "unplaced_nodes": len(unplaced) + len(unknown_groups),
            "placement_note": "; ".join(unplaced + unknown_groups),
            "redundancy_unmet": len(redundancy_notes),
            "redundancy_note": "; ".join(redundancy_notes),
            "racks_over_limit": sum(1 for row in rows if row["utilisation"] > 1),
            "draw_basis": "measured sustained draw" if sustained_w is not None else "nameplate maximum",
        }
        if worst is not None:
            evidence.update(worst_rack=worst["name"], worst_draw_kw=worst["draw_kw"],
                            worst_limit_kw=worst["limit_kw"], worst_binding=worst["binding_limit"],
                            worst_budget_kw=_kw(worst["budget_kw"]), worst_pdu_derated_kw=worst["pdu_derated_kw"],
                            worst_cooling_kw=_kw(worst["cooling_kw"]), worst_utilisation=worst["utilisation"])
        else:
            evidence.update(worst_rack="none", worst_draw_kw=0.0, worst_limit_kw=0.0, worst_binding="none",
                            worst_budget_kw="n/a", worst_pdu_derated_kw=0.0, worst_cooling_kw="n/a",
                            worst_utilisation=0.0)
        return Facts(evidence=evidence, basis=Basis.MEASURED if sustained_w is not None else Basis.ESTIMATED)


def _kw(value: float | None) -> str:
    return "not stated" if value is None else f"{value:.1f} kW"

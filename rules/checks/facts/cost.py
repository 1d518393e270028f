"""What a result costs: owning the quoted hardware for the run, renting the same GPUs instead, serving a token.

The rates are the policy's ``cost`` section, in its currency; the quote's prices are compared with them only
when the quote is priced in that currency (no conversion). The power the hardware draws is what rack-power
counts (rules/checks/facts/racks.py): the measured sustained watts of a GPU node where measurements.power
gives them, else each node's nameplate maximum. Arithmetic: rules/estimates/power_cost/cost.py and rental.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rules.checks.base import Context
from rules.checks.facts.layout import training_group
from rules.checks.facts.racks import sustained_w_per_node
from rules.checks.facts.schedule import RunPlan, quote_cost
from rules.estimates.power_cost import cost, rental
from rules.estimates.power_cost.cost import OwnedCost, OwnedHardware, OwnershipRates
from rules.estimates.power_cost.power import NodePower
from rules.estimates.power_cost.rental import RATE_KINDS, RentalRates
from rules.estimates.reliability.goodput_sim import GoodputInputs
from rules.estimates.training_time.schedule import NEVER_DAYS
from rules.job.cluster import QuotedNodeGroup
from rules.status import FigureFrom

_KIND_NAMES = {"on_demand": "on-demand", "reserved": "reserved", "spot": "spot"}


def ownership_rates(ctx: Context) -> OwnershipRates:
    """Returns the policy's rates of owning hardware (``cost`` in the policy)."""
    def value(name: str) -> Any:
        return ctx.setting(f"cost.{name}.value")

    return OwnershipRates(amortisation_years=value("amortisation_years"),
                          electricity_per_kwh=value("electricity_per_kwh"), pue=value("pue"),
                          support_fraction_per_year=value("support_fraction_per_year"),
                          facility_basis=ctx.setting("cost.facility_basis"),
                          facility_per_kw_month=value("facility_per_kw_month"),
                          facility_per_rack_month=value("facility_per_rack_month"))


def rental_rates(ctx: Context, gpu_model: str | None) -> RentalRates:
    """Returns the policy's rental rates of ``gpu_model`` per GPU-hour; every kind None when it has none."""
    entry = ctx.setting("cost.rental_per_gpu_hour").get(gpu_model or "", {})
    return RentalRates(**{kind: entry[kind]["value"] for kind in RATE_KINDS if kind in entry})


@dataclass(frozen=True)
class OwnedQuote:
    """Owned hardware as the cost model takes it, and the node groups whose power is unknown."""

    owned: OwnedHardware
    unknown_power: tuple[str, ...]  # names of node groups without a maximum power


def _hardware(ctx: Context, capital: float, groups: Sequence[QuotedNodeGroup], racks: bool) -> OwnedQuote:
    """Returns the node groups ``groups`` with ``capital``; the quote's racks when ``racks``."""
    sustained_w = sustained_w_per_node(ctx)
    nodes, gpu_groups, unknown = [], [], []
    for group in groups:
        count, per_node = ctx.value(group.count), ctx.value(group.gpu.count)
        max_w = ctx.value(group.max_power_w)
        if not count:
            continue
        if per_node:
            gpu_groups.append((int(count), int(per_node)))
        if max_w is None:
            name = ctx.value(group.name)
            unknown.append(group.pointer if name is None else name)
        else:
            nodes.append(NodePower(int(count), max_w, sustained_w if per_node else None))
    kinds = None
    quoted_racks = ctx.job.cluster.racks
    if racks and quoted_racks:
        kinds = tuple(int(ctx.value(rack.count)) for rack in quoted_racks)
    return OwnedQuote(OwnedHardware(capital, tuple(nodes), tuple(gpu_groups), kinds), tuple(unknown))


def _comparable(ctx: Context, capital: float | None) -> str | None:
    """Returns why the quote's cost cannot be set against the policy's rates; None when it can."""
    policy_currency, quote_currency = ctx.setting("cost.currency"), ctx.value(ctx.job.cluster.currency)
    if capital is None:
        return "the quote carries no prices"
    if quote_currency != policy_currency:
        stated = f"in {quote_currency}" if quote_currency else "without a currency"
        return (f"the quote is priced {stated} and the policy's rates in {policy_currency}, so its cost is not "
                "compared (no currency is converted)")
    return None


def _components(owned: OwnedCost) -> dict[str, Any]:
    return {"cost_capital": owned.capital, "cost_power": owned.power, "cost_facility": owned.facility,
            "cost_support": owned.support, "cost_per_run": owned.total, "cost_per_day": owned.per_day,
            "energy_kwh": owned.energy_kwh, "facility_basis": owned.facility_basis}


_NO_COST = dict.fromkeys(("cost_capital", "cost_power", "cost_facility", "cost_support", "cost_per_run",
                          "cost_per_day", "cost_per_million_tokens", "cost_per_gpu_hour", "energy_kwh",
                          "facility_basis", "break_even_utilisation"))


def training_cost(ctx: Context, run: RunPlan, job: GoodputInputs | None) -> dict[str, Any]:
    """Returns time-to-result's cost evidence: the owned cost by component, the rented run, the break-even.

    Owned: the whole quote (its total, every node group's power, its racks) for the run's expected days
    (the queue wait excluded: the run holds no hardware while it waits). Rented: the job's GPUs of the
    training group's model at the policy's rates; spot stretched by the preemptions
    (rules/estimates/power_cost/rental.py).
    """
    trains_on, schedule = training_group(ctx), run.schedule
    price = quote_cost(ctx)
    rates = ownership_rates(ctx)
    hardware = _hardware(ctx, price.total or 0.0, ctx.job.cluster.node_groups, True)
    gpu_model = ctx.value(trains_on.gpu.model) if trains_on is not None else None
    finishes = schedule.run_days < NEVER_DAYS
    problem = _comparable(ctx, price.total) if finishes else "the run never finishes as modelled (goodput 0)"
    evidence: dict[str, Any] = {
        **_NO_COST, "cost_currency": ctx.setting("cost.currency"), "cost_as_of": ctx.setting("cost.as_of"),
        "cost_comparable": problem is None, "cost_problem": problem, "power_kw": hardware.owned.it_kw,
        "power_basis": (FigureFrom.MEASURED_SUSTAINED_DRAW if sustained_w_per_node(ctx) is not None
                        else FigureFrom.NAMEPLATE_MAXIMUM),
        "power_unknown_groups": list(hardware.unknown_power), "pue": rates.pue,
        "electricity_per_kwh": rates.electricity_per_kwh, "amortisation_years": rates.amortisation_years,
        "rent_gpu_model": gpu_model, "rent_cost_per_run": dict.fromkeys(RATE_KINDS), "rent_spot_days": None,
        "rent_spot_overhead": None,
    }
    if not finishes:
        return evidence
    owned = cost.owned_cost(hardware.owned, rates, schedule.run_days)
    if problem is None:
        evidence.update(_components(owned), cost_per_million_tokens=cost.per_million_tokens(owned.total,
                                                                                             schedule.tokens))
        if hardware.owned.gpus:
            evidence["cost_per_gpu_hour"] = cost.owned_cost_per_gpu_hour(owned, hardware.owned.gpus)
    rates_of_model = rental_rates(ctx, gpu_model)
    rented = rental.rented_run(schedule.gpus, schedule.run_days, rates_of_model, job,
                               ctx.setting("cost.spot_preemptions_per_node_month.value"))
    evidence.update(rent_cost_per_run=rented.cost, rent_spot_days=rented.spot_days,
                    rent_spot_overhead=rented.spot_overhead)
    if evidence["cost_per_gpu_hour"] is not None and rates_of_model.on_demand is not None:
        evidence["break_even_utilisation"] = rental.break_even_utilisation(evidence["cost_per_gpu_hour"],
                                                                           rates_of_model.on_demand)
    return evidence


def cost_note(e: dict[str, Any]) -> str:
    """Returns the cost, in words, for time-to-result's messages: owned by component, rented, the break-even."""
    unit = f"{e['cost_currency']} "
    if e["cost_per_run"] is None:
        owned = e["cost_problem"]
    else:
        owned = (f"full cost per run {unit}{e['cost_per_run']:,.0f}: capital {e['cost_capital']:,.0f} (amortised "
                 f"over {e['amortisation_years']:g} years), power {e['cost_power']:,.0f} ({e['power_kw']:,.1f} kW "
                 f"{e['power_basis']} × PUE {e['pue']:g} × {e['electricity_per_kwh']:g}/kWh), facility "
                 f"{e['cost_facility']:,.0f}, support {e['cost_support']:,.0f}; {unit}{e['cost_per_day']:,.0f} per "
                 f"run day, {unit}{e['cost_per_million_tokens']:,.2f} per million tokens")
    return f"{owned}; {rent_note(e)}"


def rent_note(e: dict[str, Any]) -> str:
    """Returns the rented run, in words: the cost per rate kind and the break-even utilisation."""
    priced = {kind: value for kind, value in e["rent_cost_per_run"].items() if value is not None}
    if not priced:
        return f"no rental rate for {e['rent_gpu_model'] or 'this GPU'} in the policy"
    unit = f"{e['cost_currency']} "
    parts = [f"{_KIND_NAMES[kind]} {unit}{value:,.0f}" for kind, value in priced.items()]
    if "spot" in priced and e["rent_spot_overhead"] is not None:
        parts[-1] += f" ({e['rent_spot_days']:,.2f} days with preemptions)"
    text = f"rented at the policy's rates: {', '.join(parts)}"
    if e["break_even_utilisation"] is not None:
        text += (f"; buying wins above {e['break_even_utilisation']:.0%} utilisation (owned "
                 f"{unit}{e['cost_per_gpu_hour']:,.2f} per GPU-hour at full use against on-demand)")
    elif e["cost_per_gpu_hour"] is not None:
        text += "; no break-even utilisation without an on-demand rate"
    return text


def serving_cost_note(e: dict[str, Any]) -> str:
    """Returns the serving cost, in words, for inference-capacity's messages (nothing when it is unknown)."""
    if e["cost_per_million_tokens_served"] is None:
        return f"; serving cost not computed: {e['serving_cost_problem']}" if e["serving_cost_problem"] else ""
    unit = f"{e['cost_currency']} "
    return (f"; {e['serving_cost_basis']} costs {unit}{e['serving_cost_per_day']:,.0f} per day owned, "
            f"{unit}{e['cost_per_million_tokens_served']:,.2f} per million output tokens at the average "
            f"{e['served_tokens_per_day']:,.0f} tokens a day")


def serving_cost(ctx: Context, group: str | None) -> dict[str, Any]:
    """Returns inference-capacity's cost evidence: the serving hardware's cost per day and per million tokens.

    The serving hardware is the whole quote when the submission has no training workload, else the serving
    node group alone (its nodes × unit price, its power; the facility per kW). Tokens per day: the average
    request rate × output tokens.
    """
    serving, cluster = ctx.job.serving, ctx.job.cluster
    rps, output_tokens = ctx.value(serving.rps), ctx.value(serving.output_tokens)
    groups: Sequence[QuotedNodeGroup] = cluster.node_groups
    whole_quote = not ctx.job.trains
    if whole_quote:
        capital = quote_cost(ctx).total
    else:
        serves_on = cluster.group_at(group)
        groups, capital = [], None
        if serves_on is not None:
            groups = [serves_on]
            count, price = ctx.value(serves_on.count), ctx.value(serves_on.unit_price)
            capital = cost.priced_total([(count, price)]) if count is not None and price is not None else None
    problem = _comparable(ctx, capital)
    evidence: dict[str, Any] = {"cost_currency": ctx.setting("cost.currency"),
                                "serving_cost_per_day": None, "cost_per_million_tokens_served": None,
                                "served_tokens_per_day": None, "serving_cost_basis": (
                                    "the whole quote" if whole_quote else "the serving node group"),
                                "serving_cost_problem": problem}
    if rps is None or not output_tokens:
        return evidence
    tokens_per_day = cost.served_tokens_per_day(rps, int(output_tokens))
    evidence["served_tokens_per_day"] = tokens_per_day
    if problem is None:
        hardware = _hardware(ctx, capital, groups, whole_quote)
        per_day = cost.owned_cost(hardware.owned, ownership_rates(ctx), 1.0).per_day
        evidence.update(serving_cost_per_day=per_day,
                        cost_per_million_tokens_served=cost.per_million_tokens(per_day, tokens_per_day))
    return evidence

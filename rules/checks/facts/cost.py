"""What a result costs: owning the quoted hardware for the run, renting the same GPUs instead, serving a token.

Every cost figure is in the quote's currency (rules/checks/facts/money.py): the quote's capital and support as
they are, the policy's rates (``cost`` in the policy, in ``cost.currency``) converted at the policy's reference rate
for the quote's currency; without one, power, facility and rental are left out and the reason given. The power the
hardware draws is a GPU node's measured sustained watts where measurements.power gives them, else its nameplate
maximum × the policy's typical sustained share under training (``cost.sustained_power_fraction``), else the
nameplate maximum; other nodes draw their nameplate maximum. Arithmetic: rules/estimates/power_cost/cost.py,
rental.py, currency.py and power.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rules.checks.base import Context
from rules.checks.facts.layout import training_group
from rules.checks.facts.money import Money, money
from rules.checks.facts.racks import sustained_w_per_node
from rules.checks.facts.schedule import RunPlan, quote_cost
from rules.estimates.power_cost import cost, rental
from rules.estimates.power_cost.cost import OwnedCost, OwnedHardware, OwnershipRates
from rules.estimates.power_cost.power import NodePower, rack_draw_kw, typical_sustained_w
from rules.estimates.power_cost.rental import RATE_KINDS, RentalRates
from rules.estimates.reliability.goodput_sim import GoodputInputs
from rules.estimates.training_time.schedule import NEVER_DAYS
from rules.job.cluster import QuotedNodeGroup
from rules.status import FigureFrom

_KIND_NAMES = {"on_demand": "on-demand", "reserved": "reserved", "spot": "spot"}


def ownership_rates(ctx: Context) -> OwnershipRates:
    """Returns the policy's rates of owning hardware (``cost`` in the policy), in the policy's currency."""
    def value(name: str) -> Any:
        return ctx.setting(f"cost.{name}.value")

    return OwnershipRates(amortisation_years=value("amortisation_years"),
                          electricity_per_kwh=value("electricity_per_kwh"), pue=value("pue"),
                          support_fraction_per_year=value("support_fraction_per_year"),
                          facility_basis=ctx.setting("cost.facility_basis"),
                          facility_per_kw_month=value("facility_per_kw_month"),
                          facility_per_rack_month=value("facility_per_rack_month"))


def _rental_entry(ctx: Context, gpu_model: str | None) -> dict[str, Any]:
    return ctx.setting("cost.rental_per_gpu_hour").get(gpu_model or "", {})


def rental_rates(ctx: Context, gpu_model: str | None) -> RentalRates:
    """Returns the policy's rental rates of ``gpu_model`` per GPU-hour, in its currency; None where it has none."""
    entry = _rental_entry(ctx, gpu_model)
    return RentalRates(**{kind: entry[kind]["value"] for kind in RATE_KINDS if kind in entry})


def _rental_dates(ctx: Context, gpu_model: str | None) -> tuple[dict[str, str | None], dict[str, str]]:
    """Returns when each of the model's rates was in force, and why a kind the policy names has no rate."""
    entry = _rental_entry(ctx, gpu_model)
    as_of = {kind: entry[kind].get("as_of") if kind in entry else None for kind in RATE_KINDS}
    unpriced = {kind: entry[kind]["source"] for kind in RATE_KINDS if kind in entry and entry[kind]["value"] is None}
    return as_of, unpriced


@dataclass(frozen=True)
class OwnedQuote:
    """Owned hardware as the cost model takes it, its nameplate draw, and the node groups whose power is unknown."""

    owned: OwnedHardware
    nameplate_kw: float  # Σ nodes × nameplate maximum of the nodes whose power is known
    unknown_power: tuple[str, ...]  # names of node groups without a maximum power


def power_basis(ctx: Context) -> tuple[str, float | None]:
    """Returns where a GPU node's draw comes from (FigureFrom) and the policy's sustained share when it is used."""
    if sustained_w_per_node(ctx) is not None:
        return FigureFrom.MEASURED_SUSTAINED_DRAW, None
    fraction = ctx.setting("cost.sustained_power_fraction.value")
    if fraction is None:
        return FigureFrom.NAMEPLATE_MAXIMUM, None
    return FigureFrom.TYPICAL_SUSTAINED_SHARE, fraction


def _hardware(ctx: Context, capital: float, groups: Sequence[QuotedNodeGroup], racks: bool) -> OwnedQuote:
    """Returns the node groups ``groups`` with ``capital``; the quote's racks when ``racks``."""
    measured_w = sustained_w_per_node(ctx)
    _, fraction = power_basis(ctx)
    nodes, nameplate, gpu_groups, unknown = [], [], [], []
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
            continue
        sustained = None
        if per_node:
            sustained = measured_w if fraction is None else typical_sustained_w(max_w, fraction)
        nodes.append(NodePower(int(count), max_w, sustained))
        nameplate.append(NodePower(int(count), max_w))
    kinds = None
    quoted_racks = ctx.job.cluster.racks
    if racks and quoted_racks:
        kinds = tuple(int(ctx.value(rack.count)) for rack in quoted_racks)
    nameplate_kw = rack_draw_kw(nameplate) if nameplate else 0.0
    return OwnedQuote(OwnedHardware(capital, tuple(nodes), tuple(gpu_groups), kinds), nameplate_kw, tuple(unknown))


def _priced(capital: float | None) -> str | None:
    """Returns why the quote has no cost of its own; None when it carries prices."""
    return "the quote carries no prices" if capital is None else None


def _components(owned: OwnedCost) -> dict[str, Any]:
    return {"cost_capital": owned.capital, "cost_power": owned.power, "cost_facility": owned.facility,
            "cost_support": owned.support, "cost_per_run": owned.total, "cost_per_day": owned.per_day,
            "energy_kwh": owned.energy_kwh, "facility_basis": owned.facility_basis}


_NO_COST = dict.fromkeys(("cost_capital", "cost_power", "cost_facility", "cost_support", "cost_per_run",
                          "cost_per_day", "cost_per_million_tokens", "cost_per_gpu_hour", "energy_kwh",
                          "facility_basis", "break_even_utilisation", "electricity_per_kwh"))


def _rent(ctx: Context, gpu_model: str | None, cash: Money) -> tuple[RentalRates | None, dict[str, Any]]:
    """Returns the model's rental rates in the quote's currency (None when they cannot be) and their evidence."""
    as_of, unpriced = _rental_dates(ctx, gpu_model)
    rates = cash.rental(rental_rates(ctx, gpu_model)) if cash.rates_apply else None
    priced = {kind: None if rates is None else rates.rate(kind) for kind in RATE_KINDS}
    return rates, {"rent_rates_per_gpu_hour": priced, "rent_rates_as_of": as_of, "rent_unpriced": unpriced,
                   "rent_problem": cash.problem}


def training_cost(ctx: Context, run: RunPlan, job: GoodputInputs | None) -> dict[str, Any]:
    """Returns time-to-result's cost evidence: the owned cost by component, the rented run, the break-even.

    Owned: the whole quote (its total, every node group's power, its racks) for the run's expected days
    (the queue wait excluded: the run holds no hardware while it waits). Rented: the job's GPUs of the
    training group's model at the policy's rates; spot stretched by the preemptions
    (rules/estimates/power_cost/rental.py). All in the quote's currency (rules/checks/facts/money.py).
    """
    trains_on, schedule = training_group(ctx), run.schedule
    price, cash = quote_cost(ctx), money(ctx)
    policy_rates = ownership_rates(ctx)
    rates = cash.ownership(policy_rates) if cash.rates_apply else policy_rates
    hardware = _hardware(ctx, price.total or 0.0, ctx.job.cluster.node_groups, True)
    gpu_model = ctx.value(trains_on.gpu.model) if trains_on is not None else None
    finishes = schedule.run_days < NEVER_DAYS
    unpriced = _priced(price.total) if finishes else "the run never finishes as modelled (goodput 0)"
    problem = unpriced or cash.problem
    basis, fraction = power_basis(ctx)
    rent_rates, rent_evidence = _rent(ctx, gpu_model, cash)
    evidence: dict[str, Any] = {
        **_NO_COST, **cash.evidence(), "exchange_rate_note": cash.note(), "cost_as_of": ctx.setting("cost.as_of"),
        "cost_comparable": problem is None, "cost_problem": problem, "power_kw": hardware.owned.it_kw,
        "power_nameplate_kw": hardware.nameplate_kw, "power_basis": basis, "sustained_power_fraction": fraction,
        "power_unknown_groups": list(hardware.unknown_power), "pue": rates.pue,
        "amortisation_years": rates.amortisation_years, "rent_gpu_model": gpu_model,
        "rent_cost_per_run": dict.fromkeys(RATE_KINDS), "rent_spot_days": None, "rent_spot_overhead": None,
        **rent_evidence,
    }
    if not finishes:
        return evidence
    owned = cost.owned_cost(hardware.owned, rates, schedule.run_days)
    if unpriced is None:
        # The quote's own amounts, in its currency whatever the policy's rates are in.
        evidence.update(cost_capital=owned.capital, cost_support=owned.support)
    if problem is None:
        evidence.update(_components(owned), electricity_per_kwh=rates.electricity_per_kwh,
                        cost_per_million_tokens=cost.per_million_tokens(owned.total, schedule.tokens))
        if hardware.owned.gpus:
            evidence["cost_per_gpu_hour"] = cost.owned_cost_per_gpu_hour(owned, hardware.owned.gpus)
    # The spot run's days do not depend on a price: told even where the rates cannot be (every cost then None).
    rented = rental.rented_run(schedule.gpus, schedule.run_days, rent_rates or RentalRates(), job,
                               ctx.setting("cost.spot_preemptions_per_node_month.value"))
    evidence.update(rent_cost_per_run=rented.cost, rent_spot_days=rented.spot_days,
                    rent_spot_overhead=rented.spot_overhead)
    if evidence["cost_per_gpu_hour"] is not None and rent_rates is not None and rent_rates.on_demand is not None:
        evidence["break_even_utilisation"] = rental.break_even_utilisation(evidence["cost_per_gpu_hour"],
                                                                           rent_rates.on_demand)
    return evidence


def _unit(e: dict[str, Any]) -> str:
    return f"{e['cost_currency']} " if e["cost_currency"] else ""


def _power_words(e: dict[str, Any]) -> str:
    """Returns the kW the power is charged on and where they come from."""
    if e["sustained_power_fraction"] is not None:
        return (f"{e['power_kw']:,.1f} kW, the typical sustained {e['sustained_power_fraction']:.0%} of the "
                f"{e['power_nameplate_kw']:,.1f} kW nameplate maximum under training")
    return f"{e['power_kw']:,.1f} kW {e['power_basis']}"


def cost_note(e: dict[str, Any]) -> str:
    """Returns the cost, in words, for time-to-result's messages: owned by component, rented, the break-even."""
    unit = _unit(e)
    if e["cost_per_run"] is not None:
        converted = f"; {e['exchange_rate_note']}" if e.get("exchange_rate_note") else ""
        owned = (f"full cost per run {unit}{e['cost_per_run']:,.0f}{converted}; capital {e['cost_capital']:,.0f} "
                 f"(amortised over {e['amortisation_years']:g} years), power {e['cost_power']:,.0f} "
                 f"({_power_words(e)} × PUE {e['pue']:g} × {unit}{e['electricity_per_kwh']:.4g}/kWh), facility "
                 f"{e['cost_facility']:,.0f}, support {e['cost_support']:,.0f}; {unit}{e['cost_per_day']:,.0f} per "
                 f"run day, {unit}{e['cost_per_million_tokens']:,.2f} per million tokens")
    elif e["cost_capital"] is not None:
        owned = (f"capital {unit}{e['cost_capital']:,.0f} (amortised over {e['amortisation_years']:g} years) and "
                 f"support {unit}{e['cost_support']:,.0f} for the run; no full cost per run: {e['cost_problem']}")
    else:
        owned = e["cost_problem"]
    return f"{owned}; {rent_note(e)}"


def rent_note(e: dict[str, Any]) -> str:
    """Returns the rented run, in words: the cost per rate kind and the break-even utilisation."""
    priced = {kind: value for kind, value in e["rent_cost_per_run"].items() if value is not None}
    if not priced:
        if e["rent_problem"] is not None and e["cost_capital"] is not None:
            return "not priced rented either (the same reason)"
        if e["rent_problem"] is not None:
            return f"not priced rented: {e['rent_problem']}"
        why = e["rent_unpriced"].get("on_demand")
        return f"no rental rate for {e['rent_gpu_model'] or 'this GPU'} in the policy" + (f" ({why})" if why else "")
    unit = _unit(e)
    parts = [f"{_KIND_NAMES[kind]} {unit}{value:,.0f}" for kind, value in priced.items()]
    if "spot" in priced and e["rent_spot_overhead"] is not None:
        parts[-1] += f" ({e['rent_spot_days']:,.2f} days with preemptions)"
    text = f"rented at the policy's rates: {', '.join(parts)}"
    if e["break_even_utilisation"] is not None:
        text += (f"; buying wins above {e['break_even_utilisation']:.0%} utilisation (owned "
                 f"{unit}{e['cost_per_gpu_hour']:,.2f} per GPU-hour at full use against on-demand "
                 f"{unit}{e['rent_rates_per_gpu_hour']['on_demand']:,.2f})")
    elif e["cost_per_gpu_hour"] is not None:
        text += "; no break-even utilisation without an on-demand rate"
    return text


def serving_cost_note(e: dict[str, Any]) -> str:
    """Returns the serving cost, in words, for inference-capacity's messages (nothing when it is unknown)."""
    if e["cost_per_million_tokens_served"] is None:
        return f"; serving cost not computed: {e['serving_cost_problem']}" if e["serving_cost_problem"] else ""
    unit = _unit(e)
    converted = f" ({e['exchange_rate_note']})" if e.get("exchange_rate_note") else ""
    return (f"; {e['serving_cost_basis']} costs {unit}{e['serving_cost_per_day']:,.0f} per day owned{converted}, "
            f"{unit}{e['cost_per_million_tokens_served']:,.2f} per million output tokens at the average "
            f"{e['served_tokens_per_day']:,.0f} tokens a day")


def serving_cost(ctx: Context, group: str | None) -> dict[str, Any]:
    """Returns inference-capacity's cost evidence: the serving hardware's cost per day and per million tokens.

    The serving hardware is the whole quote when the submission has no training workload, else the serving
    node group alone (its nodes × unit price, its power; the facility per kW). Tokens per day: the average
    request rate × output tokens. In the quote's currency, as the training cost (rules/checks/facts/money.py).
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
    cash = money(ctx)
    problem = _priced(capital) or cash.problem
    evidence: dict[str, Any] = {**cash.evidence(), "exchange_rate_note": cash.note(),
                                "serving_cost_per_day": None, "cost_per_million_tokens_served": None,
                                "served_tokens_per_day": None, "serving_cost_basis": (
                                    "the whole quote" if whole_quote else "the serving node group"),
                                "serving_cost_problem": problem, "serving_power_basis": power_basis(ctx)[0]}
    if rps is None or not output_tokens:
        return evidence
    tokens_per_day = cost.served_tokens_per_day(rps, int(output_tokens))
    evidence["served_tokens_per_day"] = tokens_per_day
    if problem is None:
        hardware = _hardware(ctx, capital, groups, whole_quote)
        per_day = cost.owned_cost(hardware.owned, cash.ownership(ownership_rates(ctx)), 1.0).per_day
        evidence.update(serving_cost_per_day=per_day,
                        cost_per_million_tokens_served=cost.per_million_tokens(per_day, tokens_per_day))
    return evidence

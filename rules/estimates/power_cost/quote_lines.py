"""Whether a quote adds up: its priced line items against its node groups' counts and unit prices.

A quote states its servers twice: as node groups (count × unit price, which every check sizes from) and as line
items (quantity × unit price, which the quote's total and so the record's capital cost come from). When one is
edited without the other — node groups doubled, the server line left as it was — the record would report a cost
for hardware other than the hardware it judged. This module finds where the two disagree.

Matching: a line item is a line for a server model when its SKU or its description contains the model's name,
letters and digits only, case ignored ("DGX H200 system" is a line for ``DGX-H200``; "HGX H100 8-GPU server" for
``HGX-H100-8GPU``). Node groups of one server model are summed (a training group and a serving group of the same
servers are often one line). Source: the arithmetic of a bill of materials (extended price = quantity × unit
price; the lines of one article add up to the units ordered), as in ``rules.estimates.power_cost.cost.priced_total``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rules.estimates._args import require_non_negative

_NOT_ALPHANUMERIC = re.compile(r"[^0-9a-z]")


@dataclass(frozen=True)
class GroupLine:
    """One node group as the quote prices it."""

    name: str
    server_model: str | None
    count: float | None
    unit_price: float | None


@dataclass(frozen=True)
class QuoteLine:
    """One line item of the quote; ``index`` is its position in ``quote.line_items``."""

    index: int
    sku: str | None
    description: str | None
    quantity: float | None
    unit_price: float | None


@dataclass(frozen=True)
class Disagreement:
    """Where the line items and the node groups of one server model disagree, in words naming both."""

    server_model: str
    line_indices: tuple[int, ...]
    group_names: tuple[str, ...]
    text: str


def _key(text: str | None) -> str:
    return _NOT_ALPHANUMERIC.sub("", (text or "").lower())


def lines_of(server_model: str, lines: Sequence[QuoteLine]) -> list[QuoteLine]:
    """Returns the line items whose SKU or description names ``server_model`` (letters and digits, case ignored)."""
    key = _key(server_model)
    return [line for line in lines if key and (key in _key(line.sku) or key in _key(line.description))]


def _line_text(line: QuoteLine) -> str:
    label = " ".join(part for part in (line.sku, repr(line.description) if line.description else None) if part)
    price = "unpriced" if line.unit_price is None else f"at {line.unit_price:,.0f}"
    return f"line {line.index} ({label}): {line.quantity:,g} {price}"


def _group_text(groups: Sequence[GroupLine]) -> str:
    names = " and ".join(f"{g.name} ({g.count:,g}{'' if g.unit_price is None else f' at {g.unit_price:,.0f}'})"
                         for g in groups)
    return f"node group{'s' if len(groups) > 1 else ''} {names}"


def disagreements(groups: Sequence[GroupLine], lines: Sequence[QuoteLine],
                  price_tolerance: float) -> list[Disagreement]:
    """Returns, per server model that both the node groups and some line items name, where they disagree: the
    lines' quantities do not add up to the groups' counts, or a line's unit price differs from a group's by more
    than ``price_tolerance`` (a fraction of the group's). A server model no line names is not compared (the quote
    may price it in a bundle), nor is a line with no quantity."""
    require_non_negative("price_tolerance", price_tolerance)
    found = []
    by_model: dict[str, list[GroupLine]] = {}
    for group in groups:
        if group.server_model and group.count is not None:
            require_non_negative("count", group.count)
            by_model.setdefault(group.server_model, []).append(group)
    for model, members in by_model.items():
        matched = [line for line in lines_of(model, lines) if line.quantity is not None]
        if not matched:
            continue
        quantity = sum(line.quantity for line in matched)  # type: ignore[misc]
        count = sum(group.count for group in members)  # type: ignore[misc]
        problems = []
        if quantity != count:
            problems.append(f"{quantity:,g} {model} in the line items, {count:,g} in the node groups")
        prices = {group.unit_price for group in members if group.unit_price is not None}
        for line in matched:
            if line.unit_price is not None and any(abs(line.unit_price - p) > price_tolerance * p for p in prices):
                problems.append(f"line {line.index} prices {model} at {line.unit_price:,.0f}, the node groups at "
                                + " and ".join(f"{p:,.0f}" for p in sorted(prices)))
        if problems:
            text = (f"{'; '.join(problems)}: " + "; ".join(_line_text(line) for line in matched)
                    + f" against {_group_text(members)}")
            found.append(Disagreement(model, tuple(line.index for line in matched),
                                      tuple(group.name for group in members), text))
    return found

"""Whether a quote adds up: its priced line items against its node groups' counts and unit prices.

A quote states its servers twice: as node groups (count × unit price, which every check sizes from) and as line
items (quantity × unit price, which the quote's total and so the record's capital cost come from). When one is
edited without the other — node groups doubled, the server line left as it was — the record would report a cost
for hardware other than the hardware it judged. This module sets the two side by side per server model; the
time-to-result check warns ``quote-arithmetic`` where the quantities differ or the unit prices are further apart
than the policy tolerates.

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
class ServerLines:
    """The line items and the node groups of one server model, side by side."""

    server_model: str
    line_indices: tuple[int, ...]
    group_names: tuple[str, ...]
    line_quantity: float  # Σ quantity of the lines that name the model
    group_count: float  # Σ count of the node groups of the model
    price_gap: float  # largest |line unit price − group unit price| ÷ group unit price; 0 where none are both priced
    text: str  # the lines and the groups in words

    @property
    def counts_differ(self) -> bool:
        return self.line_quantity != self.group_count


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


def server_lines(groups: Sequence[GroupLine], lines: Sequence[QuoteLine]) -> list[ServerLines]:
    """Returns, per server model that both the node groups and some line items name, the lines' quantities and the
    groups' counts, and how far apart their unit prices are. A server model no line names is not compared (the
    quote may price it in a bundle), nor is a line with no quantity."""
    by_model: dict[str, list[GroupLine]] = {}
    for group in groups:
        if group.server_model and group.count is not None:
            require_non_negative("count", group.count)
            by_model.setdefault(group.server_model, []).append(group)
    found = []
    for model, members in by_model.items():
        matched = [line for line in lines_of(model, lines) if line.quantity is not None]
        if not matched:
            continue
        prices = [group.unit_price for group in members if group.unit_price]
        gaps = [abs(line.unit_price - price) / price for line in matched if line.unit_price is not None
                for price in prices]
        text = "; ".join(_line_text(line) for line in matched) + f" against {_group_text(members)}"
        found.append(ServerLines(model, tuple(line.index for line in matched), tuple(g.name for g in members),
                                 sum(line.quantity for line in matched),  # type: ignore[misc]
                                 sum(group.count for group in members),  # type: ignore[misc]
                                 max(gaps, default=0.0), text))
    return found


def count_mismatches(found: Sequence[ServerLines]) -> int:
    """Returns how many server models' line quantities differ from their node groups' counts."""
    return sum(1 for server in found if server.counts_differ)


def largest_price_gap(found: Sequence[ServerLines]) -> float:
    """Returns the largest unit-price gap of any server model (0 when none is compared)."""
    return max((server.price_gap for server in found), default=0.0)

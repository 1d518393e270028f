"""The Compare page's chart as inline SVG drawn on the server (service/record/charts.py's builder): for each
quote a bar of its days to result against the completion window, and a bar of its total price.

Every bar carries its figure as text, and the window is a dashed, labelled line: nothing is told by colour alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from service.record.charts import GRID, INK, MUTED, WIDTH, Svg, nice_step, number, short

DAYS_COLOUR, PRICE_COLOUR, WINDOW_COLOUR = "#0072B2", "#009E73", "#D55E00"  # Okabe-Ito
LABEL_RIGHT, BAR_LEFT, BAR_RIGHT = 196.0, 204.0, WIDTH - 70.0
ROW_H, BAR_H, PANEL_GAP = 26.0, 16.0, 48.0


def _scale(maximum: float, value: float) -> float:
    return BAR_LEFT + (BAR_RIGHT - BAR_LEFT) * value / maximum


def _panel(svg: Svg, top: float, title: str, unit: str, labels: Sequence[str], values: Sequence[float | None],
           colour: str, line: tuple[float, str] | None = None) -> float:
    """Draws one panel of bars from ``top``; returns the y below it."""
    known = [v for v in values if v is not None]
    maximum = max([*known, line[0] if line else 0.0]) * 1.1
    svg.text(10, top + 12, title, size=12, weight="bold")
    top += 22
    bottom = top + ROW_H * len(labels)
    if not known or not math.isfinite(maximum) or maximum <= 0:
        svg.text(BAR_LEFT, top + 14, "no figure to draw", size=10, fill=MUTED)
        return bottom + 8
    step = nice_step(maximum / 5)
    for index in range(7):
        value = index * step
        if value > maximum:
            break
        x = _scale(maximum, value)
        svg.line(x, top - 4, x, bottom, stroke=GRID)
        svg.text(x, bottom + 13, short(value), size=9, anchor="middle", fill=MUTED)
    svg.text(BAR_RIGHT, bottom + 26, unit, size=9, anchor="end", fill=MUTED)
    for row, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = top + row * ROW_H
        svg.text(LABEL_RIGHT, y + BAR_H - 3, label[:30], size=10, anchor="end")
        if value is None:
            svg.text(BAR_LEFT + 4, y + BAR_H - 3, "not known", size=10, fill=MUTED)
            continue
        end = _scale(maximum, value)
        svg.rect(BAR_LEFT, y, end - BAR_LEFT, BAR_H, colour)
        svg.text(end + 4, y + BAR_H - 3, short(value), size=10, fill=INK)
    if line is not None:
        x = _scale(maximum, line[0])
        svg.line(x, top - 6, x, bottom, stroke=WINDOW_COLOUR, width=2, dash="6 3")
        svg.text(x, top - 8, line[1], size=9, anchor="middle", fill=INK)
    return bottom + 34


def quote_chart(rows: Sequence[dict[str, Any]]) -> Markup | None:
    """Returns the chart of compared quotes (``label``, ``days``, ``window_days``, ``quote_total``, ``currency``),
    or None when no quote has a figure to draw."""
    labels = [str(row["label"]) for row in rows]
    days = [number(row.get("days")) for row in rows]
    totals = [number(row.get("quote_total")) for row in rows]
    if not any(v is not None for v in [*days, *totals]):
        return None
    windows = {number(row.get("window_days")) for row in rows} - {None}
    window = next(iter(windows)) if len(windows) == 1 else None
    currencies = {row.get("currency") for row in rows} - {None}
    currency = next(iter(currencies)) if len(currencies) == 1 else "mixed currencies"
    height = 2 * (22 + ROW_H * len(rows) + 34) + PANEL_GAP
    svg = Svg(height, f"Days to result and total price of {len(rows)} quotes"
                      + (f", against a {short(window)}-day window" if window else ""))
    line = (window, f"window {short(window)} d") if window else None
    below = _panel(svg, 4, "Days to result (expected)", "days", labels, days, DAYS_COLOUR, line)
    _panel(svg, below + 10, "Total price", str(currency), labels, totals, PRICE_COLOUR)
    return svg.markup()

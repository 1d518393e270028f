"""The what-if page's chart as inline SVG drawn on the server (service/record/charts.py's builder): expected days
to result (and the simulated p90) against a stated MFU, the completion window as a dashed line, and the MFU the
page shows marked. Every point carries its figure as text where the status changes: nothing is told by colour
alone (the status of each point is in the table below the chart too)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from service.record.charts import GRID, MUTED, WIDTH, Svg, nice_step, number, short

DAYS_COLOUR, P90_COLOUR, WINDOW_COLOUR, MARK_COLOUR = "#0072B2", "#56B4E9", "#D55E00", "#000000"  # Okabe-Ito
LEFT, RIGHT, TOP, BOTTOM = 60.0, WIDTH - 24.0, 16.0, 196.0


def days_against_mfu(points: Sequence[dict[str, Any]], window_days: float | None,
                     shown_mfu: float | None) -> Markup | None:
    """Returns the chart of ``points`` (``mfu``, ``days``, ``days_p90``), or None when no point has days."""
    known = [(p["mfu"], number(p.get("days")), number(p.get("days_p90"))) for p in points]
    known = [(m, d, p90) for m, d, p90 in known if d is not None]
    if not known:
        return None
    maximum = max([d for _, d, _ in known] + [p for _, _, p in known if p is not None] + [window_days or 0]) * 1.1
    if not math.isfinite(maximum) or maximum <= 0:
        return None
    low, high = known[0][0], known[-1][0]
    svg = Svg(BOTTOM + 40, "Expected days to result against MFU"
                           + (f", against the {short(window_days)}-day window" if window_days else ""))

    def xy(mfu: float, days: float) -> tuple[float, float]:
        return (LEFT + (RIGHT - LEFT) * (mfu - low) / (high - low or 1),
                BOTTOM - (BOTTOM - TOP) * min(days, maximum) / maximum)

    step = nice_step(maximum / 5)
    for index in range(7):
        value = index * step
        if value > maximum:
            break
        _, y = xy(low, value)
        svg.line(LEFT, y, RIGHT, y, stroke=GRID)
        svg.text(LEFT - 6, y + 3, short(value), size=9, anchor="end", fill=MUTED)
    for mfu, _, _ in known:
        x, _ = xy(mfu, 0)
        svg.text(x, BOTTOM + 14, f"{mfu:.0%}", size=9, anchor="middle", fill=MUTED)
    svg.text(RIGHT, BOTTOM + 28, "MFU (of the GPU's dense peak)", size=9, anchor="end", fill=MUTED)
    svg.text(LEFT - 6, TOP - 4, "days", size=9, anchor="end", fill=MUTED)
    _series(svg, [xy(m, p90) for m, _, p90 in known if p90 is not None], P90_COLOUR, "4 2")
    _series(svg, [xy(m, d) for m, d, _ in known], DAYS_COLOUR, "")
    svg.legend += [("expected days", DAYS_COLOUR, ""), ("simulated p90", P90_COLOUR, "4 2")]
    if window_days:
        _, y = xy(low, window_days)
        svg.line(LEFT, y, RIGHT, y, stroke=WINDOW_COLOUR, width=2, dash="6 3")
        svg.text(RIGHT, y - 4, f"window {short(window_days)} d", size=9, anchor="end")
        svg.legend.append(("completion window", WINDOW_COLOUR, "6 3"))
    if shown_mfu is not None and low <= shown_mfu <= high:
        x, _ = xy(shown_mfu, 0)
        svg.line(x, TOP, x, BOTTOM, stroke=MARK_COLOUR, width=1, dash="2 2")
        svg.text(x + 3, TOP + 8, f"shown: {shown_mfu:.1%}", size=9)
        svg.legend.append(("the MFU shown", MARK_COLOUR, "2 2"))
    return svg.markup()


def _series(svg: Svg, coords: list[tuple[float, float]], colour: str, dash: str) -> None:
    for (x1, y1), (x2, y2) in zip(coords, coords[1:], strict=False):
        svg.line(x1, y1, x2, y2, stroke=colour, width=2, dash=dash or None)
    for x, y in coords:
        svg.add("circle", cx=f"{x:.1f}", cy=f"{y:.1f}", r=3, fill=colour)


"""Charts of a record's evidence as inline SVG, drawn in Python: no script, no fetch, every label escaped.

Each function takes one check's evidence and returns markup (``markupsafe.Markup``): the SVG drawing and
its legend as a line of HTML text below it, or None when the evidence lacks what the chart needs — a chart
is drawn only from evidence that exists. The legend is HTML because WeasyPrint lays out and draws SVG text
one letter at a time, so a legend's long labels cost more in SVG than the rest of the chart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from markupsafe import Markup, escape

from schemas.text import visible

WIDTH = 640
FONT = "DejaVu Sans, sans-serif"
INK, GRID, MUTED = "#222222", "#d0d0d0", "#666666"
MEMORY_PARTS = (  # evidence name, label, colour (Okabe-Ito, distinguishable in colour-blind vision)
    ("weights_gib", "weights", "#0072B2"),
    ("gradients_gib", "gradients", "#56B4E9"),
    ("optimizer_gib", "optimizer", "#009E73"),
    ("activations_gib", "activations", "#E69F00"),
    ("other_gib", "other", "#CC79A7"),
)
CHART_MAX_RACKS = 16  # bars of the rack power chart
LIMIT_COLOURS = {"budget": "#D55E00", "pdu": "#0072B2", "cooling": "#009E73", "window": "#D55E00"}
# Each limit line has a dash pattern of its own, drawn in its legend swatch too: a reader who cannot tell the
# colours apart tells the lines apart by their pattern (no information by colour alone).
LIMIT_DASHES = {"budget": "6 3", "pdu": "2 2", "cooling": "9 3 2 3", "window": "6 3", "usable": "6 3"}
SOLID = ""  # the dash pattern of a solid line
CHAR_EM = 0.62  # the advance of a DejaVu Sans figure or letter, in em, an upper bound for the labels' text
LABEL_RIGHT = WIDTH - 4.0  # a value label may run into the drawing's right padding, past the axis's end


def number(value: Any) -> float | None:
    """Returns ``value`` as a finite float, or None for anything that is not a finite number (bools included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def short(value: float) -> str:
    """Returns a compact label for a figure: 3 significant digits, thousands separated."""
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


class Svg:
    """A small SVG builder; every text and attribute value passes through markupsafe.escape."""

    def __init__(self, height: float, title: str) -> None:
        self.height = height
        self.title = title
        self.parts: list[str] = []
        # (label, colour, dash pattern) per entry: None for a bar, SOLID or a pattern for a line.
        self.legend: list[tuple[str, str, str | None]] = []
        self.legend_lead = ""  # words before the legend's entries (how to read them beside their swatches)

    def add(self, tag: str, text: str | None = None, **attributes: Any) -> None:
        attrs = "".join(f' {name.rstrip("_").replace("_", "-")}="{escape(str(value))}"'
                        for name, value in attributes.items() if value is not None)
        # Labels can quote the submission (rack and group names): hidden characters are written out.
        self.parts.append(f"<{tag}{attrs}/>" if text is None else f"<{tag}{attrs}>{escape(visible(text))}</{tag}>")

    def text(self, x: float, y: float, text: str, size: float = 11, anchor: str = "start", fill: str = INK,
             weight: str | None = None) -> None:
        self.add("text", text, x=f"{x:.1f}", y=f"{y:.1f}", font_size=size, text_anchor=anchor, fill=fill,
                 font_family=FONT, font_weight=weight)

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = INK, width: float = 1,
             dash: str | None = None) -> None:
        self.add("line", x1=f"{x1:.1f}", y1=f"{y1:.1f}", x2=f"{x2:.1f}", y2=f"{y2:.1f}", stroke=stroke,
                 stroke_width=width, stroke_dasharray=dash)

    def rect(self, x: float, y: float, w: float, h: float, fill: str) -> None:
        self.add("rect", x=f"{x:.1f}", y=f"{y:.1f}", width=f"{max(w, 0):.1f}", height=f"{h:.1f}", fill=fill)

    def markup(self) -> Markup:
        body = "".join(self.parts)
        svg = (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
               f'viewBox="0 0 {WIDTH} {self.height:.0f}" width="{WIDTH}" height="{self.height:.0f}">'
               f"<title>{escape(visible(self.title))}</title>{body}</svg>")
        # A swatch is a tiny SVG (a square for a bar, a dashed stroke for a line) coloured by presentation
        # attributes: no style attribute, so the pages' Content-Security-Policy (style-src 'self') holds.
        legend = " ".join(f'<span class="legend-item">{_swatch(colour, dash)} {escape(visible(label))}</span>'
                          for label, colour, dash in self.legend)
        return Markup(f'<div class="chart-body">{svg}'
                      + (f'<p class="legend">{escape(self.legend_lead)}{legend}</p>' if legend else "") + "</div>")


def _swatch(colour: str, dash: str | None) -> str:
    """Returns a legend swatch of ``colour``: a filled square for a bar (``dash`` None), else a stroke drawn with
    the line's own dash pattern, long enough to show it."""
    if dash is None:
        shape = f'<rect x="6" y="0" width="8" height="8" fill="{escape(colour)}"/>'
    else:
        pattern = f' stroke-dasharray="{escape(dash)}"' if dash else ""
        shape = f'<line x1="0" y1="4" x2="20" y2="4" stroke="{escape(colour)}" stroke-width="2.5"{pattern}/>'
    return f'<svg class="swatch" width="20" height="8" viewBox="0 0 20 8" aria-hidden="true">{shape}</svg>'


def label_width(text: str, size: float) -> float:
    """Returns an upper bound of the width of ``text`` set at ``size`` in the charts' font (user units)."""
    return len(text) * size * CHAR_EM


def clear_of_lines(x: float, text: str, size: float, lines: Iterable[float], right: float) -> float:
    """Returns where a label that would start at ``x`` starts so that no vertical line at ``lines`` crosses it.

    The label moves right past each line it would cross (a limit drawn just after a bar's end); at the chart's
    ``right`` edge it moves left of the lines instead, so it never runs off the drawing either.
    """
    width, start = label_width(text, size), x
    for line in sorted(lines):
        if start - 3 <= line <= start + width + 3:
            start = line + 4
    if start + width <= right:
        return start
    start = min(x, right - width)
    for line in sorted(lines, reverse=True):
        if start - 3 <= line <= start + width + 3:
            start = line - 4 - width
    return start


def _drawable(maximum: float) -> bool:
    """Returns True when an axis can run from 0 to ``maximum``: figures near the float limit overflow to inf
    once the chart adds its margin, and such a chart is left out rather than drawn (or looped over) forever."""
    return math.isfinite(maximum) and maximum > 0 and math.isfinite(maximum * 1.0001)


def _axis(svg: Svg, left: float, right: float, y: float, top: float, maximum: float, unit: str, ticks: int = 5) -> None:
    step = nice_step(maximum / ticks)
    # step ≥ maximum / ticks, so at most ticks + 1 of them fit; counted, since adding a step to a huge value
    # can leave it unchanged.
    for index in range(ticks + 2):
        value = index * step
        if value > maximum * 1.0001:
            break
        x = left + (right - left) * value / maximum
        svg.line(x, top, x, y, stroke=GRID)
        svg.text(x, y + 14, short(value), size=9, anchor="middle", fill=MUTED)
    svg.text(right, y + 28, unit, size=9, anchor="end", fill=MUTED)


def nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def _legend(svg: Svg, items: Iterable[tuple[str, str, str | None]]) -> None:
    """Adds legend entries (label, colour, dash pattern or None for a bar) to the chart's legend, a line of text
    below the drawing."""
    svg.legend += list(items)


def memory_chart(evidence: Mapping[str, Any]) -> Markup | None:
    """Returns per-GPU memory as one stacked bar (weights … other) against the usable and total capacity."""
    parts = [(label, number(evidence.get(name)), colour) for name, label, colour in MEMORY_PARTS]
    usable, capacity = number(evidence.get("usable_gib")), number(evidence.get("capacity_gib"))
    if any(value is None for _, value, _ in parts) or capacity is None or capacity <= 0:
        return None
    total = sum(value for _, value, _ in parts if value)
    maximum = max(total, capacity) * 1.08
    if not _drawable(maximum):
        return None
    left, right, top, bar = 110.0, WIDTH - 20.0, 14.0, 34.0
    svg = Svg(96, f"Per-GPU memory: {short(total)} GiB needed of {short(usable or capacity)} GiB usable")
    axis_y = top + bar + 14
    _axis(svg, left, right, axis_y, top - 4, maximum, "GiB per GPU")
    svg.text(left - 8, top + bar / 2 + 4, "needed", anchor="end", weight="bold")
    x = left
    for _label, value, colour in parts:
        width = (right - left) * (value or 0) / maximum
        svg.rect(x, top, width, bar, colour)
        x += width
    candidates = ((usable, LIMIT_COLOURS["budget"], LIMIT_DASHES["usable"]), (capacity, INK, SOLID))
    marks = [(value, colour, dash) for value, colour, dash in candidates if value is not None]
    marks_x = [left + (right - left) * value / maximum for value, _, _ in marks]
    total_label = f"{short(total)} GiB"
    svg.text(clear_of_lines(x + 4, total_label, 10, marks_x, LABEL_RIGHT), top + bar / 2 + 4, total_label, size=10)
    for lx, (_, colour, dash) in zip(marks_x, marks, strict=True):
        svg.line(lx, top - 6, lx, top + bar + 6, stroke=colour, width=2.5, dash=dash or None)
    legend = [(f"{label} {short(value or 0)}", colour, None) for label, value, colour in parts]
    # The parts are told apart by their order too, not by their colour alone.
    svg.legend_lead = "needed, left to right: "
    _legend(svg, legend)
    limits = ([(f"usable {short(usable)} GiB", LIMIT_COLOURS["budget"], LIMIT_DASHES["usable"])]
              if usable is not None else [])
    limits.append((f"capacity {short(capacity)} GiB", INK, SOLID))
    _legend(svg, limits)
    return svg.markup()


def rack_power_chart(evidence: Mapping[str, Any]) -> Markup | None:
    """Returns each rack's draw as a bar against its power budget, derated PDU rating and cooling capacity."""
    racks = [r for r in evidence.get("racks") or [] if isinstance(r, Mapping) and number(r.get("draw_kw")) is not None]
    if not racks:
        return None
    limits = (("budget_kw", "power budget", "budget"), ("pdu_derated_kw", "derated PDU", "pdu"),
              ("cooling_kw", "cooling", "cooling"))
    title = "Rack power against budget, derated PDU rating and cooling"
    if len(racks) > CHART_MAX_RACKS:
        # A bar per rack of 256 would run for pages: the racks nearest a limit, in the evidence's order.
        def headroom(rack: Mapping[str, Any]) -> float:
            caps = [v for name, _, _ in limits if (v := number(rack.get(name))) is not None and v > 0]
            return (number(rack.get("draw_kw")) or 0.0) / min(caps) if caps else 0.0

        nearest = sorted(range(len(racks)), key=lambda i: headroom(racks[i]), reverse=True)[:CHART_MAX_RACKS]
        title += f" (the {CHART_MAX_RACKS} of {len(racks)} racks nearest a limit)"
        racks = [racks[i] for i in sorted(nearest)]
    values = [number(r.get("draw_kw")) or 0.0 for r in racks]
    values += [v for r in racks for name, _, _ in limits if (v := number(r.get(name))) is not None]
    maximum = max(values) * 1.1 or 1.0
    if not _drawable(maximum):
        return None
    left, right, top, row = 130.0, WIDTH - 20.0, 12.0, 34.0
    axis_y = top + row * len(racks)
    svg = Svg(axis_y + 34, title)
    _axis(svg, left, right, axis_y, top - 4, maximum, "kW per rack")
    for i, rack in enumerate(racks):
        y = top + i * row
        draw = number(rack.get("draw_kw")) or 0.0
        name = str(rack.get("name", f"rack {i + 1}"))
        svg.text(left - 8, y + row / 2 + 2, name if len(name) <= 18 else name[:17] + "…", anchor="end")
        svg.rect(left, y + 7, (right - left) * draw / maximum, row - 16, "#999999")
        marks = [(left + (right - left) * value / maximum, kind) for name_kw, _label, kind in limits
                 if (value := number(rack.get(name_kw))) is not None]
        label, bar_end = f"{short(draw)} kW", left + (right - left) * draw / maximum
        svg.text(clear_of_lines(bar_end + 4, label, 10, [x for x, _ in marks], LABEL_RIGHT), y + row / 2 + 2, label,
                 size=10)
        for lx, kind in marks:
            svg.line(lx, y + 2, lx, y + row - 2, stroke=LIMIT_COLOURS[kind], width=2.5, dash=LIMIT_DASHES[kind])
    _legend(svg, [("draw", "#999999", None),
                  *((label, LIMIT_COLOURS[kind], LIMIT_DASHES[kind]) for _, label, kind in limits)])
    return svg.markup()


def _scaling_points(evidence: Mapping[str, Any]) -> list[tuple[float, float]]:
    for value in evidence.values():
        if isinstance(value, list) and value and all(isinstance(p, Mapping) for p in value):
            points = [(number(p.get("gpus")), number(p.get("efficiency"))) for p in value]
            if all(g is not None and e is not None and g > 0 for g, e in points):
                return sorted((g, e) for g, e in points)  # type: ignore[misc]
    gpus, efficiency = number(evidence.get("gpus")), number(evidence.get("efficiency"))
    return [(gpus, efficiency)] if gpus and efficiency is not None else []


def scaling_chart(evidence: Mapping[str, Any], thresholds: Mapping[str, Any] | None = None) -> Markup | None:
    """Returns scaling efficiency against GPU count (log₂ axis) with the policy's minimum when it has one.

    Reads the first evidence list whose items carry ``gpus`` and ``efficiency``, else the pair of scalars
    ``gpus`` and ``efficiency``; None when neither is there.
    """
    points = _scaling_points(evidence)
    if not points:
        return None
    limits = [(k, float(v)) for k, v in (thresholds or {}).items() if "efficiency" in k and number(v) is not None]
    low_g, high_g = points[0][0], points[-1][0]
    if len(points) == 1:  # one modelled or measured size: show it with room on the left, not on the axis
        log_low, log_high = math.log2(low_g) - 3, math.log2(low_g) + 1
    else:
        log_low, log_high = math.log2(low_g), max(math.log2(high_g), math.log2(low_g) + 1)
    top_e = max(1.0, *(e for _, e in points)) * 1.05
    if not _drawable(top_e):
        return None
    left, right, top, bottom = 60.0, WIDTH - 20.0, 12.0, 172.0
    svg = Svg(bottom + 40, "Scaling efficiency against GPU count")

    def xy(gpus: float, efficiency: float) -> tuple[float, float]:
        x = left + (right - left) * (math.log2(gpus) - log_low) / (log_high - log_low)
        return x, bottom - (bottom - top) * efficiency / top_e

    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        _, y = xy(low_g, tick)
        svg.line(left, y, right, y, stroke=GRID)
        svg.text(left - 6, y + 3, f"{tick:.0%}", size=9, anchor="end", fill=MUTED)
    for gpus, _ in points:
        x, _ = xy(gpus, 0)
        svg.text(x, bottom + 14, short(gpus), size=9, anchor="middle", fill=MUTED)
    svg.text(right, bottom + 28, "GPUs (log scale)", size=9, anchor="end", fill=MUTED)
    for name, limit in limits:
        _, y = xy(low_g, limit)
        svg.line(left, y, right, y, stroke=LIMIT_COLOURS["budget"], width=1.5, dash="5 3")
        svg.text(right, y - 3, f"{name} {limit:.0%}", size=9, anchor="end", fill=LIMIT_COLOURS["budget"])
    coords = [xy(g, e) for g, e in points]
    for (x1, y1), (x2, y2) in zip(coords, coords[1:], strict=False):
        svg.line(x1, y1, x2, y2, stroke="#0072B2", width=2)
    for (x, y), (_, efficiency) in zip(coords, points, strict=True):
        svg.add("circle", cx=f"{x:.1f}", cy=f"{y:.1f}", r=4, fill="#0072B2")
        svg.text(x, y - 8, f"{efficiency:.0%}", size=9, anchor="middle")
    return svg.markup()


COMPLETION_BARS = (("no failures", "compute_days"), ("expected", "days"), ("simulated p50", "days_p50"),
                   ("simulated p90", "days_p90"))


def completion_chart(evidence: Mapping[str, Any]) -> Markup | None:
    """Returns the days to complete (without failures, expected with them, and the simulated p50 and p90)
    against the completion window, with the share of simulated runs that finish inside it."""
    window = number(evidence.get("window_days"))
    bars = [(label, value) for label, name in COMPLETION_BARS if (value := number(evidence.get(name))) is not None]
    if window is None or not bars:
        return None
    maximum = max(window, *(v for _, v in bars)) * 1.1 or 1.0
    if not _drawable(maximum):
        return None
    left, right, top, row = 110.0, WIDTH - 20.0, 12.0, 30.0
    axis_y = top + row * len(bars)
    svg = Svg(axis_y + 34, "Days to complete against the completion window")
    _axis(svg, left, right, axis_y, top - 4, maximum, "days")
    wx = left + (right - left) * window / maximum
    for i, (label, value) in enumerate(bars):
        y = top + i * row
        svg.text(left - 8, y + row / 2 + 3, label, anchor="end")
        in_window = value <= window
        svg.rect(left, y + 6, (right - left) * value / maximum, row - 12, "#0072B2" if in_window else "#D55E00")
        # The colour says it again; the words say it to every reader.
        text = f"{short(value)} d" + ("" if in_window else ", over the window")
        svg.text(clear_of_lines(left + (right - left) * value / maximum + 4, text, 10, [wx], LABEL_RIGHT),
                 y + row / 2 + 3, text, size=10)
    svg.line(wx, top - 4, wx, axis_y, stroke=LIMIT_COLOURS["window"], width=2.5, dash=LIMIT_DASHES["window"])
    share = number(evidence.get("window_probability"))
    inside = f", {share:.0%} of simulated runs inside" if share is not None else ""
    _legend(svg, [(f"window {short(window)} days{inside}", LIMIT_COLOURS["window"], LIMIT_DASHES["window"])])
    return svg.markup()


def chart_title(chart: Markup) -> str:
    """Returns the text of a chart's <title> (its one-line description), for a caption."""
    start, end = chart.find("<title>"), chart.find("</title>")
    return Markup(chart[start + 7:end]).unescape() if start != -1 and end != -1 else ""


def chart_for(check: Mapping[str, Any]) -> Markup | None:
    """Returns the chart of a check result when its id has one and its evidence holds the figures, else None."""
    evidence = check.get("evidence") or {}
    match check.get("id"):
        case "peak-memory":
            return memory_chart(evidence)
        case "rack-power":
            return rack_power_chart(evidence)
        case "interconnect-scaling":
            return scaling_chart(evidence, check.get("thresholds"))
        case "time-to-result":
            return completion_chart(evidence)
    return None

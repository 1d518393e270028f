"""Charts: drawn from the evidence that exists, never from missing figures; every label escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from service.record.charts import (
    GRID,
    WIDTH,
    chart_for,
    completion_chart,
    label_width,
    memory_chart,
    rack_power_chart,
    scaling_chart,
)

MEMORY = {"weights_gib": 4.1, "gradients_gib": 4.1, "optimizer_gib": 0.8, "activations_gib": 24.1,
          "other_gib": 2.3, "usable_gib": 126.4, "capacity_gib": 140.4}


def _texts(chart: str) -> list[str]:
    """Returns the SVG's texts and title, and the labels of the legend below it (each after its swatch)."""
    root = ET.fromstring(chart)
    texts = [el.text or "" for el in root.iter() if el.tag.endswith("text") or el.tag.endswith("title")]
    legend = [(swatch.tail or "").strip() for item in root.iter() if item.get("class") == "legend-item"
              for swatch in item]
    return texts + legend


def test_memory_chart_shows_each_part_against_capacity() -> None:
    texts = _texts(memory_chart(MEMORY))

    assert "weights 4.1" in texts and "activations 24.1" in texts
    assert "usable 126 GiB" in texts and "capacity 140 GiB" in texts


def test_memory_chart_needs_every_part() -> None:
    assert memory_chart({**MEMORY, "activations_gib": None}) is None


def test_rack_labels_are_escaped() -> None:
    svg = rack_power_chart({"racks": [{"name": "<script>x</script>", "draw_kw": 40, "budget_kw": 50,
                                       "pdu_derated_kw": 55, "cooling_kw": 60}]})

    assert "<script>" not in svg
    assert "&lt;script&gt;" in svg
    ET.fromstring(svg)  # well-formed


def test_scaling_chart_only_when_the_evidence_has_it() -> None:
    points = {"points": [{"gpus": 8, "efficiency": 1.0}, {"gpus": 512, "efficiency": 0.86}]}

    assert scaling_chart(points, {"min_scaling_efficiency": 0.8}) is not None
    assert "min_scaling_efficiency 80%" in _texts(scaling_chart(points, {"min_scaling_efficiency": 0.8}))
    assert scaling_chart({}) is None
    assert chart_for({"id": "interconnect-scaling", "evidence": {"inputs": []}}) is None


def test_completion_chart_only_when_days_and_window_exist() -> None:
    assert completion_chart({"compute_days": 20.9, "days": 21.3, "window_days": 30}) is not None
    assert completion_chart({"compute_days": 20.9}) is None
    assert chart_for({"id": "time-to-result", "evidence": {"days": 3}}) is None


def test_completion_chart_shows_the_simulated_days_and_the_share_inside_the_window() -> None:
    evidence = {"compute_days": 2.09, "days": 2.26, "days_p50": 2.11, "days_p90": 2.80, "window_days": 2.75,
                "window_probability": 0.8116}
    texts = _texts(completion_chart(evidence))
    assert "simulated p50" in texts and "simulated p90" in texts and "2.8 d, over the window" in texts
    assert "window 2.75 days, 81% of simulated runs inside" in texts
    # A job that never finishes has no simulated days (None in the record): their bars are left out.
    never = _texts(completion_chart({**evidence, "days_p50": None, "days_p90": None, "window_probability": 0.0}))
    assert "simulated p90" not in never and "window 2.75 days, 0% of simulated runs inside" in never


Line = tuple[float, float, float, str]  # x, top, bottom, dash pattern
Label = tuple[float, float, str]  # start x, end x, text


def _marks_and_labels(chart: str, unit: str) -> tuple[list[Line], list[Label]]:
    """Returns the chart's vertical lines (x, top, bottom, dash pattern) and its value labels ending in ``unit``
    (start x, end x by the charts' own upper bound of a label's width, text)."""
    root = ET.fromstring(chart)
    svg = next(el for el in root.iter() if el.tag.endswith("svg") and el.get("class") == "chart")
    lines = [(float(el.get("x1")), float(el.get("y1")), float(el.get("y2")), el.get("stroke-dasharray") or "")
             for el in svg.iter() if el.tag.endswith("line") and el.get("x1") == el.get("x2")
             and el.get("stroke") != GRID]
    labels = []
    for el in svg.iter():
        if el.tag.endswith("text") and (el.text or "").split(",")[0].endswith(unit):
            x, size = float(el.get("x")), float(el.get("font-size"))
            labels.append((x, x + label_width(el.text, size), el.text))
    return lines, labels


def _label_rows(chart: str, unit: str) -> list[tuple[str, list[float]]]:
    """Returns each value label with the x of the limit lines drawn across its own row, and asserts it is drawn
    inside the SVG's width."""
    root = ET.fromstring(chart)
    svg = next(el for el in root.iter() if el.tag.endswith("svg") and el.get("class") == "chart")
    lines, labels = _marks_and_labels(chart, unit)
    rows = []
    for start, end, text in labels:
        y = next(float(el.get("y")) for el in svg.iter() if el.tag.endswith("text") and el.text == text)
        assert 0 <= start and end <= WIDTH, (text, start, end)
        crossing = [x for x, top, bottom, _ in lines if min(top, bottom) <= y <= max(top, bottom) + 10
                    and start - 1 <= x <= end + 1]
        rows.append((text, crossing))
    return rows


def test_a_limit_just_past_a_racks_draw_never_crosses_its_value_label() -> None:
    # Given a rack whose cooling limit lies just past its draw (the failing example's legacy rack)
    evidence = {"racks": [{"name": "legacy-rack-7", "draw_kw": 40.8, "budget_kw": 30, "pdu_derated_kw": 17.28,
                           "cooling_kw": 45}, {"name": "row-2", "draw_kw": 27.9, "budget_kw": 28.5,
                                               "pdu_derated_kw": 29.0, "cooling_kw": 31}]}

    rows = _label_rows(rack_power_chart(evidence), "kW")

    assert [text for text, _ in rows] == ["40.8 kW", "27.9 kW"]
    assert all(not crossing for _, crossing in rows), rows


def test_the_window_never_crosses_a_completion_bars_label_and_words_say_over_the_window() -> None:
    evidence = {"compute_days": 29.1, "days": 31.0, "window_days": 30}

    chart = completion_chart(evidence)
    rows = _label_rows(chart, " d")

    assert [text for text, _ in rows] == ["29.1 d", "31 d, over the window"]
    assert all(not crossing for _, crossing in rows), rows


def test_each_limit_line_has_its_own_dash_pattern_and_its_legend_swatch_shows_it() -> None:
    # No information by colour alone: the budget, the derated PDU and the cooling lines differ in pattern too
    chart = rack_power_chart({"racks": [{"name": "R1", "draw_kw": 40, "budget_kw": 50, "pdu_derated_kw": 55,
                                         "cooling_kw": 60}]})
    lines, _ = _marks_and_labels(chart, "kW")

    patterns = [dash for *_, dash in lines]
    assert len(patterns) == 3 and len(set(patterns)) == 3 and all(patterns)
    root = ET.fromstring(chart)
    swatches = {(item.tail or "").strip(): [el.get("stroke-dasharray") for el in item.iter() if el.tag.endswith("line")]
                for item in root.iter() if item.get("class") == "swatch"}
    assert sorted(dash for dashes in swatches.values() for dash in dashes) == sorted(patterns)


def test_the_memory_legend_names_the_parts_in_the_order_they_are_stacked() -> None:
    chart = memory_chart(MEMORY)

    legend = ET.fromstring(chart).find(".//p")
    assert legend is not None and (legend.text or "").startswith("needed, left to right:")
    assert [label.split()[0] for label in _texts(chart)[-7:-2]] == ["weights", "gradients", "optimizer",
                                                                    "activations", "other"]

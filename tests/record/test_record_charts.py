"""Charts: drawn from the evidence that exists, never from missing figures; every label escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from service.record.charts import chart_for, completion_chart, memory_chart, rack_power_chart, scaling_chart

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
    assert "simulated p50" in texts and "simulated p90" in texts and "2.8 d" in texts
    assert "window 2.75 days, 81% of simulated runs inside" in texts
    # A job that never finishes has no simulated days (None in the record): their bars are left out.
    never = _texts(completion_chart({**evidence, "days_p50": None, "days_p90": None, "window_probability": 0.0}))
    assert "simulated p90" not in never and "window 2.75 days, 0% of simulated runs inside" in never

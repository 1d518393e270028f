"""rules.estimates.power_cost.power.sustained_draw: the sustained draw per node a run of power readings gives."""

import pytest

from parsers import csv_series
from rules.errors import InconsistentInput
from rules.estimates.power_cost.power import NodeReadings, sustained_draw, typical_sustained_w

# Two nodes read once a minute for 20 minutes; dgx-01 has one 9.8 kW spike (a checkpoint write, say).
DGX_01 = [7310, 7420, 7480, 7390, 7510, 7550, 7440, 7600, 7380, 7460, 7530, 7490, 7570, 7410, 9800, 7500, 7450,
          7520, 7480, 7430]
DGX_02 = [7100, 7180, 7220, 7150, 7260, 7300, 7210, 7350, 7140, 7230, 7280, 7240, 7320, 7170, 7290, 7250, 7200,
          7270, 7230, 7190]
CSV = "timestamp,host,power_w\n" + "".join(
    f"2026-11-20T10:{i:02d}:00Z,dgx-01,{a}\n2026-11-20T10:{i:02d}:00Z,dgx-02,{b}\n"
    for i, (a, b) in enumerate(zip(DGX_01, DGX_02, strict=True)))


def readings() -> list[NodeReadings]:
    parsed = csv_series.parse_power(CSV)
    return [NodeReadings(e["name"], e["samples"], e["mean_w"], e["p95_w"], e["window_s"]) for e in parsed["entities"]]


def test_p95_is_the_19th_of_20_readings_so_one_spike_does_not_set_it():
    # nearest rank: ceil(0.95 × 20) = 19th smallest of dgx-01's readings, the 7,600 W below the 9,800 W spike
    draw = sustained_draw(readings(), "p95")

    assert (draw.w_per_node, draw.node, draw.samples, draw.window_s) == (7600.0, "dgx-01", 20, 1140.0)
    assert sorted(DGX_01)[18] == 7600


def test_mean_is_the_highest_nodes_average():
    draw = sustained_draw(readings(), "mean")

    assert draw.node == "dgx-01" and draw.w_per_node == pytest.approx(sum(DGX_01) / 20) == 7586.0


def test_no_readings_and_an_unknown_statistic_are_refused():
    with pytest.raises(InconsistentInput, match="no node's power readings"):
        sustained_draw([], "p95")
    with pytest.raises(InconsistentInput, match="statistic"):
        sustained_draw(readings(), "max")


def test_the_typical_sustained_draw_of_a_dgx_h100_under_training_is_76_percent_of_its_10_2_kw():
    # Newkirk et al., arXiv:2506.14551 (2025): H100 HGX nodes under computationally intensive training draw 76 % of
    # the 10.2 kW rating, 7,752 W
    assert typical_sustained_w(10_200.0, 0.76) == pytest.approx(7_752.0)
    with pytest.raises(InconsistentInput, match="sustained_fraction"):
        typical_sustained_w(10_200.0, 1.2)

"""Tests for rules.estimates.power_cost.power: each quotes the published figure it reproduces."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.estimates.power_cost.power import (
    NodePower,
    PduGroup,
    pdu_capacity_kw,
    pdu_rating_needed_kw,
    pdus_required,
    quoted_node_count,
    rack_draw_kw,
    rack_power,
)

DGX_H100_MAX_W = 10_200.0  # NVIDIA DGX H100 user guide: 10.2 kW maximum input
DGX_B200_MAX_W = 14_300.0  # NVIDIA DGX B200 user guide: 14.3 kW maximum input


def test_four_dgx_h100_draw_40_8_kw_nameplate():
    # NVIDIA DGX H100 user guide: 10.2 kW max input; 4 per rack = 40.8 kW.
    assert rack_draw_kw([NodePower(4, DGX_H100_MAX_W)]) == pytest.approx(40.8)


def test_two_17_3_kw_pdus_2n_derated_80_percent_is_13_84_kw_nec_210_20a():
    # 2N: one feed (one of the two PDUs) carries the rack; NEC 210.20(A) continuous load ≤ 80 %.
    assert pdu_capacity_kw([PduGroup(2, 17.3)], "2N") == pytest.approx(13.84)


def test_a_13_84_kw_continuous_load_needs_a_17_3_kw_pdu_nec_210_20a():
    # NEC 210.20(A): the rating is at least 125 % of the continuous load, so 13.84 kW needs 17.3 kW (the 2N case
    # above, read backwards); 8 DGX H100 at 10.2 kW (81.6 kW) need 102 kW of PDU rating.
    assert pdu_rating_needed_kw(13.84) == pytest.approx(17.3)
    assert pdu_rating_needed_kw(rack_draw_kw([NodePower(8, DGX_H100_MAX_W)])) == pytest.approx(102.0)
    assert quoted_node_count([NodePower(8, DGX_H100_MAX_W), NodePower(2, 1_200.0)]) == 10


def test_redundancy_modes():
    pdus = [PduGroup(4, 17.3)]
    assert pdu_capacity_kw(pdus, "N") == pytest.approx(4 * 17.3 * 0.8)  # 55.36
    assert pdu_capacity_kw(pdus, "N+1") == pytest.approx(3 * 17.3 * 0.8)  # 41.52
    assert pdu_capacity_kw(pdus, "2N") == pytest.approx(2 * 17.3 * 0.8)  # 27.68
    # Mixed ratings: 2N keeps the weaker half; N+1 loses the largest.
    mixed = [PduGroup(2, 10.0), PduGroup(2, 20.0)]
    assert pdu_capacity_kw(mixed, "2N", continuous_load_factor=1.0) == pytest.approx(20.0)
    assert pdu_capacity_kw(mixed, "N+1", continuous_load_factor=1.0) == pytest.approx(40.0)


def test_four_dgx_h100_on_2n_of_four_pdus_is_pdu_bound():
    # Given 4 DGX H100 (40.8 kW) on four 17.3 kW PDUs as 2N (27.68 kW usable),
    # a 50 kW budget and 45 kW of cooling, the PDUs bind, 13.12 kW short.
    nodes, pdus = [NodePower(4, DGX_H100_MAX_W)], [PduGroup(4, 17.3)]
    result = rack_power(nodes, pdus, "2N", budget_kw=50.0, cooling_kw=45.0)
    assert result.draw_kw == pytest.approx(40.8)
    assert result.pdu_derated_kw == pytest.approx(27.68)
    assert result.binding_limit == "pdu"
    assert result.shortfall_kw == pytest.approx(13.12)
    assert result.headroom_kw == 0.0
    assert result.basis == "nameplate"
    assert result.utilisation == pytest.approx(40.8 / 27.68)  # 1.474: over the PDU limit


def test_measured_sustained_power_replaces_nameplate_and_cooling_binds():
    # Seed 000 "Calculate power at sustained utilization": use measured long-run server power.
    nodes = [NodePower(4, DGX_H100_MAX_W, sustained_w=8_400.0)]
    result = rack_power(nodes, [PduGroup(4, 17.3)], "N+1", budget_kw=40.0, cooling_kw=35.0)
    assert result.draw_kw == pytest.approx(33.6)
    assert result.basis == "measured"
    assert result.binding_limit == "cooling"
    assert result.headroom_kw == pytest.approx(1.4)
    mixed = rack_power(nodes + [NodePower(1, DGX_B200_MAX_W)], [PduGroup(6, 17.3)], "N")
    assert mixed.basis == "mixed" and mixed.draw_kw == pytest.approx(47.9)


def test_the_pdus_each_redundancy_mode_is_built_from():
    # N runs on what it has; N+1 has one PDU to spare; 2N one per feed of the A/B pair.
    assert [pdus_required(mode) for mode in ("N", "N+1", "2N")] == [1, 2, 2]
    with pytest.raises(ValueError, match="N, N\\+1, 2N"):
        pdus_required("3N")


def test_invalid_redundancy_names_allowed_values():
    with pytest.raises(ValueError, match="N, N\\+1, 2N"):
        pdu_capacity_kw([PduGroup(2, 17.3)], "N+2")
    with pytest.raises(ValueError, match="at least 2 PDUs"):
        pdu_capacity_kw([PduGroup(1, 17.3)], "2N")
    with pytest.raises(ValueError):
        pdu_capacity_kw([PduGroup(2, 17.3)], "N", continuous_load_factor=1.25)


@given(
    count=st.integers(1, 64),
    watts=st.floats(1.0, 50_000.0),
    pdus=st.integers(2, 16),
    rating=st.floats(0.1, 100.0),
    mode=st.sampled_from(["N", "N+1", "2N"]),
)
def test_results_are_finite_and_non_negative(count, watts, pdus, rating, mode):
    r = rack_power([NodePower(count, watts)], [PduGroup(pdus, rating)], mode)
    for value in (r.draw_kw, r.pdu_derated_kw, r.limit_kw, r.headroom_kw, r.shortfall_kw):
        assert math.isfinite(value) and value >= 0


def test_pdu_capacity_counts_pdus_without_listing_them() -> None:
    # A rack claiming 2^53 PDUs once made the estimator build a list of 2^53 ratings.
    from rules.estimates.power_cost.power import PduGroup, pdu_capacity_kw

    huge = 2**53

    assert pdu_capacity_kw([PduGroup(huge, 10.0)], "N+1", 0.8) == pytest.approx((huge - 1) * 10.0 * 0.8)
    assert pdu_capacity_kw([PduGroup(2, 10.0), PduGroup(2, 20.0)], "2N", 0.8) == pytest.approx(16.0)

"""Tests for rules.estimates.power_cost.site_power: the quote's racks placed, sized under their redundancy and
summed."""

import pytest

from rules.estimates.power_cost.power import NodePower, PduGroup
from rules.estimates.power_cost.site_power import RackKind, Site, site_power, size_rack

DGX_H100_MAX_W = 10_200.0  # NVIDIA DGX H100 user guide: 10.2 kW maximum input
STORAGE_MAX_W = 1_200.0  # a storage server's nameplate maximum, as quoted


def _gpu_rack(name: str, count: int, nodes: int, budget_kw: float | None = 50.0) -> RackKind:
    return RackKind(name, count, (("gpu", nodes),), (NodePower(nodes, DGX_H100_MAX_W),), (PduGroup(4, 34.6),),
                    "2N", budget_kw=budget_kw, cooling_kw=60.0)


def test_two_racks_of_four_dgx_h100_and_a_storage_rack_short_of_a_pdu_for_2n():
    # Given two racks of four DGX H100 (4 × 10.2 = 40.8 kW each) on four 34.6 kW PDUs as 2N (one feed of two
    # PDUs: 2 × 34.6 × 0.8 = 55.36 kW after NEC 210.20(A) derating), a 50 kW budget and 60 kW of cooling,
    # and one storage rack that claims 2N on a single PDU,
    storage = RackKind("S", 1, (("storage", 2),), (NodePower(2, STORAGE_MAX_W),), (PduGroup(1, 8.6),), "2N",
                       budget_kw=10.0)
    site = Site((_gpu_rack("A", 2, 4), storage), (("gpu", 8), ("storage", 2)))

    sized = site_power(site, continuous_load_factor=0.8)

    # then the budget binds the GPU racks at 40.8 / 50 = 81.6 %, the site draws 2 × 40.8 = 81.6 kW, and the
    # storage rack is not sized: 2N needs two PDUs, it has one.
    assert [rack.rack.name for rack in sized.sized] == ["A"]
    worst = sized.worst
    assert worst is not None and worst.rack.name == "A"
    assert worst.power.pdu_derated_kw == pytest.approx(55.36)
    assert (worst.power.binding_limit, worst.power.limit_kw) == ("budget", 50.0)
    assert worst.power.utilisation == pytest.approx(0.816)
    assert sized.site_kw == pytest.approx(81.6)
    assert [(rack.rack.name, rack.pdus, rack.pdus_required, rack.pdus_short) for rack in sized.short_of_pdus] == [
        ("S", 1, 2, 1)]
    assert (sized.placed_nodes, sized.quoted_nodes, sized.placement_problems) == (10, 10, 0)
    assert sized.racks_over_limit == 0


def test_nodes_placed_other_than_quoted_and_unknown_groups_are_placement_problems():
    # One rack of four GPU nodes for eight quoted, and a rack naming a group the quote does not have.
    site = Site((_gpu_rack("A", 1, 4),), (("gpu", 8), ("storage", 2)), unknown_groups=(("B", "gpu-b"),))

    sized = site_power(site)

    assert (sized.placed_nodes, sized.quoted_nodes) == (4, 10)
    assert sized.unplaced == (("gpu", 4, 8), ("storage", 0, 2))
    assert sized.placement_problems == 3


def test_the_fullest_rack_decides_and_racks_over_their_limit_are_counted():
    # Four DGX H100 on a 35 kW budget: 40.8 / 35 = 1.166, over; two on the same budget: 20.4 / 35 = 0.583.
    site = Site((_gpu_rack("half", 3, 2, budget_kw=35.0), _gpu_rack("full", 1, 4, budget_kw=35.0)), (("gpu", 10),))

    sized = site_power(site)

    assert sized.worst is not None and sized.worst.rack.name == "full"
    assert sized.worst.power.utilisation == pytest.approx(40.8 / 35)
    assert sized.racks_over_limit == 1
    assert sized.site_kw == pytest.approx(3 * 20.4 + 40.8)  # 102.0 kW


def test_a_rack_without_nodes_of_known_power_or_pdus_is_not_sized_nor_short():
    empty = RackKind("network", 1, (), (), (PduGroup(1, 8.6),), "2N")
    unpowered = RackKind("new", 1, (("gpu", 2),), (), (PduGroup(2, 8.6),), "N+1")

    assert size_rack(empty).power is None and size_rack(unpowered).power is None
    assert site_power(Site((empty, unpowered), (("gpu", 2),))).short_of_pdus == ()
    assert size_rack(empty).pdus_short == 1  # the count is a fact; a rack holding nothing is not judged on it

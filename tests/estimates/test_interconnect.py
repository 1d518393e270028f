"""Tests for rules.estimates.communication.interconnect: each quotes the published figure it reproduces."""

import pytest

from rules.estimates.communication.interconnect import (
    BusbwFractions,
    ComputeNetwork,
    IntraNodeLink,
    algbw_gbs,
    allgather_time_s,
    allreduce_time_s,
    busbw_factor,
    busbw_from_algbw_gbs,
    gbps_to_gbs,
    group_nic_share,
    hierarchical_busbw_gbs,
    job_bandwidth,
    nvlink_busbw_gbs,
    pcie_x16_gbs,
    reduce_scatter_time_s,
)
from rules.estimates.communication.nccl_tests import MeasuredBusbw

NOT_MEASURED = MeasuredBusbw(None, None, None, ())
POLICY_FRACTIONS = BusbwFractions(nvlink=0.8, pcie=0.6, nic=0.92)  # rules/data/policy.default.json
DGX_H100_NVLINK = IntraNodeLink(900)
EIGHT_NDR_NICS = ComputeNetwork(nics=8, gbps=8 * 400, fabric_link_gbps=None, oversubscription=1.0)


def test_busbw_factors_match_nccl_tests_performance_md():
    # nccl-tests doc/PERFORMANCE.md "Summary": all-reduce 2(n-1)/n; all-gather, reduce-scatter (n-1)/n.
    assert busbw_factor("all-reduce", 8) == pytest.approx(1.75)
    assert busbw_factor("all-reduce", 2) == pytest.approx(1.0)
    assert busbw_factor("all-gather", 8) == pytest.approx(0.875)
    assert busbw_factor("reduce-scatter", 16) == pytest.approx(15 / 16)
    assert busbw_factor("broadcast", 8) == 1.0
    assert busbw_factor("all-to-all", 4) == pytest.approx(0.75)


def test_algbw_and_busbw_from_sample_row_match_nccl_tests_definitions():
    # PERFORMANCE.md: algbw = S/t; busbw = algbw × 2(n-1)/n. The 8 GiB row: 8589934592 B in 40511 us.
    algbw = algbw_gbs(8589934592, 40511e-6)
    assert algbw == pytest.approx(212.04, abs=0.01)
    assert busbw_from_algbw_gbs(algbw, "all-reduce", 8) == pytest.approx(371.07, abs=0.01)


def test_7b_bf16_gradients_allreduce_on_8_h100_at_370_gbs_busbw():
    # H100 NVLink ring busbw ≈ 370 GB/s (NCCL maintainer, nccl-tests issue #212). 7B params of bf16
    # gradients = 14 GB; ring all-reduce t = 2(n-1)/n · S / busbw = 2·7/8 · 14e9 / 370e9 = 66.2 ms.
    t = allreduce_time_s(14e9, 8, 370.0)
    assert t == pytest.approx(2 * 7 / 8 * 14e9 / 370e9)
    assert t == pytest.approx(0.06622, abs=1e-5)


def test_allgather_and_reduce_scatter_times_are_half_of_allreduce():
    # PERFORMANCE.md: all-gather and reduce-scatter t = S(n-1)/(B n): half an all-reduce of the same S.
    assert allgather_time_s(14e9, 8, 370.0) == pytest.approx(allreduce_time_s(14e9, 8, 370.0) / 2)
    assert reduce_scatter_time_s(14e9, 8, 370.0) == pytest.approx(7 / 8 * 14e9 / 370e9)
    assert allreduce_time_s(14e9, 1, 370.0) == 0.0


def test_hierarchical_busbw_one_hdr_nic_per_8_gpu_node_nccl_issue_412():
    # NVIDIA/nccl issue #412: 8 GPUs with one HDR 200G NIC: ~160 GB/s intra-node, ~24 GB/s inter-node,
    # and more NICs raise it "up to 160GB/s which is the NVLink intra-node bandwidth".
    one_nic = hierarchical_busbw_gbs(160.0, nic_gbs=24.0, nics_per_node=1, nodes=12)
    assert one_nic.busbw_gbs == pytest.approx(24.0) and one_nic.bound_by == "network"
    many_nics = hierarchical_busbw_gbs(160.0, nic_gbs=24.0, nics_per_node=8, nodes=12)
    assert many_nics.busbw_gbs == pytest.approx(160.0) and many_nics.bound_by == "node"


def test_hierarchical_busbw_dgx1_four_edr_nics_nccl_tests_issue_29():
    # nccl-tests issue #29: one 100 Gb/s NIC gives ~12.2 GB/s; a DGX-1 with 4 IB adapters 48 GB/s.
    assert hierarchical_busbw_gbs(130.0, 12.0, 4, nodes=2).busbw_gbs == pytest.approx(48.0)


def test_hierarchical_busbw_oversubscription_and_single_node():
    ndr = gbps_to_gbs(400)
    assert ndr == 50.0
    oversubscribed = hierarchical_busbw_gbs(370.0, ndr, 8, nodes=4, oversubscription=2)
    assert oversubscribed.busbw_gbs == pytest.approx(200.0)
    single = hierarchical_busbw_gbs(370.0, ndr, 8, nodes=1)
    assert single.busbw_gbs == 370.0 and single.network_busbw_gbs is None


def test_nvlink_busbw_at_80_percent_of_one_direction_matches_measured_h100_and_a100():
    # NVIDIA quotes NVLink bidirectionally (H100 SXM 900 GB/s, A100 600 GB/s); NCCL maintainers measure
    # about 370 GB/s (H100, nccl-tests issue #212) and 230 GB/s (A100) all-reduce busbw on 8 GPUs.
    assert nvlink_busbw_gbs(900, 0.8) == pytest.approx(360.0)
    assert nvlink_busbw_gbs(900, 0.8) == pytest.approx(370, rel=0.03)
    assert nvlink_busbw_gbs(600, 0.8) == pytest.approx(230, rel=0.05)
    with pytest.raises(ValueError, match="busbw_fraction"):
        nvlink_busbw_gbs(900, 1.2)


def test_pcie_x16_rates_match_pci_sig_generations():
    # PCI-SIG: Gen4 16 GT/s × 16 lanes × 128/130 / 8 = 31.5 GB/s per direction; Gen5 twice that.
    assert pcie_x16_gbs(4) == pytest.approx(16 * 16 * 128 / 130 / 8, rel=1e-3)
    assert pcie_x16_gbs(5) == pytest.approx(2 * pcie_x16_gbs(4))
    with pytest.raises(ValueError, match="PCIe generation"):
        pcie_x16_gbs(2)


def test_tensor_parallel_groups_share_the_node_nics():
    # TP 8 on an 8-GPU DGX H100: eight data-parallel groups (one per TP rank) each own one of the eight
    # NDR NICs (Narayanan et al. 2021 §3.3): one NIC at 46 GB/s instead of the node's 368 GB/s.
    share = group_nic_share(1, 8)
    assert share == pytest.approx(1 / 8)
    tiers = hierarchical_busbw_gbs(360.0, 46.0, 8 * share, nodes=32)
    assert tiers.busbw_gbs == pytest.approx(46.0) and tiers.bound_by == "network"
    assert group_nic_share(8, 8) == 1.0
    with pytest.raises(ValueError, match="exceeds"):
        group_nic_share(16, 8)


def test_invalid_collective_names_allowed_values():
    with pytest.raises(ValueError, match="all-reduce"):
        busbw_factor("allreduce", 8)


def test_dgx_h100_job_busbw_is_bound_by_nvlink_when_eight_ndr_nics_exceed_it():
    # NVLink 900 GB/s bidirectional → 450 per direction × 0.8 = 360 GB/s in the node; 8 NDR NICs at
    # 400 Gb/s = 50 GB/s × 0.92 = 46 GB/s each, 368 GB/s per node (NVIDIA/nccl issue #412): node-bound.
    links = job_bandwidth(4, 8, 8, NOT_MEASURED, DGX_H100_NVLINK, EIGHT_NDR_NICS, POLICY_FRACTIONS)
    assert (links.node_busbw_gbs, links.network_busbw_gbs, links.cluster_busbw_gbs) == (360.0, 368.0, 360.0)
    assert links.bound_by == "node" and links.intra_node_link == "NVLink 900 GB/s"


def test_a_slower_fabric_link_caps_each_nic():
    # 400 Gb/s NICs on a 200 Gb/s fabric run at 200: 25 GB/s × 0.92 × 8 = 184 GB/s, below NVLink.
    network = ComputeNetwork(nics=8, gbps=3200, fabric_link_gbps=200, oversubscription=0.5)
    links = job_bandwidth(4, 8, 8, NOT_MEASURED, DGX_H100_NVLINK, network, POLICY_FRACTIONS)
    assert links.cluster_busbw_gbs == pytest.approx(184.0) and links.bound_by == "network"
    assert "oversubscription 1:1" in links.source  # a ratio below 1:1 is taken as non-blocking


def test_tensor_parallel_8_leaves_each_data_parallel_group_one_nic():
    # Narayanan et al. 2021 §3.3: with TP 8 on the node, each data-parallel group crosses nodes on one NIC.
    links = job_bandwidth(32, 1, 8, NOT_MEASURED, DGX_H100_NVLINK, EIGHT_NDR_NICS, POLICY_FRACTIONS)
    assert links.cluster_busbw_gbs == pytest.approx(46.0) and links.bound_by == "network"


def test_measured_busbw_replaces_the_nameplates():
    # nccl-tests on 4 nodes measured 22.11 GB/s (GPUDirect RDMA off); on one node 370 GB/s.
    measured = MeasuredBusbw(370.0, 4, 22.11, ("/measurements/nccl_tests/2 not used: no rows",))
    links = job_bandwidth(4, 8, 8, measured, None, None, POLICY_FRACTIONS)
    assert (links.node_busbw_gbs, links.cluster_busbw_gbs, links.bound_by) == (370.0, 22.11, "measured")
    assert links.source.endswith("/measurements/nccl_tests/2 not used: no rows")


def test_a_pcie_only_node_reaches_a_share_of_pcie_x16():
    # L40S has no NVLink: PCIe Gen4 x16 31.5 GB/s per direction × 0.6 = 18.9 GB/s; one node: no network tier.
    link = IntraNodeLink(0, pcie_generation=4, pcie_generation_from="catalogue L40S-48GB")
    links = job_bandwidth(1, 8, 8, NOT_MEASURED, link, None, POLICY_FRACTIONS)
    assert links.node_busbw_gbs == links.cluster_busbw_gbs == pytest.approx(18.9)
    assert links.network_busbw_gbs is None and "PCIe Gen4 x16" in links.intra_node_link

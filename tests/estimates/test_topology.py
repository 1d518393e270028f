"""Tests for rules.estimates.communication.topology: NIC bandwidth per GPU and nvidia-smi topo -m path types."""

import pytest

from rules.estimates.communication.topology import crosses_cpu, nic_bandwidth, pcie_path


def test_dgx_h100_has_one_400g_compute_nic_per_gpu():
    # DGX H100 user guide: eight single-port ConnectX-7 NDR 400 Gb/s for eight H100 GPUs.
    compute = nic_bandwidth([(8, 400)], gpus_per_node=8)
    assert (compute.nics, compute.gbps, compute.nics_per_gpu, compute.gbps_per_gpu) == (8, 3200, 1.0, 400.0)
    assert compute.gbs == 400.0


def test_dgx_h100_storage_nics_give_100_gbs_per_node():
    # Two dual-port 400 Gb/s ConnectX-7 for storage, counted as two adapters in the catalogue: 800 Gb/s = 100 GB/s.
    assert nic_bandwidth([(2, 400)], gpus_per_node=8).gbs == 100.0


def test_nics_of_several_lines_add_up_and_none_is_zero():
    assert nic_bandwidth([(2, 200), (1, 100)], gpus_per_node=4).gbps_per_gpu == pytest.approx(125.0)
    assert nic_bandwidth([], gpus_per_node=8).nics_per_gpu == 0.0
    with pytest.raises(ValueError):
        nic_bandwidth([(1, 0)], gpus_per_node=8)


@pytest.mark.parametrize(("gpu", "nic", "path"), [
    ((0, "sw0"), (0, "sw0"), "PIX"),          # same PCIe switch (DGX H100: each GPU with its ConnectX-7)
    ((0, "sw0/a"), (0, "sw0/b"), "PXB"),      # two switches below a common upstream switch
    ((0, "sw0"), (0, "sw1"), "NODE"),         # different switches of one socket: through the CPU's host bridges
    ((0, "sw0"), (0, None), "NODE"),          # NIC on a CPU root port
    ((0, "sw0"), (1, "sw4"), "SYS"),          # the other socket: across UPI / Infinity Fabric
])
def test_pcie_path_in_nvidia_smi_topo_terms(gpu, nic, path):
    assert pcie_path(gpu[0], gpu[1], nic[0], nic[1]) == path


def test_only_paths_farther_than_pxb_lose_gpudirect_rdma_under_nccl_defaults():
    # NCCL src/graph/paths.cc ncclTopoCheckGdr: netGdrLevel = PATH_PXB by default.
    assert [crosses_cpu(p) for p in ("PIX", "PXB", "PHB", "NODE", "SYS")] == [False, False, True, True, True]
    with pytest.raises(ValueError):
        crosses_cpu("NV18")


def test_cpu_cores_of_a_dgx_h100() -> None:
    # DGX H100 user guide: two Intel Xeon Platinum 8480C of 56 cores each = 112 cores.
    from rules.estimates.communication.topology import cpu_cores

    assert cpu_cores(2, 56) == 112
    with pytest.raises(ValueError, match="sockets"):
        cpu_cores(0, 56)


def test_nic_placement_flags_the_gpu_whose_nic_sits_across_the_cpu() -> None:
    # Given GPU0 and its NIC under one PCIe switch (PIX), GPU1's NIC on the other socket (SYS: NCCL then
    # disables GPUDirect RDMA beyond PXB) and GPU2 without a stated NIC, on an 8-GPU node,
    from rules.estimates.communication.topology import GpuNicEntry, nic_placement

    entries = [GpuNicEntry(0, "mlx5_0", 0, numa_node=0, pcie_switch="sw0/a", nic_pcie_switch="sw0/a"),
               GpuNicEntry(1, "mlx5_1", 1, numa_node=0, pcie_switch="sw0/b", nic_pcie_switch="sw1/a"),
               GpuNicEntry(2, None, None)]

    placement = nic_placement(entries, gpus_per_node=8)

    # then GPU1 crosses the CPU and six GPUs have no located NIC; no stated layout leaves none unmapped.
    assert placement.links == ("PIX", "SYS", "unknown")
    assert placement.cross_cpu == ("GPU1→mlx5_1 SYS",)
    assert placement.unmapped_gpus == 6
    assert nic_placement([], gpus_per_node=8).unmapped_gpus == 0

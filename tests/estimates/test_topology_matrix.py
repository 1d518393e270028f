"""rules.estimates.communication.topology_matrix on real nvidia-smi topo -m matrices (tests/data/README.md names each
source).

The expected figures are read off each sample's own cells: the GPU row under the NIC columns, the GPU–GPU
cells (NV# or a PCIe path) and the NIC Legend.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers import topology
from rules.errors import InconsistentInput
from rules.estimates.communication.topology_matrix import (
    MatrixNic,
    TopologyMatrix,
    matrix_placement,
    nvlinks,
    path_name,
)

DATA = Path(__file__).parents[1] / "data" / "topology"


def matrix(name: str) -> TopologyMatrix:
    parsed = topology.parse((DATA / name).read_text(encoding="utf-8"))
    return TopologyMatrix(tuple(g["name"] for g in parsed["gpus"]),
                          tuple(MatrixNic(n["name"], n["device"]) for n in parsed["nics"]), parsed["links"])


def links(placement) -> dict[str, tuple[str | None, str | None]]:
    return {g.gpu: (g.nic.label if g.nic else None, g.link) for g in placement.gpus}


def test_hgx_h200_rail_nics_are_pix_to_their_gpus_and_no_pair_crosses_the_sockets():
    # the sample's NIC1 and NIC2 are the second and third ports of GPU3's adapter; the other eight are the rails
    rails = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]

    placement = matrix_placement(matrix("hgx_8x_nv18_10nic_tabs_ansi.txt"), 8, rails)

    assert links(placement) == {"GPU0": ("mlx5_3", "PIX"), "GPU1": ("mlx5_5", "PIX"), "GPU2": ("mlx5_4", "PIX"),
                                "GPU3": ("mlx5_0", "PIX"), "GPU4": ("mlx5_7", "PIX"), "GPU5": ("mlx5_9", "PIX"),
                                "GPU6": ("mlx5_8", "PIX"), "GPU7": ("mlx5_6", "PIX")}
    assert (placement.cross_cpu, placement.unmapped_gpus, placement.gpu_pairs_across_sockets) == ((), 0, ())
    assert (placement.fewest_nvlinks, placement.most_nvlinks, len(placement.nvlinks_per_pair)) == (18, 18, 28)


def test_amd_epyc_pcie_server_reaches_every_nic_through_the_cpu_at_node():
    placement = matrix_placement(matrix("asus_esc8000a_e12_epyc_4x_rtx6000ada.txt"), 4)

    assert placement.cross_cpu == ("GPU0→mlx5_0 NODE", "GPU1→mlx5_0 NODE", "GPU2→mlx5_2 NODE", "GPU3→mlx5_2 NODE")
    # with NCCL_NET_GDR_LEVEL=NODE the same paths are accepted
    assert matrix_placement(matrix("asus_esc8000a_e12_epyc_4x_rtx6000ada.txt"), 4, farthest="NODE").cross_cpu == ()


def test_dgx1_hybrid_cube_mesh_has_one_or_two_nvlinks_per_pair_and_four_pairs_per_gpu_at_sys():
    placement = matrix_placement(matrix("dgx1_v100_no_numa_column.txt"), 8)

    assert placement.nvlinks_per_pair["GPU0–GPU1"] == 1 and placement.nvlinks_per_pair["GPU0–GPU3"] == 2
    assert (placement.fewest_nvlinks, placement.most_nvlinks) == (0, 2)
    assert "GPU0–GPU5 SYS" in placement.gpu_pairs_across_sockets
    assert links(placement)["GPU4"] == ("mlx5_2", "PIX")  # the NIC columns come in the order mlx5_0, _2, _1, _3


def test_two_socket_a100_node_with_one_gpu_per_socket():
    placement = matrix_placement(matrix("princeton_della_2x_a100_two_sockets.txt"), 2)

    assert links(placement) == {"GPU0": ("mlx5_0", "NODE"), "GPU1": ("mlx5_1", "NODE")}
    assert placement.gpu_pairs_across_sockets == ("GPU0–GPU1 SYS",)
    assert placement.nvlinks_per_pair == {"GPU0–GPU1": 0}


def test_a_stated_rail_nic_across_the_socket_is_judged_though_a_nearer_nic_exists():
    # Given the Della node with each GPU's NIC swapped by the quote: GPU0 → mlx5_1 (the other socket's port)
    placement = matrix_placement(matrix("princeton_della_2x_a100_two_sockets.txt"), 2,
                                 stated={"GPU0": "mlx5_1", "GPU1": "mlx5_1"})

    gpu0 = placement.gpus[0]
    assert (gpu0.nic.label, gpu0.link, gpu0.stated, gpu0.nearest.label, gpu0.nearest_link) == (
        "mlx5_1", "SYS", True, "mlx5_0", "NODE")
    assert placement.cross_cpu == ("GPU0→mlx5_1 SYS", "GPU1→mlx5_1 NODE")


def test_a_stated_nic_the_matrix_lacks_falls_back_to_the_nearest():
    placement = matrix_placement(matrix("puget_wrx90_threadripper_2x_rtx6000ada.txt"), 2, stated={"GPU0": "cx7-a"})

    assert (placement.gpus[0].nic.label, placement.gpus[0].stated) == ("mlx5_0", False)


def test_gpu_only_matrix_leaves_every_gpu_of_the_node_unmapped():
    placement = matrix_placement(matrix("h100_8gpu_gpu_only_ml_engineering.txt"), 8)

    assert placement.unmapped_gpus == 8 and placement.compute_nics == ()
    # a matrix of fewer GPUs than the node holds leaves the others unmapped too
    assert matrix_placement(matrix("puget_wrx90_threadripper_2x_rtx6000ada.txt"), 8).unmapped_gpus == 6


def test_compute_nics_the_matrix_does_not_have_are_named():
    with pytest.raises(InconsistentInput, match=r"the compute NICs mlx5_7 are not in the nvidia-smi topo -m matrix "
                                                r"\(its NICs: mlx5_0, mlx5_1\)"):
        matrix_placement(matrix("princeton_della_2x_a100_two_sockets.txt"), 2, ["mlx5_0", "mlx5_7"])


def test_cells_read_as_the_legend_names_them():
    assert (nvlinks("NV18"), nvlinks("NV1"), nvlinks("SYS")) == (18, 1, 0)
    assert (path_name("SOC"), path_name("PXB")) == ("SYS", "PXB")
    with pytest.raises(InconsistentInput):
        path_name("NV4")

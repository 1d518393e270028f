"""parsers.topology on real `nvidia-smi topo -m` matrices (tests/data/README.md names each source).

Every expected figure below is read off the sample's own matrix: the GPU row's cells under the NIC
columns, its CPU Affinity and NUMA Affinity values, and the NIC Legend.
"""

from pathlib import Path

import pytest

from parsers import ParseError, topology

DATA = Path(__file__).parents[1] / "data" / "topology"


def sample(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def parse_error(text: str) -> str:
    with pytest.raises(ParseError) as caught:
        topology.parse(text)
    return str(caught.value)


def nearest(result: dict) -> dict[str, tuple[str, str | None, str]]:
    return {g["name"]: tuple(g["nearest_nic"].values()) for g in result["gpus"]}


# ---------------------------------------------------------------- 8-GPU NVLink nodes with a NIC per GPU


def test_hgx_nv18_tab_separated_with_ansi_underline_maps_each_gpu_to_its_pix_nic():
    # Given an 8x NV18 node with 10 ConnectX ports, printed with tabs and an ESC[4m-underlined header
    result = topology.parse(sample("hgx_8x_nv18_10nic_tabs_ansi.txt"))

    # Then each GPU's nearest NIC is the one its row marks PIX; GPU3 sees NIC0, NIC1 and NIC2 at PIX
    # (one multi-port adapter) and keeps the first
    assert nearest(result) == {
        "GPU0": ("NIC3", "mlx5_3", "PIX"),
        "GPU1": ("NIC5", "mlx5_5", "PIX"),
        "GPU2": ("NIC4", "mlx5_4", "PIX"),
        "GPU3": ("NIC0", "mlx5_0", "PIX"),
        "GPU4": ("NIC7", "mlx5_7", "PIX"),
        "GPU5": ("NIC9", "mlx5_9", "PIX"),
        "GPU6": ("NIC8", "mlx5_8", "PIX"),
        "GPU7": ("NIC6", "mlx5_6", "PIX"),
    }
    assert [(g["numa_node"], g["cpu_affinity"]) for g in result["gpus"]] == [(0, "0-63,128-191")] * 4 + [
        (1, "64-127,192-255")
    ] * 4
    assert [n["numa_node"] for n in result["nics"]] == [0] * 6 + [1] * 4
    assert set(result["links"]["GPU0"].values()) >= {"NV18"}
    assert result["links"]["GPU0"]["GPU7"] == "NV18" and result["links"]["GPU4"]["NIC2"] == "SYS"


def test_a100_nv12_gpu_pairs_share_a_pxb_nic_and_unattached_nics_have_no_numa_node():
    result = topology.parse(sample("a100_8gpu_nv12_10nic_litgpt.txt"))

    assert nearest(result) == {
        "GPU0": ("NIC2", "mlx5_2", "PXB"),
        "GPU1": ("NIC2", "mlx5_2", "PXB"),
        "GPU2": ("NIC0", "mlx5_0", "PXB"),
        "GPU3": ("NIC0", "mlx5_0", "PXB"),
        "GPU4": ("NIC8", "mlx5_8", "PXB"),
        "GPU5": ("NIC8", "mlx5_8", "PXB"),
        "GPU6": ("NIC4", "mlx5_4", "PXB"),
        "GPU7": ("NIC4", "mlx5_4", "PXB"),
    }
    assert result["links"]["GPU0"]["GPU1"] == "NV12"
    assert [g["cpu_affinity"] for g in result["gpus"]] == ["0-63,128-191"] * 4 + ["64-127,192-254"] * 4
    # NIC6 and NIC7 are SYS from every GPU (a PIX pair of their own): no GPU places them
    by_name = {n["name"]: n["numa_node"] for n in result["nics"]}
    assert by_name == {
        "NIC0": 0, "NIC1": 0, "NIC2": 0, "NIC3": 0, "NIC4": 1, "NIC5": 1,
        "NIC6": None, "NIC7": None, "NIC8": 1, "NIC9": 1,
    }  # fmt: skip


def test_dgx1_old_driver_without_numa_column_names_nics_by_device_in_header_order():
    # Given a DGX-1 matrix from a driver that printed CPU Affinity only and mlx5_* column names
    # in the order mlx5_0, mlx5_2, mlx5_1, mlx5_3
    result = topology.parse(sample("dgx1_v100_no_numa_column.txt"))

    assert nearest(result) == {
        "GPU0": ("mlx5_0", "mlx5_0", "PIX"),
        "GPU1": ("mlx5_0", "mlx5_0", "PIX"),
        "GPU2": ("mlx5_1", "mlx5_1", "PIX"),
        "GPU3": ("mlx5_1", "mlx5_1", "PIX"),
        "GPU4": ("mlx5_2", "mlx5_2", "PIX"),
        "GPU5": ("mlx5_2", "mlx5_2", "PIX"),
        "GPU6": ("mlx5_3", "mlx5_3", "PIX"),
        "GPU7": ("mlx5_3", "mlx5_3", "PIX"),
    }
    # no NUMA column: nothing to report, for GPUs or (through them) NICs
    assert [g["numa_node"] for g in result["gpus"]] == [None] * 8
    assert [(n["name"], n["numa_node"]) for n in result["nics"]] == [
        ("mlx5_0", None), ("mlx5_2", None), ("mlx5_1", None), ("mlx5_3", None),
    ]  # fmt: skip
    assert result["gpus"][4]["cpu_affinity"] == "20-39,60-79"
    assert result["links"]["GPU0"] == {
        "GPU1": "NV1", "GPU2": "NV1", "GPU3": "NV2", "GPU4": "NV2", "GPU5": "SYS", "GPU6": "SYS",
        "GPU7": "SYS", "mlx5_0": "PIX", "mlx5_2": "SYS", "mlx5_1": "PHB", "mlx5_3": "SYS",
    }  # fmt: skip


# ---------------------------------------------------------------- PCIe servers and workstations


def test_amd_epyc_pcie_server_space_separated_gpus_reach_their_nics_through_the_cpu_at_node():
    result = topology.parse(sample("asus_esc8000a_e12_epyc_4x_rtx6000ada.txt"))

    # GPU0 sees NIC0 and NIC1 at NODE: the tie keeps NIC0
    assert nearest(result) == {
        "GPU0": ("NIC0", "mlx5_0", "NODE"),
        "GPU1": ("NIC0", "mlx5_0", "NODE"),
        "GPU2": ("NIC2", "mlx5_2", "NODE"),
        "GPU3": ("NIC2", "mlx5_2", "NODE"),
    }
    assert [(g["numa_node"], g["cpu_affinity"]) for g in result["gpus"]] == [(0, "0-31")] * 2 + [(1, "32-63")] * 2
    assert result["nics"] == [
        {"name": "NIC0", "device": "mlx5_0", "numa_node": 0},
        {"name": "NIC1", "device": "mlx5_1", "numa_node": 0},
        {"name": "NIC2", "device": "mlx5_2", "numa_node": 1},
        {"name": "NIC3", "device": "mlx5_3", "numa_node": 1},
    ]


def test_two_gpu_threadripper_workstation_with_phb_between_gpus():
    result = topology.parse(sample("puget_wrx90_threadripper_2x_rtx6000ada.txt"))

    assert nearest(result) == {"GPU0": ("NIC0", "mlx5_0", "NODE"), "GPU1": ("NIC0", "mlx5_0", "NODE")}
    assert result["links"] == {
        "GPU0": {"GPU1": "PHB", "NIC0": "NODE", "NIC1": "NODE"},
        "GPU1": {"GPU0": "PHB", "NIC0": "NODE", "NIC1": "NODE"},
    }
    assert [n["numa_node"] for n in result["nics"]] == [0, 0]


def test_two_socket_a100_node_whose_driver_names_nic_columns_by_device():
    result = topology.parse(sample("princeton_della_2x_a100_two_sockets.txt"))

    assert nearest(result) == {"GPU0": ("mlx5_0", "mlx5_0", "NODE"), "GPU1": ("mlx5_1", "mlx5_1", "NODE")}
    assert [(g["numa_node"], g["cpu_affinity"]) for g in result["gpus"]] == [(0, "0-63"), (1, "64-127")]
    assert [(n["name"], n["numa_node"]) for n in result["nics"]] == [("mlx5_0", 0), ("mlx5_1", 1)]


def test_power9_host_with_nv3_pairs_and_numa_node_8():
    result = topology.parse(sample("princeton_traverse_power9_4x_v100.txt"))

    assert nearest(result) == {
        "GPU0": ("mlx5_0", "mlx5_0", "NODE"),
        "GPU1": ("mlx5_0", "mlx5_0", "NODE"),
        "GPU2": ("mlx5_2", "mlx5_2", "NODE"),
        "GPU3": ("mlx5_2", "mlx5_2", "NODE"),
    }
    assert [g["numa_node"] for g in result["gpus"]] == [0, 0, 8, 8]
    assert [n["numa_node"] for n in result["nics"]] == [0, 0, 8, 8]
    assert result["links"]["GPU0"]["GPU1"] == "NV3" and result["links"]["GPU0"]["GPU2"] == "SYS"


# ---------------------------------------------------------------- GPU-only matrices


def test_gpu_only_h100_matrix_has_no_nics_and_null_nearest_nic():
    result = topology.parse(sample("h100_8gpu_gpu_only_ml_engineering.txt"))

    assert result["nics"] == []
    assert [g["nearest_nic"] for g in result["gpus"]] == [None] * 8
    assert [(g["numa_node"], g["cpu_affinity"]) for g in result["gpus"]] == [(0, "0-51,104-155")] * 4 + [
        (1, "52-103,156-207")
    ] * 4
    assert set(result["links"]["GPU3"].values()) == {"NV18"}


def test_two_gpus_on_one_pcie_switch_followed_by_a_p2p_matrix_that_is_ignored():
    # The sample goes on with `nvidia-smi topo -p2p p` (GPU0 X NS): text after the legend is not read
    result = topology.parse(sample("autodl_2x_rtx2080ti_pix_gpu_only.txt"))

    assert result == {
        "gpus": [
            {"name": "GPU0", "numa_node": 1, "cpu_affinity": "24-47,72-95", "nearest_nic": None},
            {"name": "GPU1", "numa_node": 1, "cpu_affinity": "24-47,72-95", "nearest_nic": None},
        ],
        "nics": [],
        "links": {"GPU0": {"GPU1": "PIX"}, "GPU1": {"GPU0": "PIX"}},
    }


# ---------------------------------------------------------------- variations of the same output


def test_a_terminal_copy_with_tabs_expanded_to_spaces_parses_the_same():
    text = sample("hgx_8x_nv18_10nic_tabs_ansi.txt")

    assert topology.parse(text.expandtabs(8)) == topology.parse(text)


def test_older_soc_link_name_ranks_as_sys():
    # drivers before R384 printed SOC where later ones print SYS (the sample's legend lists SYS)
    text = sample("dgx1_v100_no_numa_column.txt").replace("SYS", "SOC")

    result = topology.parse(text)

    assert nearest(result)["GPU0"] == ("mlx5_0", "mlx5_0", "PIX")
    assert result["links"]["GPU0"]["mlx5_2"] == "SOC"


def test_numa_affinity_spanning_nodes_gives_no_single_numa_node():
    text = sample("princeton_della_2x_a100_two_sockets.txt").replace("0-63\t0", "0-63\t0-1")

    result = topology.parse(text)

    assert [g["numa_node"] for g in result["gpus"]] == [None, 1]
    assert result["gpus"][0]["cpu_affinity"] == "0-63"


def test_bonded_devices_named_in_the_nic_legend_come_through():
    # a host with bonded ports lists mlx5_bond_N in its NIC Legend (derived from the ASUS sample)
    text = sample("asus_esc8000a_e12_epyc_4x_rtx6000ada.txt").replace(": mlx5_", ": mlx5_bond_")

    result = topology.parse(text)

    assert nearest(result)["GPU2"] == ("NIC2", "mlx5_bond_2", "NODE")
    assert [n["device"] for n in result["nics"]] == ["mlx5_bond_0", "mlx5_bond_1", "mlx5_bond_2", "mlx5_bond_3"]


def test_a_nic_row_that_prints_its_own_numa_affinity_is_taken_as_is():
    # some vendor builds print affinity for NIC rows too; the row's value wins over the GPUs' node
    lines = sample("puget_wrx90_threadripper_2x_rtx6000ada.txt").splitlines()
    lines[4] += "    0-23    1"  # NIC0 (line 5)

    result = topology.parse("\n".join(lines))

    assert [n["numa_node"] for n in result["nics"]] == [1, 0]


# ---------------------------------------------------------------- malformed and truncated input


def test_matrix_cut_after_a_nic_row_names_the_missing_row():
    # Given the HGX sample cut after its NIC5 row (line 15), as a paste that stopped early
    lines = sample("hgx_8x_nv18_10nic_tabs_ansi.txt").splitlines()
    text = "\n".join(lines[:15]) + "\n"

    with pytest.raises(ParseError) as error:
        topology.parse(text)

    assert str(error.value) == "line 16: expected the row for NIC6 (18 devices in the header), found end of input"
    assert error.value.line == 16


def test_row_missing_cells_names_the_line_and_the_expected_columns():
    # Given the POWER9 sample's GPU2 row (line 5) cut to its first link cells
    lines = sample("princeton_traverse_power9_4x_v100.txt").splitlines()
    lines[4] = "GPU2\tSYS\tSYS\t X \tNV3"

    assert parse_error("\n".join(lines)) == (
        "line 5: expected 10 columns (GPU0 ... CPU Affinity, NUMA Affinity), found 4"
    )


def test_nic_row_with_too_few_cells_expects_the_link_columns_only():
    lines = sample("puget_wrx90_threadripper_2x_rtx6000ada.txt").splitlines()
    lines[4] = "NIC0    NODE    NODE     X"  # line 5

    assert parse_error("\n".join(lines)) == "line 5: expected 4 columns (GPU0 ... NIC1), found 3"


def test_unknown_link_type_is_named_with_its_column():
    text = sample("puget_wrx90_threadripper_2x_rtx6000ada.txt").replace("GPU0     X      PHB", "GPU0     X      PCI")

    assert parse_error(text) == (
        "line 3: expected a link type (X, SYS, NODE, PHB, PXB, PIX, NV#) under GPU1, found 'PCI'"
    )


def test_shifted_cells_that_move_x_off_the_diagonal_are_rejected():
    lines = sample("puget_wrx90_threadripper_2x_rtx6000ada.txt").splitlines()
    lines[3] = "GPU1     X      PHB     NODE    NODE    0-23    0               N/A"  # line 4

    assert parse_error("\n".join(lines)) == "line 4: expected a path other than X to GPU0 in the GPU1 row, found 'X'"


def test_rows_out_of_header_order_are_rejected():
    lines = sample("asus_esc8000a_e12_epyc_4x_rtx6000ada.txt").splitlines()
    lines[3], lines[4] = lines[4], lines[3]

    assert parse_error("\n".join(lines)) == "line 4: expected the row for GPU1, found 'GPU2'"


def test_nic_legend_cut_short_names_the_first_missing_nic():
    lines = sample("hgx_8x_nv18_10nic_tabs_ansi.txt").splitlines()
    text = "\n".join(lines[:37])  # the legend stops after "NIC4: mlx5_4" (line 37)

    assert parse_error(text) == "line 38: expected 'NIC5: <device>' in the NIC Legend, found end of legend"


def test_text_without_a_matrix_header_is_rejected():
    with pytest.raises(ParseError, match=r"^line 2: expected the topo -m header"):
        topology.parse("Failed to initialize NVML: Driver/library version mismatch\n")


def test_input_that_is_not_text_is_a_type_error():
    with pytest.raises(TypeError):
        topology.parse(b"GPU0\tCPU Affinity")  # type: ignore[arg-type]

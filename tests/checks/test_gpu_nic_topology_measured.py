"""gpu-nic-topology decided from a recorded nvidia-smi topo -m matrix: the GPU, its NIC and the link in the record."""

from __future__ import annotations

from pathlib import Path

from fixture_support import load_fixture

from rules.evaluate import evaluate

FIXTURES = Path(__file__).parent / "gpu_nic_topology"


def result(name: str) -> dict:
    record = evaluate(load_fixture(FIXTURES / name))
    return next(c for c in record["checks"] if c["id"] == "gpu-nic-topology")


def test_gpu0_whose_only_compute_nic_sits_across_the_socket_fails_naming_gpu_nic_and_link():
    # Given an HGX H100 quote stating each GPU's rail NIC under the GPU's own PCIe switch (PIX), and a matrix
    # from the delivered node in which GPU0's rail NIC, mlx5_0, hangs off the other socket's switch
    checked = result("fail_hgx_h100_measured_gpu0_rail_nic_across_the_socket.json")

    # Then the check fails on the measured basis, the estimate (stated PIX) beside the measurement (SYS)
    assert (checked["status"], checked["rule"], checked["basis"]) == ("fail", "nic-across-cpu", "measured")
    evidence = checked["evidence"]
    assert evidence["gpus"][0] == {"gpu": "GPU0", "nic": "mlx5_0", "nic_column": "NIC0", "link": "SYS",
                                   "nic_from": "stated", "nearest_nic": "mlx5_1", "nearest_link": "NODE",
                                   "stated_nic": "mlx5_0", "stated_link": "PIX"}
    assert [g["link"] for g in evidence["gpus"][1:]] == ["PIX"] * 7
    assert evidence["cross_cpu_list"] == "GPU0→mlx5_0 SYS"
    assert evidence["measurement_source"] == "nvidia-smi topo -m (/measurements/topology/nvidia_smi_topo_m)"
    assert "/measurements/topology/nvidia_smi_topo_m" in evidence["inputs"]
    assert "GPU0→mlx5_0 SYS" in checked["message"]


def test_the_same_quote_without_the_matrix_passes_on_its_stated_layout():
    submission = load_fixture(FIXTURES / "fail_hgx_h100_measured_gpu0_rail_nic_across_the_socket.json")
    del submission["measurements"]

    checked = next(c for c in evaluate(submission)["checks"] if c["id"] == "gpu-nic-topology")

    assert (checked["status"], checked["basis"], checked["evidence"]["placement_basis"]) == (
        "pass", "estimated", "stated")

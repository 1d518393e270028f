"""The servers buyers are quoted (rules/data/catalogue.json): HGX H200, HGX B200 and HGX B300 8-GPU servers, the AMD
Instinct MI300X platform, and the B300 SXM GPU, each figure pinned to the number its cited source prints (written
out here with the source), and the source named in the figure's ref (tests/test_catalogue_data.py checks the
catalogue as a whole; tests/test_servers_by_name.py how a quote names them)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = json.loads((ROOT / "rules" / "data" / "catalogue.json").read_text(encoding="utf-8"))
SCHEMA = json.loads((ROOT / "schemas" / "catalogue.schema.json").read_text(encoding="utf-8"))
GPUS, SERVERS = CATALOGUE["gpus"], CATALOGUE["servers"]
GIB = 2**30

# The sources, by a string their URL holds.
DELL_XE9680_H200 = "XE9680_H200_SXM_141GBx8_TRT.json"  # Dell, MLPerf Inference v5.1 system description
SMC_A21GE_B200 = "SYS-A21GE-NBRT_B200-SXM-180GBx8_TRT.json"  # Supermicro, MLPerf Inference v5.1
NVIDIA_B300 = "B300-SXM-270GBx8_TRT.json"  # NVIDIA, MLPerf Inference v6.1
DELL_XE9680_MI300X = "XE9680_MI300X_192GBx8.json"  # Dell, MLPerf Inference v4.1
DGX_H_GUIDE = "dgxh100-user-guide"  # NVIDIA DGX H100/H200 User Guide
DGX_B200_GUIDE = "dgxb200-user-guide"  # NVIDIA DGX B200 User Guide
XE9680_REVIEW = "storagereview.com"  # StorageReview, Dell PowerEdge XE9680 review
HGX_B300_TABLE = "fibermall.com"  # NVIDIA's HGX specification table, reproduced
B300_RA = "hgx-ai-factory/abstract"  # NVIDIA HGX AI Factory reference architecture (HGX B300)
STH_ASUS_B300 = "asus-xa-nb3i-e12"  # ServeTheHome's review of the ASUS XA NB3I-E12 (HGX B300)
MAMF = "ml-engineering"  # stas00/ml-engineering MAMF table


def cites(entry: dict, field: str, source: str) -> bool:
    return source in entry["refs"][field]


# --- the B300 SXM GPU (HGX B300 / DGX B300) ---------------------------------------------------------------------


def test_b300_sxm_memory_is_nvidia_s_288_gb_in_gib():
    """NVIDIA NIM support matrix and Boltz-2 NIM notes: B300 288 GB HBM3e; no driver total retrieved, so converted."""
    b300 = GPUS["B300-SXM-270GB"]
    assert b300["memory_gb_marketed"] == 288
    assert b300["memory_gib"] == pytest.approx(288e9 / GIB, abs=0.005)
    assert b300["memory_gib"] <= 269  # the full-GPU MIG profile of HGX B300 is 7g.269gb (NVIDIA GPU Operator)
    assert cites(b300, "memory_gib", "7g.269gb") and cites(b300, "memory_gb_marketed", "docs.nvidia.com/nim")


def test_b300_sxm_dense_peaks_are_the_hgx_b300_table_halved_per_gpu():
    """NVIDIA's HGX table: HGX B300 FP16/BF16 36 PFLOPS and FP8 72 PFLOPS for 8 GPUs, with sparsity."""
    b300 = GPUS["B300-SXM-270GB"]
    assert b300["bf16_tflops"] == pytest.approx(36_000 / 8 / 2) == 2250
    assert b300["fp8_tflops"] == pytest.approx(72_000 / 8 / 2) == 4500
    assert cites(b300, "bf16_tflops", HGX_B300_TABLE) and cites(b300, "fp8_tflops", HGX_B300_TABLE)


def test_b300_sxm_measured_matmul_rates():
    """MAMF table (stas00/ml-engineering): B300 SXM BF16 1769.0 of 2250, FP8 3353.3 of 4500."""
    b300 = GPUS["B300-SXM-270GB"]
    assert (b300["mamf_bf16_tflops"], b300["mamf_fp8_tflops"]) == (1769.0, 3353.3)
    assert cites(b300, "mamf_bf16_tflops", MAMF) and cites(b300, "mamf_fp8_tflops", MAMF)


def test_b300_sxm_power_links_and_memory_bandwidth():
    """NVIDIA's MLPerf B300 system: 'B300 TGP 1100W', PCIe Gen5 x16 to the host; HGX B300 RA: 14.4 TB/s of NVLink
    over 8 GPUs; AceCloud's HGX B300 table: up to 8 TB/s of HBM per GPU."""
    b300 = GPUS["B300-SXM-270GB"]
    assert b300["tdp_w"] == 1100 and cites(b300, "tdp_w", NVIDIA_B300)
    assert b300["pcie_gen"] == 5 and cites(b300, "pcie_gen", NVIDIA_B300)
    assert b300["nvlink_gbs"] == pytest.approx(14_400 / 8) and cites(b300, "nvlink_gbs", B300_RA)
    assert b300["hbm_tbs"] == pytest.approx(8.0) and cites(b300, "hbm_tbs", "acecloud.ai")
    assert b300["architecture"] == "blackwell" and b300["form_factor"] == "SXM6"
    assert "sm_count" not in b300  # no published SM count was retrieved: left out, not guessed


# --- the servers --------------------------------------------------------------------------------------------


def test_hgx_h200_host_figures_are_dell_s_xe9680_with_h200():
    """Dell, MLPerf Inference v5.1 'PowerEdge XE9680 (8xH200-SXM-141GB)': 16x 96GB, 2 x Xeon Platinum 8568Y+ (48
    cores), 10x 400Gb InfiniBand, 2 TB SSD. NVIDIA DGX H200: 10.2 kW maximum, 8U (as the 8U SYS-821GE-TNHR)."""
    server = SERVERS["HGX-H200-8GPU"]
    assert (server["gpu_model"], server["gpu_count"]) == ("H200-SXM-141GB", 8)
    assert server["host_memory_gib"] == 16 * 96 and cites(server, "host_memory_gib", DELL_XE9680_H200)
    assert (server["cpu"]["sockets"], server["cpu"]["cores_per_socket"]) == (2, 48)
    assert "8568Y+" in server["cpu"]["model"] and cites(server, "cpu", DELL_XE9680_H200)
    assert sum(nic["count"] for nic in server["nics"]) == 10 and {nic["gbps"] for nic in server["nics"]} == {400}
    assert [nic["count"] for nic in server["nics"] if nic["purpose"] == "compute"] == [8]
    assert server["local_nvme_tb"] == 2.0 and cites(server, "local_nvme_tb", DELL_XE9680_H200)
    assert server["max_power_w"] == 10_200 and cites(server, "max_power_w", DGX_H_GUIDE)
    assert server["rack_units"] == 8 and cites(server, "rack_units", "mynw.cn")


def test_hgx_b200_host_figures_are_supermicro_s_sys_a21ge_nbrt():
    """Supermicro, MLPerf Inference v5.1 'SYS-A21GE-NBRT (8x B200-SXM-180GB)', air-cooled: 32x 128GB, 2 x Xeon
    Platinum 8570 (56 cores), 1x 10GbE and 8x ConnectX-7 400GbE/NDR, 1x 4TB + 1x 30.72TB NVMe. NVIDIA DGX B200:
    14.3 kW maximum, 10U."""
    server = SERVERS["HGX-B200-8GPU"]
    assert (server["gpu_model"], server["gpu_count"]) == ("B200-SXM-180GB", 8)
    assert server["host_memory_gib"] == 32 * 128 and cites(server, "host_memory_gib", SMC_A21GE_B200)
    assert (server["cpu"]["sockets"], server["cpu"]["cores_per_socket"]) == (2, 56) and "8570" in server["cpu"]["model"]
    nics = {nic["purpose"]: (nic["count"], nic["gbps"]) for nic in server["nics"]}
    assert nics == {"compute": (8, 400), "management": (1, 10)} and cites(server, "nics", SMC_A21GE_B200)
    assert server["local_nvme_tb"] == 30.72
    assert server["max_power_w"] == 14_300 and cites(server, "max_power_w", DGX_B200_GUIDE)
    assert server["rack_units"] == 10 and cites(server, "rack_units", DGX_B200_GUIDE)


def test_hgx_b300_figures_and_the_power_no_source_states():
    """NVIDIA, MLPerf Inference v6.1 B300 system: 8 x B300-SXM-270GB, 32x 64GB, 2 x Xeon Platinum 8570 (56 cores), 2 TB
    SSD. HGX B300 (NVIDIA RA 2-8-9-800; ServeTheHome): eight ConnectX-8 at 800 Gb/s, one per GPU; the ASUS XA NB3I-E12
    is 9U. No maximum input power was found: left out, and the note says the quote must give it."""
    server = SERVERS["HGX-B300-8GPU"]
    assert (server["gpu_model"], server["gpu_count"]) == ("B300-SXM-270GB", 8)
    assert server["host_memory_gib"] == 32 * 64 and cites(server, "host_memory_gib", NVIDIA_B300)
    assert (server["cpu"]["sockets"], server["cpu"]["cores_per_socket"]) == (2, 56)
    assert [(nic["count"], nic["gbps"], nic["purpose"]) for nic in server["nics"]] == [(8, 800, "compute")]
    assert cites(server, "nics", STH_ASUS_B300) and cites(server, "nics", B300_RA)
    assert server["local_nvme_tb"] == 2.0 and cites(server, "local_nvme_tb", NVIDIA_B300)
    assert server["rack_units"] == 9 and cites(server, "rack_units", STH_ASUS_B300)
    assert "max_power_w" not in server and "max_power_w" not in server["refs"]
    assert "max_power_w is LEFT OUT" in server["note"]


def test_mi300x_platform_host_figures_are_dell_s_xe9680_with_mi300x():
    """Dell, MLPerf Inference v4.1 'PowerEdge XE9680 (8x MI300X_192GB)': 32x 64GB DDR5, 2 x Xeon Platinum 8460Y+ (40
    cores), 10x 400Gb InfiniBand, 7.68 TB NVMe; StorageReview: the XE9680 is 6U with six PSUs of 19,200 W in all, 3+3
    fault-tolerant."""
    server = SERVERS["MI300X-OAM-8GPU"]
    assert (server["gpu_model"], server["gpu_count"]) == ("MI300X-192GB", 8)
    assert server["host_memory_gib"] == 32 * 64 and cites(server, "host_memory_gib", DELL_XE9680_MI300X)
    assert (server["cpu"]["sockets"], server["cpu"]["cores_per_socket"]) == (2, 40)
    assert sum(nic["count"] for nic in server["nics"]) == 10 and {nic["gbps"] for nic in server["nics"]} == {400}
    assert server["local_nvme_tb"] == 7.68 and cites(server, "local_nvme_tb", DELL_XE9680_MI300X)
    assert server["max_power_w"] == 19_200 / 2 and cites(server, "max_power_w", XE9680_REVIEW)
    assert server["rack_units"] == 6 and cites(server, "rack_units", XE9680_REVIEW)
    # AMD data sheet: 7 Infinity Fabric links at 128 GB/s each per MI300X, the GPU's nvlink_gbs
    assert GPUS["MI300X-192GB"]["nvlink_gbs"] == 7 * 128 and GPUS["MI300X-192GB"]["architecture"] == "cdna3"


@pytest.mark.parametrize("server_id", ["HGX-H200-8GPU", "HGX-B200-8GPU", "HGX-B300-8GPU", "MI300X-OAM-8GPU"])
def test_a_generic_server_says_it_is_no_product(server_id: str):
    assert SERVERS[server_id]["note"].startswith("TYPICAL VALUES, NOT A PRODUCT")
    assert SERVERS[server_id]["vendor"].startswith("Generic OEM")


# --- the schema of a server ---------------------------------------------------------------------------------


def test_a_server_s_max_power_needs_its_ref_and_a_server_may_lack_both():
    validator = Draft202012Validator(SCHEMA)
    bad = copy.deepcopy(CATALOGUE)
    del bad["servers"]["HGX-H200-8GPU"]["refs"]["max_power_w"]
    with pytest.raises(ValidationError):
        validator.validate(bad)
    bare = copy.deepcopy(CATALOGUE)
    del bare["servers"]["HGX-H200-8GPU"]["refs"]["max_power_w"], bare["servers"]["HGX-H200-8GPU"]["max_power_w"]
    validator.validate(bare)


def test_aliases_are_a_list_of_distinct_names():
    validator = Draft202012Validator(SCHEMA)
    bad = copy.deepcopy(CATALOGUE)
    bad["servers"]["HGX-H200-8GPU"]["aliases"] = ["HGX-H200", "HGX-H200"]
    with pytest.raises(ValidationError):
        validator.validate(bad)

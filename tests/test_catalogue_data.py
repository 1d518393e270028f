"""Checks on the hardware catalogue data (rules/data/catalogue.json).

The catalogue must validate against schemas/catalogue.schema.json (JSON Schema draft 2020-12), every
numeric value must cite a source, servers must point at catalogued GPUs, and a few published figures
are pinned: DGX power from the NVIDIA DGX user guides as quoted in the reference README
(/work/shared/reference/README.md, "Power"), H100 SXM bandwidth and H200 capacity from NVIDIA's
product pages.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE_PATH = ROOT / "rules" / "data" / "catalogue.json"
SCHEMA_PATH = ROOT / "schemas" / "catalogue.schema.json"

EXPECTED_GPUS = {
    "A100-SXM4-40GB",
    "A100-SXM4-80GB",
    "H100-SXM5-80GB",
    "H100-PCIe-80GB",
    "H100-NVL-94GB",
    "H200-SXM-141GB",
    "B200-SXM-180GB",
    "L40S-48GB",
    "L4-24GB",
    "MI300X-192GB",
    "B200-GB200-186GB",
    "B300-GB300-288GB",
    "B300-SXM-270GB",
}
EXPECTED_SERVERS = {"DGX-A100", "DGX-H100", "DGX-H200", "DGX-B200", "HGX-H100-8GPU", "GB200-NVL72", "GB300-NVL72",
                    "HGX-H200-8GPU", "HGX-B200-8GPU", "HGX-B300-8GPU", "MI300X-OAM-8GPU"}

GIB = 2**30


@pytest.fixture(scope="module")
def catalogue() -> dict:
    return json.loads(CATALOGUE_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _numeric_fields(entry: dict) -> dict[str, str]:
    """Numeric (or nullable-numeric) field path -> the refs key that must cite it, for a gpu or server entry.

    Top-level fields are cited under their own name; the numeric fields of the `cpu` object under `cpu`, and
    those of every `nics` item under `nics` (the key the rules engine looks up when it fills a quote).
    """
    out: dict[str, str] = {}
    for key, value in entry.items():
        if key in ("refs", "note", "aliases"):  # text: the aliases are other spellings of the id
            continue
        if isinstance(value, dict):
            for sub, subval in value.items():
                if _is_numeric_or_null(subval):
                    out[f"{key}.{sub}"] = key
        elif isinstance(value, list):
            for index, item in enumerate(value):
                for sub, subval in item.items():
                    if _is_numeric_or_null(subval):
                        out[f"{key}[{index}].{sub}"] = key
        elif _is_numeric_or_null(value):
            out[key] = key
    return out


OPTIONAL_REF_KEYS = {"gpu_model"}


def _is_numeric_or_null(value: object) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


# --- schema -------------------------------------------------------------------------------------


def test_catalogue_validates_against_schema(catalogue, validator):
    errors = sorted(validator.iter_errors(catalogue), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


def test_schema_rejects_unknown_fields(catalogue, validator):
    for path in (("gpus", "H100-SXM5-80GB"), ("servers", "DGX-H100"), ("servers", "DGX-H100", "cpu")):
        bad = copy.deepcopy(catalogue)
        node = bad
        for part in path:
            node = node[part]
        node["unexpected"] = 1
        with pytest.raises(ValidationError):
            validator.validate(bad)
    bad = copy.deepcopy(catalogue)
    bad["servers"]["DGX-H100"]["nics"][0]["unexpected"] = 1
    with pytest.raises(ValidationError):
        validator.validate(bad)


def test_schema_rejects_missing_ref_and_urlless_ref(catalogue, validator):
    bad = copy.deepcopy(catalogue)
    del bad["gpus"]["H200-SXM-141GB"]["refs"]["hbm_tbs"]
    with pytest.raises(ValidationError):
        validator.validate(bad)
    bad = copy.deepcopy(catalogue)
    bad["servers"]["DGX-B200"]["refs"]["max_power_w"] = "NVIDIA DGX B200 User Guide, power table"
    with pytest.raises(ValidationError):
        validator.validate(bad)


def test_expected_ids_present(catalogue):
    assert set(catalogue["gpus"]) == EXPECTED_GPUS
    assert set(catalogue["servers"]) == EXPECTED_SERVERS


# --- provenance ---------------------------------------------------------------------------------


@pytest.mark.parametrize("section", ["gpus", "servers"])
def test_every_numeric_field_has_a_ref(catalogue, section):
    missing, stale, urlless = [], [], []
    for model_id, entry in catalogue[section].items():
        needed = _numeric_fields(entry)
        refs = entry["refs"]
        missing += [f"{model_id}.{path}" for path, key in needed.items() if not refs.get(key, "").strip()]
        allowed = set(needed.values()) | OPTIONAL_REF_KEYS
        stale += [f"{model_id}.refs.{k}" for k in refs if k not in allowed]
        urlless += [f"{model_id}.refs.{k}" for k, v in refs.items() if "http://" not in v and "https://" not in v]
    assert not missing, f"numeric fields without a ref: {missing}"
    assert not stale, f"refs naming no numeric field: {stale}"
    assert not urlless, f"refs without a URL: {urlless}"


def test_every_server_gpu_model_is_catalogued(catalogue):
    gpus = catalogue["gpus"]
    for model_id, server in catalogue["servers"].items():
        assert server["gpu_model"] in gpus, f"{model_id}: unknown gpu_model {server['gpu_model']!r}"


def test_derived_values_are_explained_in_note(catalogue):
    """Sparsity-halved or unit-converted figures must say so (datasheet footnotes)."""
    for model_id, gpu in catalogue["gpus"].items():
        note = gpu.get("note", "").lower()
        assert "sparsity" in note, f"{model_id}: note must state how sparse/dense TFLOPS were handled"
        assert "memory_gib" in note or "gib" in note, f"{model_id}: note must state the GiB conversion"


# --- plausibility (catches unit slips such as GB vs GiB, TB/s vs GB/s, sparse vs dense) -----------


def test_memory_gib_close_to_marketed_capacity(catalogue):
    for model_id, gpu in catalogue["gpus"].items():
        ratio = gpu["memory_gib"] * GIB / (gpu["memory_gb_marketed"] * 1e9)
        assert 0.95 <= ratio <= 1.10, f"{model_id}: memory_gib {gpu['memory_gib']} vs {gpu['memory_gb_marketed']} GB"


def test_fp8_is_twice_bf16_where_present(catalogue):
    for model_id, gpu in catalogue["gpus"].items():
        if gpu["fp8_tflops"] is None:
            continue
        assert math.isclose(gpu["fp8_tflops"], 2 * gpu["bf16_tflops"], rel_tol=0.02), model_id


def test_servers_power_exceeds_gpu_power(catalogue):
    for model_id, server in catalogue["servers"].items():
        gpu = catalogue["gpus"][server["gpu_model"]]
        if "max_power_w" not in server:  # not published: the note says so (tests/test_catalogue_servers.py)
            continue
        assert server["gpu_count"] * gpu["tdp_w"] < server["max_power_w"], model_id


# --- pinned published values -----------------------------------------------------------------


def test_dgx_power_matches_reference_readme(catalogue):
    """README "Power": DGX B200 14.3 kW; DGX H100/H200 10.2 kW; DGX A100 6.5 kW (NVIDIA DGX user guides)."""
    servers = catalogue["servers"]
    assert servers["DGX-H100"]["max_power_w"] == 10200
    assert servers["DGX-H200"]["max_power_w"] == 10200
    assert servers["DGX-B200"]["max_power_w"] == 14300
    assert servers["DGX-A100"]["max_power_w"] == 6500


def test_h100_h200_sxm_700w(catalogue):
    """README "Power": H100/H200 SXM 700 W per GPU."""
    assert catalogue["gpus"]["H100-SXM5-80GB"]["tdp_w"] == 700
    assert catalogue["gpus"]["H200-SXM-141GB"]["tdp_w"] == 700


def test_h100_sxm_published_figures(catalogue):
    """NVIDIA H100 product page: 3.35 TB/s; whitepaper Table 1: 989.4 dense BF16 TFLOPS (1,979 with sparsity)."""
    h100 = catalogue["gpus"]["H100-SXM5-80GB"]
    assert h100["hbm_tbs"] == pytest.approx(3.35)
    assert h100["bf16_tflops"] == pytest.approx(989.4, abs=1)
    assert h100["memory_gb_marketed"] == 80
    assert h100["nvlink_gbs"] == 900


def test_h200_published_figures(catalogue):
    """NVIDIA H200 product page: 141 GB HBM3e, 4.8 TB/s; DGX H200 = 1,128 GB over 8 GPUs."""
    h200 = catalogue["gpus"]["H200-SXM-141GB"]
    assert h200["memory_gb_marketed"] == 141
    assert h200["hbm_tbs"] == pytest.approx(4.8)
    assert 8 * h200["memory_gb_marketed"] == 1128


def test_b200_memory_matches_dgx_b200_total(catalogue):
    """DGX B200 user guide: 8 GPUs provide 1,440 GB total."""
    b200 = catalogue["gpus"]["B200-SXM-180GB"]
    assert catalogue["servers"]["DGX-B200"]["gpu_count"] * b200["memory_gb_marketed"] == 1440


# --- Grace-Blackwell rack-scale systems and the step-time figures ---------------------------------


@pytest.mark.parametrize(("server", "gpu"), [("GB200-NVL72", "B200-GB200-186GB"), ("GB300-NVL72", "B300-GB300-288GB")])
def test_nvl72_is_one_72_gpu_nvlink_domain(catalogue, server, gpu):
    """NVIDIA GB200/GB300 NVL72 pages: 72 Blackwell GPUs and 36 Grace CPUs joined by 130 TB/s of NVLink."""
    entry = catalogue["servers"][server]
    assert entry["gpu_model"] == gpu
    assert entry["gpu_count"] == entry["nvlink_domain_gpus"] == 72
    assert entry["cpu"]["sockets"] == 36
    assert entry["gpu_count"] * catalogue["gpus"][gpu]["nvlink_gbs"] == pytest.approx(130_000, rel=0.01)
    assert sum(nic["count"] for nic in entry["nics"] if nic["purpose"] == "compute") == 72


@pytest.mark.parametrize("gpu", ["B200-GB200-186GB", "B300-GB300-288GB"])
def test_grace_blackwell_gpu_peaks_are_the_rack_figures_halved_per_gpu(catalogue, gpu):
    """NVL72 pages print rack Tensor Core rates with sparsity: BF16 360 PFLOPS, FP8 720 PFLOPS, HBM 576 TB/s."""
    entry = catalogue["gpus"][gpu]
    assert entry["bf16_tflops"] == pytest.approx(360_000 / 72 / 2)
    assert entry["fp8_tflops"] == pytest.approx(720_000 / 72 / 2)
    assert entry["hbm_tbs"] == pytest.approx(576 / 72)


def test_grace_blackwell_memory_and_power(catalogue):
    """NVIDIA: GB200 186 GB and GB300 288 GB per GPU; DPS registry: GB200 GPU up to 1,200 W."""
    assert catalogue["gpus"]["B200-GB200-186GB"]["memory_gb_marketed"] == 186
    assert catalogue["gpus"]["B300-GB300-288GB"]["memory_gb_marketed"] == 288
    assert catalogue["gpus"]["B200-GB200-186GB"]["tdp_w"] == 1200


@pytest.mark.parametrize("gpu", ["H100-SXM5-80GB", "H200-SXM-141GB", "B200-SXM-180GB", "L40S-48GB", "L4-24GB",
                                 "MI300X-192GB", "B200-GB200-186GB", "B300-GB300-288GB", "B300-SXM-270GB"])
def test_fp8_peaks_present_where_the_gpu_has_fp8(catalogue, gpu):
    assert catalogue["gpus"][gpu]["fp8_tflops"] > catalogue["gpus"][gpu]["bf16_tflops"]


def test_measured_matmul_rates_stay_below_peak(catalogue):
    """MAMF table (stas00/ml-engineering): A100 SXM 271.2 TFLOPS = 86.9 % of 312; none reaches its peak."""
    gpus = catalogue["gpus"]
    assert gpus["A100-SXM4-80GB"]["mamf_bf16_tflops"] == pytest.approx(271.2)
    for model_id, gpu in gpus.items():
        if "mamf_bf16_tflops" in gpu:
            assert 0.4 < gpu["mamf_bf16_tflops"] / gpu["bf16_tflops"] < 1, model_id
        if "mamf_fp8_tflops" in gpu:
            assert 0.4 < gpu["mamf_fp8_tflops"] / gpu["fp8_tflops"] < 1, model_id


def test_step_time_section_cites_every_figure(catalogue, validator):
    section = catalogue["step_time"]
    # every figure and table of measurements is cited; the notes and the maps from architecture to table are not figures
    cited = {k for k in section if k not in ("refs", "note") and not k.endswith("_of_architecture")}
    assert cited == set(section["refs"])
    assert all("https://" in ref for ref in section["refs"].values())
    assert section["hbm_fraction"] == pytest.approx(1724.827 / 2039, abs=0.001)  # BabelStream triad, A100 80GB
    bad = copy.deepcopy(catalogue)
    del bad["step_time"]["refs"]["hbm_fraction"]
    with pytest.raises(ValidationError):
        validator.validate(bad)

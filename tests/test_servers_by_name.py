"""Servers by name: a node group's ``server_model`` is read by its catalogue id or an alias (case and separators
ignored), the record's catalogue fills name the server's id, and a server id the catalogue lacks is refused at its
pointer with the closest ids when nothing else in the group describes its GPU (command line; the API's is in
tests/api/test_servers_by_name_api.py; the catalogue's figures are pinned in tests/test_catalogue_servers.py)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rules.catalogue import Catalogue, load_catalogue
from rules.errors import InvalidSubmission
from rules.evaluate import evaluate, validate_submission
from service.cli import main

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
GROUP = "/quote/node_groups/0"
# NVML memory.total of an H200 SXM, 143,771 MiB (Modal's table of nvidia-smi totals, the catalogue's memory_gib ref).
H200_DRIVER_GIB = 143_771 / 1024


def quote(server_model: str, **group: Any) -> dict[str, Any]:
    """Returns a training submission of 8 nodes of ``server_model`` (Llama-3-8B by name on 64 GPUs, ZeRO-1)."""
    return {
        "schema_version": "1",
        "quote": {"vendor": "V", "quote_id": "Q-S35",
                  "node_groups": [{"name": "gpu", "count": 8, "server_model": server_model, **group}],
                  "storage": {"kind": "parallel-fs", "capacity_tb": 2000, "read_gbs": 40, "write_gbs": 20}},
        "workload": {"training": {
            "objective": "pretraining", "model": {"name": "Llama-3-8B"}, "precision": "bf16-mixed",
            "optimizer": "adamw", "parallelism": {"sharding": "zero1", "tensor": 1, "pipeline": 1, "offload": "none"},
            "activation_checkpointing": "none", "flash_attention": True, "sequence_length": 8192, "micro_batch": 1,
            "global_batch": 512, "dataset_tokens": 1_000_000_000_000, "gpus": 64, "completion_window_days": 30,
            "reliability": {"node_mtbf_h": 8000, "restart_min": 15},
            "checkpoint": {"interval_min": 120, "max_save_s": 120}}}}


def check(record: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(result for result in record["checks"] if result["id"] == check_id)


def refusal(submission: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(InvalidSubmission) as refused:
        validate_submission(submission)
    return [(problem.pointer, problem.message) for problem in refused.value.problems]


# --- ids and aliases -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["HGX-H200-8GPU", "HGX-H200", "HGX H200", "hgx_h200_8gpu", "HGX H200 8-GPU",
                                      "NVIDIA HGX H200"])
def test_each_spelling_of_an_hgx_h200_names_the_one_catalogued_server(spelling: str) -> None:
    assert load_catalogue().server_id(spelling) == "HGX-H200-8GPU"


@pytest.mark.parametrize(("spelling", "server_id"), [
    ("HGX-H100", "HGX-H100-8GPU"), ("HGX-B200", "HGX-B200-8GPU"), ("HGX B300", "HGX-B300-8GPU"),
    ("AMD Instinct MI300X Platform", "MI300X-OAM-8GPU"), ("NVIDIA DGX H100", "DGX-H100"), ("dgx-b200", "DGX-B200"),
    ("GB200 NVL72", "GB200-NVL72")])
def test_the_aliases_and_spellings_of_the_other_servers(spelling: str, server_id: str) -> None:
    assert load_catalogue().server_id(spelling) == server_id


def test_an_id_no_server_spells_names_none() -> None:
    catalogue = load_catalogue()
    assert catalogue.server_id("HGX-H20") is None and catalogue.server("HGX-H20") is None
    assert catalogue.server_id("") is None and catalogue.server_id(None) is None


def test_two_servers_sharing_a_spelling_are_refused_when_the_catalogue_loads() -> None:
    document = copy.deepcopy(load_catalogue().document)
    document["servers"]["HGX-B200-8GPU"]["aliases"].append("hgx h200")

    with pytest.raises(ValueError, match="'HGX-B200-8GPU' and 'HGX-H200-8GPU' share the look-up key 'hgxh200'"):
        Catalogue(document).server_id("HGX-B200")


@pytest.mark.parametrize(("name", "closest"), [("HGX-H20", "HGX-H200-8GPU"), ("HGX-H200-4GPU", "HGX-H200-8GPU"),
                                               ("MI300", "MI300X-OAM-8GPU"), ("DGX H1000", "DGX-H100")])
def test_the_closest_catalogued_servers(name: str, closest: str) -> None:
    assert load_catalogue().closest_servers(name)[0] == closest


# --- the refusal -----------------------------------------------------------------------------------------------


def test_an_unknown_server_alone_exits_2_naming_the_field_and_the_closest_ids(tmp_path: Path) -> None:
    path = tmp_path / "quote.json"
    path.write_text(json.dumps(quote("HGX-H20")))

    result = CliRunner().invoke(main, ["evaluate", str(path), "--no-search", "--no-remedies"])

    assert result.exit_code == 2
    assert f"{GROUP}/server_model: server 'HGX-H20' is not in the catalogue" in result.output
    assert "did you mean HGX-H200-8GPU, HGX-H100-8GPU, HGX-B200-8GPU?" in result.output


def test_an_unknown_server_whose_gpu_count_alone_is_given_is_refused() -> None:
    [(pointer, message)] = refusal(quote("Supermicro SYS-821GE-TNHR", gpu={"count": 8}))

    assert pointer == f"{GROUP}/server_model"
    assert f"a catalogued {GROUP}/gpu/model, or {GROUP}/gpu/memory_gib" in message


def test_an_unknown_server_with_an_unknown_gpu_id_is_refused_at_the_gpu_first() -> None:
    [(pointer, message)] = refusal(quote("HGX-H20", gpu={"model": "H200", "count": 8}))

    assert pointer == f"{GROUP}/gpu/model" and "did you mean H200-SXM-141GB?" in message


@pytest.mark.parametrize("gpu", [{"model": "H200-SXM-141GB", "count": 8},
                                 {"model": "H200-NVL", "count": 8, "memory_gib": 131.0, "bf16_tflops": 835.5},
                                 {"count": 8, "memory_gib": 131.0}])
def test_an_unknown_server_whose_group_describes_its_gpu_is_a_label(gpu: dict[str, Any]) -> None:
    assert validate_submission(quote("Supermicro SYS-821GE-TNHR (8x H200)", gpu=gpu)) is None


# --- what a server named by an alias fills ----------------------------------------------------------------------


def test_an_alias_is_recorded_as_the_server_id_among_the_catalogue_fills() -> None:
    record = evaluate(quote("HGX H200"), now=AT)

    fills = {fill["pointer"]: fill for fill in record["catalogue_fills"]}
    assert fills[f"{GROUP}/server_model"]["value"] == "HGX-H200-8GPU"
    assert "which the quote names 'HGX H200'" in fills[f"{GROUP}/server_model"]["ref"]
    assert fills[f"{GROUP}/gpu/model"]["value"] == "H200-SXM-141GB"
    assert fills[f"{GROUP}/gpu/memory_gib"]["value"] == pytest.approx(H200_DRIVER_GIB, abs=0.01)
    # Dell's XE9680 with 8 x H200 (MLPerf Inference v5.1): 16 x 96 GB DIMMs.
    assert fills[f"{GROUP}/host_memory_gib"]["value"] == 16 * 96
    assert "XE9680_H200_SXM_141GBx8_TRT.json" in fills[f"{GROUP}/host_memory_gib"]["ref"]


def test_the_server_id_itself_is_no_fill() -> None:
    record = evaluate(quote("HGX-H200-8GPU"), now=AT)

    assert f"{GROUP}/server_model" not in {fill["pointer"] for fill in record["catalogue_fills"]}
    assert f"{GROUP}/gpu/model" in {fill["pointer"] for fill in record["catalogue_fills"]}


def test_eight_hgx_h200_nodes_are_judged_on_the_h200_s_figures() -> None:
    # Given a training quote that names its servers "HGX-H200" and nothing else of the hardware
    submission = quote("HGX-H200")

    # When it is evaluated
    record = evaluate(submission, now=AT)

    # Then peak memory is decided against the H200's driver total, and the schedule on its dense BF16 peak
    # (H100 whitepaper Table 1, 989.4 TFLOPS, the same GH100 SXM silicon and clocks)
    memory, schedule = check(record, "peak-memory"), check(record, "time-to-result")
    assert memory["status"] == "pass" and schedule["status"] in ("pass", "warn", "fail")
    assert memory["evidence"]["capacity_gib"] == pytest.approx(H200_DRIVER_GIB, abs=0.01)
    assert schedule["evidence"]["modelled_mfu_peak_tflops"] == pytest.approx(989.4)
    assert schedule["evidence"]["gpus"] == 64 and schedule["evidence"]["days"] > 0


def test_eight_mi300x_platform_nodes_are_modelled_with_the_cdna3_fallbacks() -> None:
    # Given a training quote on the AMD Instinct MI300X Platform, whose architecture (cdna3) has no calibration runs
    # and no attention measurements of its own in the step-time figures
    catalogue = load_catalogue()
    bands = catalogue.document["step_time"]["residual_band"]
    assert "cdna3" not in bands and "cdna3" not in catalogue.document["step_time"]["gemm_fraction_in_step"]

    # When it is evaluated
    record = evaluate(quote("AMD Instinct MI300X Platform"), now=AT)

    # Then the schedule is decided on the MI300X's dense BF16 peak (AMD data sheet, 1307.4 TFLOPS) and its
    # modelled rate carries the widest residual band of the calibrated architectures, as the step_time note says
    schedule, memory = check(record, "time-to-result"), check(record, "peak-memory")
    assert memory["status"] == "pass" and schedule["status"] in ("pass", "warn", "fail")
    assert memory["evidence"]["capacity_gib"] == pytest.approx(206_141_652_992 / 2**30, abs=0.01)  # rocm-smi bytes
    evidence = schedule["evidence"]
    assert evidence["modelled_mfu_peak_tflops"] == pytest.approx(1307.4)
    low, high = min(band[0] for band in bands.values()), max(band[1] for band in bands.values())
    rate = evidence["modelled_tokens_per_s_per_gpu"]
    assert evidence["modelled_tokens_per_s_per_gpu_range"] == pytest.approx([rate * (1 + low), rate * (1 + high)])

"""Hardware the catalogue lacks, described by the quote's own figures: rack-power warns ``not-in-catalogue`` naming
each vendor-supplied figure by its pointer, without hiding a failure; catalogued hardware gives no such warning, and
an unknown id with no figures is still refused (tests/test_gpu_ids.py, tests/test_servers_by_name.py: exit 2)."""

from __future__ import annotations

from typing import Any

from fixture_support import load_base

from rules.advice.compare import merge_patch
from rules.advice.remedy_changes import problems_of
from rules.catalogue import load_catalogue
from rules.evaluate import evaluate
from rules.job.inputs import Inputs
from rules.job.parse import parse_job
from rules.job.vendor_figures import vendor_supplied_figures

GROUP = "/quote/node_groups/0"
UNKNOWN_GPU = {"model": "Acme-A1-96GB", "count": 8, "memory_gib": 96, "bf16_tflops": 900}


def _rack_power(submission: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in evaluate(submission)["checks"] if c["id"] == "rack-power")


def _with_group(base: str, **group: Any) -> dict[str, Any]:
    document = load_base(base)
    first = {key: value for key, value in document["quote"]["node_groups"][0].items() if key in ("name", "count")}
    return merge_patch(document, {"quote": {"node_groups": [{**first, **group}]}})


def test_a_catalogued_gpu_and_server_supply_no_figures():
    # Given a training quote of catalogued DGX H100s and a serving quote of catalogued L40S GPUs
    for base in ("8x-dgx-h100-in-35kw-racks", "2x-l40s-llama3-8b-serving"):
        # When rack-power is decided
        result = _rack_power(load_base(base))
        # Then nothing is vendor-supplied, and the warning is not given
        assert result["rule"] != "not-in-catalogue"
        assert "vendor_supplied_figures" not in result["evidence"]


def test_an_unknown_gpu_described_by_memory_and_tflops_warns_naming_those_pointers():
    # Given a training group whose GPU the catalogue lacks, described by its memory_gib and bf16_tflops
    submission = _with_group("4x-dgx-h100-llama3-8b-fsdp-fine-tune", gpu=UNKNOWN_GPU, max_power_w=9000)

    result = _rack_power(submission)

    assert (result["status"], result["rule"]) == ("warn", "not-in-catalogue")
    assert result["evidence"]["vendor_supplied_figures"] == [
        {"node_group": "gpu", "hardware": "gpu", "id": "Acme-A1-96GB", "pointer": f"{GROUP}/gpu/memory_gib",
         "value": 96},
        {"node_group": "gpu", "hardware": "gpu", "id": "Acme-A1-96GB", "pointer": f"{GROUP}/gpu/bf16_tflops",
         "value": 900}]
    assert result["message"].startswith(
        f"node group gpu: GPU 'Acme-A1-96GB' is not in the catalogue, and the quote supplies its figures: "
        f"{GROUP}/gpu/memory_gib = 96, {GROUP}/gpu/bf16_tflops = 900. These vendor-supplied figures are used as "
        "given, unchecked against any datasheet")
    assert {f"{GROUP}/gpu/memory_gib", f"{GROUP}/gpu/bf16_tflops"} <= set(result["evidence"]["inputs"])


def test_the_warning_does_not_hide_a_failure():
    # Given racks of four DGX H100 nodes each, over their 35 kW budget, the group's GPU one the catalogue lacks
    submission = load_base("8x-dgx-h100-in-35kw-racks")
    submission["quote"]["node_groups"][0]["gpu"] = UNKNOWN_GPU

    result = _rack_power(submission)

    # Then the check fails on the budget, and still lists the vendor's figures
    assert (result["status"], result["rule"]) == ("fail", "over-limit")
    assert [row["pointer"] for row in result["evidence"]["vendor_supplied_figures"]] == [
        f"{GROUP}/gpu/memory_gib", f"{GROUP}/gpu/bf16_tflops"]


def test_an_unknown_server_lists_its_own_figures_even_when_power_is_missing():
    # Given a server the catalogue lacks, with a catalogued GPU, its host memory and NICs, and no max_power_w
    submission = load_base("4x-l40s-vit-l16-training")

    result = _rack_power(submission)

    # Then rack-power lacks the node's power, and its evidence names the server's figures (the GPU's are catalogued)
    assert result["status"] == "insufficient-data"
    rows = result["evidence"]["vendor_supplied_figures"]
    assert {row["hardware"] for row in rows} == {"server"}
    assert {row["id"] for row in rows} == {"Supermicro SYS-521GE-TNRT (8x L40S)"}
    assert {"pointer": f"{GROUP}/host_memory_gib", "value": 1024} in [
        {"pointer": row["pointer"], "value": row["value"]} for row in rows]
    assert f"{GROUP}/nics/0/gbps" in [row["pointer"] for row in rows]


def test_a_server_named_by_an_alias_is_catalogued():
    # Given "HGX-H200", an alias of the catalogued HGX-H200-8GPU, which fills the group's GPU and figures
    submission = _with_group("4x-dgx-h200-llama3-8b-pretraining", server_model="HGX-H200", host_memory_gib=2048)
    catalogue = load_catalogue()

    job = parse_job(Inputs(submission, catalogue))

    assert vendor_supplied_figures(job.cluster, catalogue) == ()


def test_remedies_leave_the_warning_alone():
    submission = _with_group("2x-l40s-llama3-8b-serving", gpu=UNKNOWN_GPU, max_power_w=9000)

    record = evaluate(submission)

    assert next(c for c in record["checks"] if c["id"] == "rack-power")["rule"] == "not-in-catalogue"
    assert "rack-power" not in problems_of(record)

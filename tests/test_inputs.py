"""Provenance of inputs: bare numbers are assumptions, sourced ones keep their source, the catalogue fills
what a quote leaves out with source vendor_limit and the datasheet reference."""

from __future__ import annotations

import json
from pathlib import Path

from rules.catalogue import load_catalogue
from rules.evaluate import evaluate
from rules.job.inputs import Inputs

EXAMPLE = Path(__file__).parent.parent / "examples" / "dgx-h100-70b-finetune.json"


def _submission() -> dict:
    return json.loads(EXAMPLE.read_text())


def test_bare_numbers_are_assumptions_and_sourced_numbers_keep_their_source() -> None:
    inputs = Inputs(_submission())

    bare = inputs.quantity("/workload/training/sequence_length")
    sourced = inputs.quantity("/quote/racks/0/power_budget_kw")

    assert (bare.value, bare.source, bare.ref) == (8192, "assumption", None)
    assert (sourced.value, sourced.source) == (50, "facility_design")
    assert sourced.ref == "DC hall B electrical design, rev 3"
    assert inputs.get("/quote/racks/0/power_budget_kw") == 50


def test_the_catalogue_fills_what_the_quote_leaves_out_as_vendor_limit_with_its_citation() -> None:
    submission = _submission()
    gpu = load_catalogue().gpu("H100-SXM5-80GB")

    record = evaluate(submission)

    fills = {f["pointer"]: f for f in record["catalogue_fills"]}
    memory = fills["/quote/node_groups/0/gpu/memory_gib"]
    assert memory["value"] == gpu["memory_gib"] and memory["source"] == "vendor_limit"
    assert memory["ref"] == gpu["refs"]["memory_gib"]
    inputs = {i["pointer"]: i for i in record["inputs"]}
    assert inputs["/quote/node_groups/0/gpu/hbm_tbs"]["source"] == "vendor_limit"


def test_a_value_the_quote_states_is_never_overwritten_by_the_catalogue() -> None:
    submission = _submission()
    submission["quote"]["node_groups"][0]["gpu"]["memory_gib"] = {"value": 79.0, "source": "measurement",
                                                                  "ref": "nvidia-smi on the demo unit"}

    inputs = Inputs(submission)

    assert inputs.quantity("/quote/node_groups/0/gpu/memory_gib").source == "measurement"
    assert "/quote/node_groups/0/gpu/memory_gib" not in {f.pointer for f in inputs.fills}


def test_each_check_lists_the_assumptions_it_rested_on() -> None:
    record = evaluate(_submission())

    peak = next(c for c in record["checks"] if c["id"] == "peak-memory")
    pointers = {a["pointer"] for a in peak["assumptions"]}
    assert "/workload/training/micro_batch" in pointers
    assert all(a["source"] == "assumption" for a in peak["assumptions"])
    assert "/quote/node_groups/0/gpu/memory_gib" in peak["evidence"]["inputs"]
    assert "/quote/node_groups/0/gpu/memory_gib" not in pointers  # a vendor limit, not an assumption


def test_server_model_fills_gpus_power_and_nics() -> None:
    submission = {"schema_version": "1",
                  "quote": {"vendor": "v", "node_groups": [{"name": "g", "count": 2, "server_model": "DGX-B200"}]},
                  "workload": {"training": {"model": {"parameters": 1e9}}}}

    inputs = Inputs(submission)

    group = inputs.get("/quote/node_groups/0")
    assert group["gpu"]["model"] == "B200-SXM-180GB" and group["gpu"]["count"] == 8
    assert group["max_power_w"] == 14300
    assert inputs.quantity("/quote/node_groups/0/max_power_w").source == "vendor_limit"
    assert any(n["purpose"] == "compute" for n in group["nics"])

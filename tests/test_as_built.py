"""As built: a record's checks beside the same submission re-decided on measurements (rules/advice/as_built.py)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from rules.advice.as_built import (
    ESTIMATORS,
    FIGURES,
    calibration,
    compare,
    deciding_figures,
    estimates,
    merged_submission,
)
from rules.evaluate import evaluate

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dgx-h100-70b-finetune.json"
# 16 DGX H100 nodes, 128 GPUs: storage quoted at 40 GB/s write and 80 GB/s read, four racks of four nodes.
NODES = 16


@cache
def _submission() -> str:
    return EXAMPLE.read_text(encoding="utf-8")


def submission() -> dict[str, Any]:
    return json.loads(_submission())


@cache
def _record() -> str:
    return json.dumps(evaluate(submission()))


def record() -> dict[str, Any]:
    return json.loads(_record())


def as_built(measurements: dict[str, Any]) -> dict[str, Any]:
    return compare(record(), evaluate(merged_submission(submission(), measurements)))


def pair(comparison: dict[str, Any], estimator: str) -> dict[str, Any]:
    (found,) = [p for p in comparison["estimates"] if p["estimator"] == estimator]
    return found


def check(comparison: dict[str, Any], check_id: str) -> dict[str, Any]:
    (found,) = [c for c in comparison["checks"] if c["id"] == check_id]
    return found


def test_measured_storage_write_stands_beside_the_quoted_rate_times_the_write_efficiency():
    # Given the quote's 40 GB/s write, of which the policy expects checkpoint.write_efficiency 0.8 (32 GB/s)
    comparison = as_built({"storage": {"write_gbs": 25}})

    found = pair(comparison, "checkpoint-bandwidth write_gbs")
    assert found["estimated"] == pytest.approx(40 * 0.8) and found["measured"] == 25
    assert found["ratio"] == pytest.approx(25 / 32) and found["optimistic"] is True
    assert found["measured_from"] == ["/measurements/storage/write_gbs"] and found["estimate_from"] == "record"
    row = check(comparison, "checkpoint-bandwidth")
    assert row["measured"] and row["as_built"]["basis"] == "measured" and row["original"]["basis"] == "estimated"
    assert row["as_built"]["evidence"]["storage_write_from"] == "measured"


def test_the_raw_tool_output_that_replaces_a_retyped_figure_is_named_as_its_source():
    # Given fio's JSON of a 12 GB/s write test and node power readings, pasted as the tools print them
    fixtures = Path(__file__).resolve().parent / "checks"
    fio = json.loads((fixtures / "checkpoint_bandwidth" / "pass_dgx_h100_llama3_70b_fio_write_12_gbs_four_hourly.json")
                     .read_text())["patch"]["measurements"]["fio"]
    power_csv = "timestamp,host,power_w\n0,dgx-01,9000\n60,dgx-01,9100\n120,dgx-02,8900\n"

    comparison = as_built({"fio": fio, "power_csv": power_csv})

    write = pair(comparison, "checkpoint-bandwidth write_gbs")
    assert (write["measured"], write["measured_from"]) == (12.0, ["/measurements/fio"])
    power = pair(comparison, "rack-power site_kw")
    assert power["measured_from"] == ["/measurements/power_csv"]
    assert power["measured"] == pytest.approx(NODES * 9.1)  # dgx-01's p95, the highest node's


def test_sustained_power_stands_beside_the_nameplate_draw_and_is_not_optimistic_below_it():
    # DGX H100 nameplate maximum 10.2 kW per node (NVIDIA DGX H100 datasheet); 9 kW measured sustained
    comparison = as_built({"power": {"sustained_w_per_node": 9000}})

    found = pair(comparison, "rack-power site_kw")
    assert found["estimated"] == pytest.approx(NODES * 10.2) and found["measured"] == pytest.approx(NODES * 9.0)
    assert found["ratio"] == pytest.approx(9.0 / 10.2) and found["optimistic"] is False


def test_measured_peak_memory_is_compared_with_the_estimate_at_the_same_micro_batch():
    estimated = next(c for c in record()["checks"] if c["id"] == "peak-memory")["evidence"]["total_gib"]

    comparison = as_built({"peak_memory": [{"micro_batch": 1, "allocated_gib": 36.0, "reserved_gib": 40.0}]})

    found = pair(comparison, "peak-memory total_gib")
    assert found["estimate_from"] == "as-built" and found["estimated"] == pytest.approx(estimated)
    assert found["measured"] == 40.0 and found["ratio"] == pytest.approx(40.0 / estimated)
    assert found["optimistic"] is True  # more memory measured than estimated
    row = check(comparison, "peak-memory")
    assert row["original"]["figures"]["total_gib"] == pytest.approx(estimated)
    assert row["as_built"]["figures"] == {"total_gib": 40.0, "usable_gib": row["original"]["figures"]["usable_gib"]}


def test_scaling_measured_below_target_changes_the_check_and_calibrates_efficiency_and_throughput():
    # Given 800 tokens/s per GPU on one node and 700 at the job's 128 GPUs: efficiency 700 / 800 = 0.875
    comparison = as_built({"scaling": [{"gpus": 8, "tokens_per_s": 8 * 800}, {"gpus": 128, "tokens_per_s": 128 * 700}]})

    assert {"check_id": "interconnect-scaling", "from": "pass", "to": "warn"} in comparison["changes"]
    efficiency = pair(comparison, "interconnect-scaling efficiency")
    assert efficiency["estimated"] == 1.0 and efficiency["measured"] == pytest.approx(0.875)
    throughput = pair(comparison, "time-to-result tokens_per_s_per_gpu")
    assert throughput["measured"] == pytest.approx(800.0)  # at the smallest measured scale
    assert throughput["estimated"] == pytest.approx(
        next(c for c in record()["checks"] if c["id"] == "time-to-result")["evidence"]["tokens_per_s_per_gpu"])
    assert comparison["verdict"] == "warn"


def test_a_submission_compared_with_its_own_evaluation_has_no_estimates_and_no_changes():
    comparison = compare(record(), record())

    assert comparison["estimates"] == [] and comparison["changes"] == [] and comparison["measured_checks"] == []


def test_measurements_merge_member_by_member_and_arrays_replace_whole():
    document = {"schema_version": "1", "measurements": {"storage": {"read_gbs": 50}, "scaling": [{"gpus": 8}]}}

    merged = merged_submission(document, {"storage": {"write_gbs": 20}, "scaling": [{"gpus": 16}]})

    assert merged["measurements"] == {"storage": {"read_gbs": 50, "write_gbs": 20}, "scaling": [{"gpus": 16}]}
    assert document["measurements"]["storage"] == {"read_gbs": 50}  # the approved submission is not changed


def test_calibration_gives_count_median_and_the_ratio_furthest_from_one():
    points = [{"estimator": "peak-memory total_gib", "ratio": r, "optimistic": r > 1} for r in (1.1, 0.5, 1.8)]

    rows = {row["estimator"]: row for row in calibration(points)}

    memory = rows["peak-memory total_gib"]
    assert memory["count"] == 3 and memory["median_ratio"] == 1.1 and memory["optimistic_count"] == 2
    assert memory["worst_ratio"] == 0.5  # half the estimate is further from 1 than 1.8 times it (2 > 1.8)
    assert list(rows) == [figure.estimator for figure in FIGURES]
    assert rows["rack-power site_kw"] == {**rows["rack-power site_kw"], "count": 0, "median_ratio": None,
                                          "worst_ratio": None, "optimistic_count": 0}


def test_every_estimator_is_named_by_a_check_and_an_evidence_figure():
    assert len(ESTIMATORS) == len(FIGURES)
    for name, figure in ESTIMATORS.items():
        assert name == f"{figure.check_id} {figure.name}" and figure.measurement.startswith("/measurements/")


def test_deciding_figures_are_the_headline_fields_the_evidence_holds():
    peak = next(c for c in record()["checks"] if c["id"] == "peak-memory")

    assert set(deciding_figures(peak)) == {"total_gib", "usable_gib"}
    assert deciding_figures({"id": "no-such-check", "evidence": {"x": 1}}) == {}


def test_measurements_are_recognised_by_member_names_not_by_the_wording_of_the_evidence():
    # Given an interconnect-scaling estimate, and as-built evidence whose free text says nothing of a measurement
    record = {"checks": [{"id": "interconnect-scaling", "evidence": {"efficiency": 0.9, "node_busbw_gbs": 360.0,
                                                                     "decided_by": "measured, so it says"}}]}
    as_built = {"checks": [{"id": "interconnect-scaling", "evidence": {
        "efficiency": 0.8, "measured_gpus": 64, "decided_by": "reworded", "node_busbw_gbs": 300.0,
        "measured_node_busbw_gbs": 300.0, "intra_node_link": "reworded too"}}]}

    # When the estimates are paired with the measurements
    pairs = {pair["figure"]: (pair["estimated"], pair["measured"]) for pair in estimates(record, as_built)}

    # Then the members measured_gpus and measured_node_busbw_gbs decide, whatever the text around them says
    assert pairs == {"efficiency": (0.9, 0.8), "node_busbw_gbs": (360.0, 300.0)}
    # and a record that measured them already is no estimate
    measured_record = {"checks": [{"id": "interconnect-scaling", "evidence": {
        "efficiency": 0.9, "measured_gpus": 64, "node_busbw_gbs": 360.0, "measured_node_busbw_gbs": 360.0}}]}
    assert estimates(measured_record, as_built) == []

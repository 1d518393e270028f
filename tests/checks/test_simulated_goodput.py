"""The simulated days to completion in the evidence of time-to-result and restart-behavior.

The simulated job is the schedule's failure-free compute time (no goodput) on the layout's nodes with the
first-order goodput's MTBF, interval, save and restart (rules/checks/facts/goodput.py). Its mean is checked
against Daly 2006's exact expectation M·e^{R/M}·(e^{(τ+δ)/M} − 1) per segment
(rules.estimates.reliability.goodput_sim.daly_expected_wall_time_s), rebuilt here from the record's own figures.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
import rfc8785

from rules.checks import TimeToResult
from rules.checks.base import Context
from rules.estimates.reliability.goodput_sim import GoodputInputs, daly_expected_wall_time_s
from rules.evaluate import evaluate
from rules.job.inputs import Inputs
from rules.policy import default_policy, parse_policy
from tests.checks.fixture_support import load_fixture

ROOT = Path(__file__).resolve().parents[2]
H200_EXAMPLE = ROOT / "examples" / "h200-128node-pretraining.json"
HERE = Path(__file__).parent
LONG_RESTART = HERE / "time_to_result" / "warn_16_dgx_h100_llama3_70b_16h_restart_one_run_in_five_misses_window.json"
NOTHING_FITS = HERE / "time_to_result" / "warn_dgx_h100_405b_ddp_no_gpu_count_fits_beyond_window.json"
DAY_S = 86_400.0


def results(submission: dict[str, Any], policy=None) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in evaluate(submission, policy)["checks"]}


def test_simulated_mean_of_the_h200_example_matches_daly_2006_within_2_percent() -> None:
    # Given the README's 1,024-GPU H200 example (128 nodes, node MTBF 5,000 h, 30-min interval, 20-min restart),
    # when it is evaluated, then 10,000 simulated runs average Daly's expectation for the same job.
    submission = json.loads(H200_EXAMPLE.read_text())
    training = submission["workload"]["training"]
    checks = results(submission)
    ttr, restart = checks["time-to-result"]["evidence"], checks["restart-behavior"]["evidence"]

    # The job rebuilt from the record: compute only (no goodput), and the first-order goodput's terms.
    job = GoodputInputs(compute_s=ttr["compute_days"] * DAY_S, nodes=training["gpus"] // 8,
                        node_mtbf_h=training["reliability"]["node_mtbf_h"], interval_s=ttr["interval_min"] * 60,
                        save_s=ttr["save_s"], restart_s=ttr["restart_min"] * 60)
    assert ttr["expected_days_daly"] == pytest.approx(daly_expected_wall_time_s(job) / DAY_S, rel=1e-9)
    assert ttr["days_mean"] == pytest.approx(ttr["expected_days_daly"], rel=0.02)
    assert ttr["goodput_trials"] == 10_000 and ttr["failures_mean"] > 5
    assert ttr["compute_days"] < ttr["days_p50"] <= ttr["days_p90"] <= ttr["days_p99"]
    assert ttr["window_probability"] == 1.0  # 21.3 days expected of a 30-day window
    # Both checks show the one simulation.
    assert {k: restart[k] for k in ("days_p50", "days_p90", "days_p99", "failures_mean")} == {
        k: ttr[k] for k in ("days_p50", "days_p90", "days_p99", "failures_mean")}
    assert f"{ttr['days_p90']:,.2f} days at p90" in checks["restart-behavior"]["message"]


def test_the_same_submission_gives_the_same_days_p90_and_another_seed_moves_it() -> None:
    submission = load_fixture(LONG_RESTART)
    first, second = results(submission), results(copy.deepcopy(submission))
    document = copy.deepcopy(default_policy().document)
    document["goodput"]["seed"] += 1
    reseeded = results(submission, parse_policy(json.dumps(document).encode(), "reseeded"))

    assert first["time-to-result"]["evidence"]["days_p90"] == second["time-to-result"]["evidence"]["days_p90"]
    assert first["time-to-result"]["evidence"] == second["time-to-result"]["evidence"]
    assert first["restart-behavior"]["evidence"] == second["restart-behavior"]["evidence"]
    assert reseeded["time-to-result"]["evidence"]["goodput_seed"] == document["goodput"]["seed"]
    assert reseeded["time-to-result"]["evidence"]["days_p90"] != first["time-to-result"]["evidence"]["days_p90"]
    # Another seed moves the share of runs inside the window within its Monte Carlo error, √(p(1 − p)/n) ≈ 0.4 %.
    assert reseeded["time-to-result"]["evidence"]["window_probability"] == pytest.approx(
        first["time-to-result"]["evidence"]["window_probability"], abs=0.02)


def test_a_run_with_no_slack_for_one_restart_finishes_in_the_window_only_without_failures() -> None:
    # 16 nodes at 4,000 h: job MTBF 250 h. 2.09 days of compute plus 50 saves of 31 s ≈ 50.5 h, so
    # P(no failure) = e^{−50.5/250} ≈ 0.817; one failure adds a 16-h restart, past the 2.75-day window.
    evidence = results(load_fixture(LONG_RESTART))["time-to-result"]["evidence"]
    no_failure = math.exp(-(evidence["compute_days"] * 24 + 50 * evidence["save_s"] / 3600) / 250)

    assert evidence["window_probability"] == pytest.approx(no_failure, abs=0.015)
    assert evidence["days"] < evidence["window_days"]  # the first-order expectation fits the window


def test_restart_behavior_decides_on_goodput_when_the_run_length_is_unknown() -> None:
    # Given no dataset size, time-to-result lacks its schedule; restart-behavior still has its goodput.
    submission = copy.deepcopy(load_fixture(LONG_RESTART))
    del submission["workload"]["training"]["dataset_tokens"]
    checks = results(submission)

    assert checks["time-to-result"]["status"] == "insufficient-data"
    restart = checks["restart-behavior"]
    assert restart["status"] == "warn" and restart["rule"] == "goodput-marginal"
    assert "missing" not in restart["evidence"] and "days_p90" not in restart["evidence"]
    assert "no simulated days to completion" in restart["message"]


def test_a_job_that_never_finishes_has_no_simulated_days_and_a_json_record() -> None:
    # Node MTBF 1 h on 16 nodes: job MTBF 3.75 min against 2-h segments, e^{32} interruptions per segment.
    submission = copy.deepcopy(load_fixture(LONG_RESTART))
    submission["workload"]["training"]["reliability"]["node_mtbf_h"] = 1
    submission["workload"]["training"]["checkpoint"]["interval_min"] = 120
    record = evaluate(submission)
    checks = {c["id"]: c for c in record["checks"]}

    rfc8785.dumps(record)  # canonical JSON holds no infinity
    ttr = checks["time-to-result"]
    assert ttr["status"] == "fail" and ttr["rule"] == "misses-window"
    assert [ttr["evidence"][k] for k in ("days_p50", "days_p90", "days_p99", "days_mean")] == [None] * 4
    assert ttr["evidence"]["window_probability"] == 0.0
    assert "no simulated run finishes" in ttr["message"]
    assert checks["restart-behavior"]["evidence"]["days_p90"] is None
    assert "no simulated run finishes" in checks["restart-behavior"]["message"]


def test_when_nothing_fits_memory_no_rule_judges_the_simulated_window_share() -> None:
    # 13.4 expected days of a 7-day window: no simulated run fits it, but the run cannot start anyway.
    inputs = Inputs(load_fixture(NOTHING_FITS))
    facts = TimeToResult().gather(Context(inputs, default_policy(), {}, TimeToResult))

    assert facts.evidence["window_probability"] == 0.0
    assert {"window_probability", "days_p90", "days"} <= facts.unjudged
    assert results(load_fixture(NOTHING_FITS))["time-to-result"]["rule"] == "no-gpu-count-fits"

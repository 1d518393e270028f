"""What-if (rules/advice/what_if.py): the submission evaluated again with a lever moved, and where time-to-result
flips. Each figure is checked against a plain evaluation of the submission changed by hand, not against the
what-if's own arithmetic."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rules.advice.what_if import Levers, WhatIf
from rules.catalogue import load_catalogue
from rules.evaluate import evaluate
from rules.policy import default_policy

EXAMPLES = Path(__file__).parents[1] / "examples"
NOW = datetime(2026, 12, 6, tzinfo=UTC)


def _document(name: str) -> dict:
    return json.loads((EXAMPLES / name).read_text())


def _time_to_result(document: dict) -> dict:
    record = evaluate(document, default_policy(), catalogue=load_catalogue(), now=NOW)
    return next(c for c in record["checks"] if c["id"] == "time-to-result")


@pytest.fixture(scope="module")
def first_quote() -> WhatIf:
    # 8 x HGX-H200, Llama-3-8B, 1T tokens, a 30-day window; no prices
    return WhatIf(_document("hgx-h200-8b-first-quote.json"), default_policy(), load_catalogue(), NOW)


def test_a_stated_mfu_gives_the_days_a_submission_stating_it_gets(first_quote):
    # When the what-if states MFU 30 %
    shown = first_quote.at(Levers(mfu=0.3))
    # Then it has the days and status of the same submission with throughput {"mfu": 0.3} written into it
    document = copy.deepcopy(first_quote.document)
    document["workload"]["training"]["throughput"] = {"mfu": 0.3}
    check = _time_to_result(document)
    assert shown["days"] == pytest.approx(check["evidence"]["days"], rel=1e-12)
    assert shown["status"] == check["status"] == "fail"
    # and halving the MFU about doubles the days (the rate is proportional to it; failures add a little)
    assert first_quote.at(Levers(mfu=0.15))["days"] / shown["days"] == pytest.approx(2.0, rel=0.02)


def test_the_mfu_flip_is_where_the_run_stops_missing_its_window(first_quote):
    # When the what-if looks for the MFU at which time-to-result stops failing
    flip = first_quote.flips(Levers())[0]
    assert flip.lever == "mfu" and flip.value is not None and not flip.always
    assert f"fails below MFU {flip.value:.1%}" in flip.text
    # Then a submission stating 0.2 points less misses the window and one stating the flip value does not
    below, at = copy.deepcopy(first_quote.document), copy.deepcopy(first_quote.document)
    below["workload"]["training"]["throughput"] = {"mfu": round(flip.value - 0.002, 4)}
    at["workload"]["training"]["throughput"] = {"mfu": round(flip.value, 4)}
    assert _time_to_result(below)["rule"] == "misses-window"
    assert _time_to_result(at)["status"] != "fail"
    # and at the flip the expected days are the window's 30, to the bisection's resolution
    assert _time_to_result(at)["evidence"]["days"] == pytest.approx(30, rel=0.01)


def test_fewer_nodes_change_the_quote_as_a_revision_would_and_the_days_with_them(first_quote):
    # When the what-if quotes 4 nodes instead of 8
    shown = first_quote.at(Levers(nodes=4))
    # Then the job runs on 32 GPUs instead of 64 and takes twice the compute days
    assert shown["gpus"] == 32
    base = first_quote.at(Levers())
    assert shown["days"] / base["days"] == pytest.approx(2.0, rel=0.02)
    # and the node flip names the least node count whose run fits the 30-day window: one node fewer misses it,
    # as the submission with those node counts and GPUs written into it by hand shows
    flip = next(f for f in first_quote.flips(Levers()) if f.lever == "nodes")
    fewer, enough = copy.deepcopy(first_quote.document), copy.deepcopy(first_quote.document)
    for document, nodes in ((fewer, int(flip.value) - 1), (enough, int(flip.value))):
        document["quote"]["node_groups"][0]["count"] = nodes
        document["workload"]["training"]["gpus"] = 8 * nodes
    assert _time_to_result(fewer)["rule"] == "misses-window"
    assert _time_to_result(enough)["status"] != "fail"


def test_the_window_lever_moves_the_verdict_not_the_days(first_quote):
    base, short = first_quote.at(Levers()), first_quote.at(Levers(window_days=15))
    assert short["days"] == pytest.approx(base["days"], rel=1e-9)
    assert short["status"] == "fail" and short["rule"] == "misses-window" and short["window_days"] == 15
    flip = next(f for f in first_quote.flips(Levers()) if f.lever == "window_days")
    assert base["days"] <= flip.value <= base["days"] * 1.01


def test_a_stated_mfu_above_the_peak_is_named_as_the_upper_flip():
    # 16 x DGX-H100 fine-tuning Llama-2-70B with full recompute: a stated MFU whose recompute FLOPs exceed the
    # H100's dense bf16 peak of 989.4 TFLOP/s fails as inconsistent, which the MFU flip names as its upper end
    what = WhatIf(_document("dgx-h100-70b-finetune.json"), default_policy(), load_catalogue(), NOW)
    flip = what.flips(Levers())[0]
    assert "fails from MFU" in flip.text
    assert what.at(Levers(mfu=0.9))["rule"] == "throughput-beyond-peak"
    assert what.at(Levers(mfu=0.5))["rule"] != "throughput-beyond-peak"


def test_the_chart_points_are_evaluations_at_each_mfu(first_quote):
    curve = first_quote.curve(Levers())
    assert [p["mfu"] for p in curve][:3] == [0.10, 0.15, 0.20]
    days = [p["days"] for p in curve]
    assert days == sorted(days, reverse=True)  # more MFU, fewer days


def test_a_quote_that_lacks_more_than_the_throughput_says_no_lever_decides_it(first_quote):
    document = copy.deepcopy(first_quote.document)
    del document["quote"]["storage"]
    del document["workload"]["training"]["checkpoint"]
    what = WhatIf(document, default_policy(), load_catalogue(), NOW)
    assert what.at(Levers())["status"] == "insufficient-data"
    [flip] = what.flips(Levers())
    assert flip.value is None and flip.text.startswith("time-to-result cannot be decided whatever the levers")

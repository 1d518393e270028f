"""`make bench`'s judgements (issue 25): which figure each target reads, and what the references measure.

The timings themselves are `make bench`'s; here the figures are made up, so each test fails when a target
reads the wrong reference or the wrong part of an evaluation.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import evaluation
from bench.evaluation import EXCLUDED, excluded_callable, excluded_clock, judge_evaluation
from rules.evaluate import evaluate

ROOT = Path(__file__).resolve().parent.parent
NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
DGX = ROOT / "examples" / "dgx-h100-70b-finetune.json"
FAIL_70B = ROOT / "examples" / "fail-70b-ddp-one-rack.json"


# --- the evaluation without the simulation and searches -----------------------------------------------------

def test_each_excluded_function_is_called_where_the_clock_replaces_it() -> None:
    """A function that moved, or a call site that now reaches it under another name, would time nothing."""
    calls = {}
    for seam in EXCLUDED:
        with excluded_clock((seam,)) as clock:
            for path in (DGX, FAIL_70B):
                evaluate(json.loads(path.read_text()), now=NOW)
        calls[seam[1]] = clock.calls
    assert all(calls.values()), calls


def test_the_clock_leaves_the_record_unchanged_and_puts_every_function_back() -> None:
    document = json.loads(DGX.read_text())
    before = [excluded_callable(module, path) for module, path in EXCLUDED]
    plain = evaluate(document, now=NOW)
    with excluded_clock() as clock:
        timed = evaluate(document, now=NOW)
        assert [excluded_callable(module, path)[2] for module, path in EXCLUDED] != [f for _, _, f in before]
    assert timed == plain
    assert clock.seconds > 0
    assert [excluded_callable(module, path) for module, path in EXCLUDED] == before


def test_the_clock_counts_nested_excluded_calls_once() -> None:
    clock = evaluation.ExcludedClock()
    inner = clock.timed(lambda: None)
    outer = clock.timed(lambda: inner())
    outer()
    assert clock.calls == 1


def test_the_ratio_target_reads_the_evaluation_less_the_excluded_time() -> None:
    # 12 ms evaluations of which 6 in the simulation and searches, 4.5 ms validations: whole 2.67, rest 1.33.
    figures = judge_evaluation([(0.012, 0.006, 0.0045)] * 20)
    assert figures.whole_ratio == pytest.approx(12 / 4.5)
    assert figures.rest_ratio == pytest.approx(6 / 4.5)
    assert figures.verdicts == [True, True]
    assert judge_evaluation([(0.012, 0.002, 0.0045)] * 20).verdicts == [False, True]  # rest 2.22


def test_the_p95_target_reads_the_whole_evaluation() -> None:
    # the rest is 1 ms, far within its ratio; two of twenty whole evaluations take 60 ms.
    samples = [(0.010, 0.009, 0.004)] * 18 + [(0.060, 0.059, 0.004)] * 2
    figures = judge_evaluation(samples)
    assert figures.p95_ms > 50
    assert figures.verdicts == [True, False]

"""`quotecheck search`: the contract shape as JSON, the table with a progress bar, and the exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rules.advice.search import search_submission
from rules.policy import load_policy
from service.cli import main

ROOT = Path(__file__).parent.parent
TRAINING = ROOT / "examples" / "h200-128node-pretraining.json"  # 1,024 H200s pretraining a 70B model
DEFAULT_POLICY = ROOT / "rules" / "data" / "policy.default.json"


def _run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _write(tmp_path: Path, document: Any, name: str = "submission.json") -> str:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def test_json_is_the_search_of_the_submission_in_the_contract_shape():
    result = _run("search", str(TRAINING), "--format", "json")

    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    assert set(printed) == {"layouts_searched", "fitting", "layouts_skipped", "skipped", "best", "submitted", "top",
                            "submitted_vs_best"}
    assert (printed["layouts_skipped"], printed["skipped"]) == (0, {})
    assert printed == search_submission(json.loads(TRAINING.read_text()))
    assert result.stderr == ""  # no progress bar in JSON


def test_text_shows_progress_on_stderr_and_the_fastest_layouts_beside_the_submitted_one():
    expected = search_submission(json.loads(TRAINING.read_text()))

    result = _run("search", str(TRAINING))

    assert result.exit_code == 0, result.stderr
    assert "searching layouts" in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{expected['layouts_searched']:,} layouts searched, {expected['fitting']:,} fit memory"
    assert lines[-1] == expected["submitted_vs_best"]
    # a heading, one row per layout of the top, and the submitted layout (TP 8 x PP 4 x DP 32, ZeRO-1)
    assert len(lines) == 1 + 1 + len(expected["top"]) + 1 + 1
    assert lines[-2].split()[:6] == ["submitted", "8", "4", str(expected["submitted"]["virtual_stages"]), "1", "32"]
    assert f"{expected['best']['step_s']:.3f}" in lines[2]


@pytest.mark.parametrize("document", [
    '{"schema_version": "1", "quote": ',  # truncated JSON
    {"schema_version": "1", "quote": {"node_groups": [{"name": "gpu", "count": -1}]}},  # breaks the schema
])
def test_bad_input_exits_2_with_the_messages_of_evaluate(tmp_path, document):
    path = _write(tmp_path, document)

    searched, evaluated = _run("search", path), _run("evaluate", path)

    assert searched.exit_code == evaluated.exit_code == 2
    assert searched.stderr == evaluated.stderr and searched.stderr.startswith("error: ")
    assert _run("search", str(tmp_path / "missing.json")).exit_code == 2


def test_a_bad_policy_exits_2_and_a_policy_given_is_the_one_searched_under(tmp_path):
    policy = json.loads(DEFAULT_POLICY.read_text())
    policy["memory"]["headroom_fraction"] = 1.5
    bad = _run("search", str(TRAINING), "--policy", _write(tmp_path, policy, "bad.json"))
    assert bad.exit_code == 2 and bad.stderr == _run("evaluate", str(TRAINING), "--policy",
                                                     _write(tmp_path, policy, "bad.json")).stderr

    # Half the memory held back: fewer layouts fit
    policy["memory"]["headroom_fraction"] = 0.5
    path = _write(tmp_path, policy, "strict.json")
    strict = json.loads(_run("search", str(TRAINING), "--policy", path, "--format", "json").stdout)
    assert strict == search_submission(json.loads(TRAINING.read_text()), load_policy(path))
    assert 0 < strict["fitting"] < search_submission(json.loads(TRAINING.read_text()))["fitting"]


def test_a_serving_only_submission_has_nothing_to_search_and_exits_2():
    result = _run("search", str(ROOT / "examples" / "l40s-8b-serving.json"), "--format", "json")

    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.endswith("has nothing to search: the submission has no training workload to lay out\n")


def test_no_layout_that_fits_exits_1(tmp_path):
    # Given 70B on one node of 8 H100s: 16 B/param of model state is 140 GB per GPU however it is laid out
    document = json.loads((ROOT / "examples" / "fail-70b-ddp-one-rack.json").read_text())
    document["quote"]["node_groups"][0]["count"] = 1
    document["workload"]["training"]["gpus"] = 8

    result = _run("search", _write(tmp_path, document), "--format", "json")

    assert result.exit_code == 1
    printed = json.loads(result.stdout)
    assert printed["fitting"] == 0 and printed["best"] is None and printed["top"] == []
    assert printed["submitted_vs_best"] == "no layout of the quoted GPUs fits memory"


def test_help_documents_the_exit_codes():
    result = _run("search", "--help")

    assert result.exit_code == 0 and "1  no layout of the quoted GPUs fits memory" in result.stdout
    assert "search" in _run("--help").stdout


QWEN3_MOE = ROOT / "tests" / "search_fixtures" / "qwen3-30b-a3b-2x-dgx-h100.json"  # by name, on 2 × DGX H100


def test_a_mixture_of_experts_search_lists_expert_parallel_layouts_and_its_best_fits():
    # Qwen3-30B-A3B (Qwen/Qwen3-30B-A3B config.json: 128 experts of 768, top-8) on 16 H100s: expert degrees that divide
    # 128 and whose expert grid divides 16 (1, 2, 4, 8, 16) are searched with the other degrees.
    result = _run("search", str(QWEN3_MOE), "--format", "json")

    assert result.exit_code == 0, result.stderr  # 0: at least one layout fits memory
    printed = json.loads(result.stdout)
    assert any(entry["expert"] > 1 for entry in printed["top"])
    best = printed["best"]
    assert best["expert"] > 1 and 128 % best["expert"] == 0
    assert best["memory_gib_per_gpu"] <= 80  # an H100 SXM5's 80 GB (79.65 GiB) hold it
    assert printed["submitted"]["expert"] == 8

    text = _run("search", str(QWEN3_MOE))
    assert text.exit_code == 0 and "  EP  " in text.stdout.splitlines()[1]

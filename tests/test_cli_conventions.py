"""`quotecheck evaluate` and `quotecheck search` end cleanly under every convention the policy admits.

Every model-state convention × every activation convention of the policy schema × every sharding of the
submission schema, through the CLI entry: the exit code is 0, 1 or 2 and no exception escapes (a policy whose
convention cannot size a candidate layout skips and counts it). The job is small (Llama-2-7B on one DGX H100,
32 sequences a step) so that the 48 combinations stay fast.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from service.cli import main

ROOT = Path(__file__).parent.parent
BASE = ROOT / "tests" / "checks" / "bases" / "1x-dgx-h100-llama2-7b-zero3-fine-tune.json"
DEFAULT_POLICY = ROOT / "rules" / "data" / "policy.default.json"
_POLICY_SCHEMA = json.loads((ROOT / "schemas" / "policy.schema.json").read_text())
_SUBMISSION_SCHEMA = json.loads((ROOT / "schemas" / "submission.schema.json").read_text())
MODEL_STATE_CONVENTIONS = _POLICY_SCHEMA["properties"]["conventions"]["properties"]["model_state_bytes"]["enum"]
ACTIVATION_CONVENTIONS = _POLICY_SCHEMA["properties"]["conventions"]["properties"]["activations"]["enum"]
SHARDINGS = (_SUBMISSION_SCHEMA["properties"]["workload"]["properties"]["training"]["properties"]["parallelism"]
             ["properties"]["sharding"]["enum"])
CASES = list(itertools.product(MODEL_STATE_CONVENTIONS, ACTIVATION_CONVENTIONS, SHARDINGS))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns a folder with a policy per convention pair and a submission per sharding."""
    folder = tmp_path_factory.mktemp("conventions")
    policy = json.loads(DEFAULT_POLICY.read_text())
    for model_state, activations in itertools.product(MODEL_STATE_CONVENTIONS, ACTIVATION_CONVENTIONS):
        policy["conventions"] = {**policy["conventions"], "model_state_bytes": model_state, "activations": activations}
        (folder / f"policy-{model_state}-{activations}.json").write_text(json.dumps(policy))
    submission = json.loads(BASE.read_text())
    submission["workload"]["training"]["global_batch"] = 32  # 4 sequences a micro-batch on 8 GPUs: one step
    for sharding in SHARDINGS:
        submission["workload"]["training"]["parallelism"]["sharding"] = sharding
        (folder / f"{sharding}.json").write_text(json.dumps(submission))
    return folder


def _run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"quotecheck {' '.join(args)} raised {result.exception!r}")
    assert result.exit_code in (0, 1, 2), result.output
    assert "Traceback" not in result.output
    return result


def test_the_policy_and_submission_schemas_admit_what_the_product_test_covers():
    assert {"zero-paper", "megatron-distributed-optimizer"} <= set(MODEL_STATE_CONVENTIONS)
    assert {"physical", "megatron"} <= set(ACTIVATION_CONVENTIONS)
    assert {"ddp", "zero1", "fsdp-hybrid"} <= set(SHARDINGS)


@pytest.mark.parametrize(("model_state", "activations", "sharding"), CASES,
                         ids=["-".join(case) for case in CASES])
def test_evaluate_and_search_end_without_a_traceback(files: Path, model_state: str, activations: str,
                                                      sharding: str) -> None:
    policy, submission = files / f"policy-{model_state}-{activations}.json", files / f"{sharding}.json"

    searched = _run("search", str(submission), "--policy", str(policy), "--format", "json")
    evaluated = _run("evaluate", str(submission), "--policy", str(policy), "--format", "json")

    assert searched.exit_code in (0, 1), searched.output  # the job is laid out: there is something to search
    result = json.loads(searched.output)
    assert result["layouts_skipped"] == sum(result["skipped"].values())
    assert result["layouts_searched"] >= result["fitting"] + result["layouts_skipped"]
    record = json.loads(evaluated.output)
    assert record["layout_search"]["layouts_searched"] == result["layouts_searched"]

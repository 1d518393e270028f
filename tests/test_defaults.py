"""Cited defaults: a buyer's first quote (no reliability, data, dataloader or racks) gets every check decided, each
default filled in by the job parser from the policy in use with its citation, listed in the record and in the
assumptions of every check that read it; a stated value, a measurement or another policy replaces it; and the
defaults are the published figures their citations give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import schemas
from rules.evaluate import evaluate
from rules.job.inputs import Inputs
from rules.policy import default_policy, parse_policy
from service.cli import main

ROOT = Path(__file__).parent.parent
FIRST_QUOTE = ROOT / "examples" / "hgx-h200-8b-first-quote.json"
TRAINING = "/workload/training"
MTBF, RESTART = f"{TRAINING}/reliability/node_mtbf_h", f"{TRAINING}/reliability/restart_min"
BYTES_PER_TOKEN, PER_CORE = f"{TRAINING}/data/bytes_per_token", f"{TRAINING}/data/tokens_per_s_per_core"
WORKERS, RSS, PINNED = (f"{TRAINING}/dataloader/{member}"
                        for member in ("workers_per_gpu", "worker_rss_gib", "pinned_gib_per_gpu"))
DEFAULTED = (MTBF, RESTART, BYTES_PER_TOKEN, PER_CORE, WORKERS, RSS, PINNED)
# Which checks read which defaults (the inputs each lists in its evidence).
READ_BY = {"checkpoint-bandwidth": (MTBF,), "restart-behavior": (MTBF, RESTART), "time-to-result": (MTBF, RESTART),
           "data-feed": (BYTES_PER_TOKEN, PER_CORE, WORKERS), "host-ram": (WORKERS, RSS, PINNED)}


def first_quote() -> dict[str, Any]:
    return json.loads(FIRST_QUOTE.read_text())


def check(record: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in record["checks"] if c["id"] == check_id)


def policy_with(change: dict[str, Any]) -> Any:
    """Returns the default policy with ``change`` applied at its top level, as a custom policy file reads."""
    document = {**default_policy().document, "policy_id": "custom-defaults", **change}
    return parse_policy(json.dumps(document).encode(), origin="custom.json")


# ---- the first quote ----------------------------------------------------------------------------------------------

def test_the_first_quote_gets_every_check_decided_and_exits_by_its_verdict(tmp_path: Path) -> None:
    # Given the first quote of an 8 × HGX-H200 cluster for Llama-3-8B by name, without reliability, data,
    # dataloader or racks; when it is evaluated on the command line
    out = tmp_path / "record.json"
    result = CliRunner().invoke(main, ["evaluate", str(FIRST_QUOTE), "--no-search", "--no-remedies",
                                       "--out", str(out)])
    record = json.loads(out.read_text())

    # then no check is left undecided, and the exit code follows the verdict
    assert [c["id"] for c in record["checks"] if c["status"] == "insufficient-data"] == []
    assert record["verdict"] in ("pass", "warn", "fail")
    assert result.exit_code == (1 if record["verdict"] == "fail" else 0), result.output
    assert schemas.validate("record", record) == []
    # and time-to-result gives days to result on the default node MTBF
    assert check(record, "time-to-result")["evidence"]["days"] > 0


@pytest.mark.parametrize(("change", "said"), [
    ({"gpu": {"model": "H200", "count": 8}}, ["/quote/node_groups/0/gpu/model", "did you mean H200-SXM-141GB?"]),
    ({"max_power_w": 10.2}, ["/quote/node_groups/0/max_power_w", "10.2 kW is 10,200 W"]),
], ids=["gpu-H200", "kW-in-W"])
def test_the_first_quote_with_a_short_gpu_id_or_kilowatts_exits_2_naming_the_field(tmp_path: Path, change, said):
    # Given the same first quote whose node group says "H200" for its GPU, or its 10.2 kW in the W field
    document = first_quote()
    document["quote"]["node_groups"][0].update(change)
    path = tmp_path / "quote.json"
    path.write_text(json.dumps(document))
    result = CliRunner().invoke(main, ["evaluate", str(path), "--no-search", "--no-remedies"])
    # Then it is refused before evaluation, at the field, with what was meant
    assert result.exit_code == 2
    assert all(words in result.output for words in said), result.output


def test_the_record_lists_each_default_with_its_pointer_and_citation() -> None:
    record = evaluate(first_quote())

    fills = {fill["pointer"]: fill for fill in record["default_fills"]}
    assert sorted(fills) == sorted(DEFAULTED)
    assert {fill["source"] for fill in fills.values()} == {"default"}
    assert fills[MTBF]["value"] == 6334.6 and "arXiv 2407.21783" in fills[MTBF]["ref"]
    assert "2,048 nodes × 54 days × 24 h / 419" in fills[MTBF]["ref"]
    assert fills[BYTES_PER_TOKEN]["value"] == 4 and "optimal_dtype" in fills[BYTES_PER_TOKEN]["ref"]
    assert "vocabulary 128,256 ≥ 65,500" in fills[BYTES_PER_TOKEN]["ref"]  # Llama-3-8B's, from the catalogue
    assert fills[WORKERS]["value"] == 2 and "--num-workers" in fills[WORKERS]["ref"]
    assert all(fill["ref"].startswith("policy defaults.training.") for fill in fills.values())
    # The record's inputs hold them too, with the same source
    inputs = {i["pointer"]: i for i in record["inputs"]}
    assert all(inputs[pointer]["source"] == "default" for pointer in DEFAULTED)


@pytest.mark.parametrize("check_id", sorted(READ_BY))
def test_each_check_that_reads_a_default_lists_it_among_its_assumptions(check_id: str) -> None:
    record = evaluate(first_quote())
    result = check(record, check_id)

    assumed = {a["pointer"]: a for a in result["assumptions"]}
    for pointer in READ_BY[check_id]:
        assert pointer in result["evidence"]["inputs"]
        assert assumed[pointer]["source"] == "default" and assumed[pointer]["ref"].startswith("policy defaults.")


def test_a_default_restart_is_named_as_such_in_restart_behavior() -> None:
    result = check(evaluate(first_quote()), "restart-behavior")

    assert result["evidence"]["restart_min"] == 15 and result["evidence"]["restart_from"] == "policy default"
    assert "assumed_defaults" not in result["evidence"]  # the assumptions list it, with its citation


# ---- what replaces a default --------------------------------------------------------------------------------------

def test_a_stated_value_replaces_the_default() -> None:
    # Given the first quote stating its node MTBF (bare) and its bytes per token with a source
    submission = first_quote()
    training = submission["workload"]["training"]
    training["reliability"] = {"node_mtbf_h": 2000}
    training["data"] = {"bytes_per_token": {"value": 2, "source": "measurement", "ref": "du -b of the .bin shards"}}

    record = evaluate(submission)

    fills = {fill["pointer"] for fill in record["default_fills"]}
    assert MTBF not in fills and BYTES_PER_TOKEN not in fills and RESTART in fills
    restart = check(record, "restart-behavior")
    assert restart["evidence"]["cluster_mtbf_h"] == 2000 / 8  # 8 nodes fail independently
    assert {a["pointer"]: a["source"] for a in restart["assumptions"]}[MTBF] == "assumption"
    feed = check(record, "data-feed")
    assert feed["evidence"]["bytes_per_token"] == 2
    assert BYTES_PER_TOKEN not in {a["pointer"] for a in feed["assumptions"]}


def test_a_passed_restore_test_replaces_the_default_restart() -> None:
    submission = first_quote()
    submission["measurements"] = {"restore_test": {"passed": True, "restore_min": 7}}

    result = check(evaluate(submission), "restart-behavior")

    assert result["evidence"]["restart_min"] == 7 and result["evidence"]["restart_from"] == "restore test"
    assert RESTART not in {a["pointer"] for a in result["assumptions"]}


def test_a_model_with_a_vocabulary_below_65500_gets_two_bytes_per_token() -> None:
    # Llama-2-7B's vocabulary is 32,000: Megatron-LM stores its token ids as uint16
    submission = first_quote()
    submission["workload"]["training"]["model"] = {"name": "Llama-2-7B"}

    fills = {fill["pointer"]: fill for fill in evaluate(submission)["default_fills"]}

    assert fills[BYTES_PER_TOKEN]["value"] == 2 and "vocabulary 32,000 < 65,500" in fills[BYTES_PER_TOKEN]["ref"]


def test_a_serving_only_submission_gets_no_default() -> None:
    record = evaluate(json.loads((ROOT / "examples" / "l40s-8b-serving.json").read_text()))

    assert record["default_fills"] == []
    assert not any(i["pointer"].startswith(TRAINING) for i in record["inputs"])


# ---- the policy in use ---------------------------------------------------------------------------------------------

def test_a_custom_policy_s_default_is_used() -> None:
    # Given a policy whose node MTBF default is 1,000 h
    defaults = default_policy().document["defaults"]
    reliability = {**defaults["training"]["reliability"],
                   "node_mtbf_h": {"value": 1000, "source": "our fleet, 2025 field data"}}
    policy = policy_with({"defaults": {**defaults, "training": {**defaults["training"], "reliability": reliability}}})

    record = evaluate(first_quote(), policy)

    fill = next(f for f in record["default_fills"] if f["pointer"] == MTBF)
    assert fill["value"] == 1000 and "our fleet, 2025 field data" in fill["ref"]
    assert check(record, "restart-behavior")["evidence"]["cluster_mtbf_h"] == 1000 / 8
    assert record["policy"]["id"] == "custom-defaults"


def test_a_policy_without_defaults_leaves_the_inputs_missing() -> None:
    document = {key: value for key, value in default_policy().document.items() if key != "defaults"}
    policy = parse_policy(json.dumps(document).encode(), origin="no-defaults.json")

    record = evaluate(first_quote(), policy)

    assert record["default_fills"] == [] and record["verdict"] == "incomplete"
    assert check(record, "restart-behavior")["evidence"]["missing"] == [MTBF, RESTART]
    assert check(record, "host-ram")["status"] == "insufficient-data"
    # the save is within its limit, so checkpoint-bandwidth waits for the MTBF that judges the interval
    assert check(record, "checkpoint-bandwidth")["evidence"]["missing"] == [MTBF]


def test_a_policy_with_the_superseded_settings_keeps_them_as_uncited_defaults() -> None:
    # A policy copied before the defaults section: restart.default_restart_min and data_feed.tokens_per_s_per_core
    document = {key: value for key, value in default_policy().document.items() if key != "defaults"}
    document["restart"] = {**document["restart"], "default_restart_min": 20}
    document["data_feed"] = {**document["data_feed"], "tokens_per_s_per_core": 150000}
    policy = parse_policy(json.dumps(document).encode(), origin="old.json")

    record = evaluate(first_quote(), policy)

    fills = {fill["pointer"]: fill for fill in record["default_fills"]}
    assert sorted(fills) == [PER_CORE, RESTART]
    assert fills[RESTART]["value"] == 20 and "restart.default_restart_min" in fills[RESTART]["ref"]
    assert fills[PER_CORE]["value"] == 150000 and "no citation given" in fills[PER_CORE]["ref"]
    # (the checks that read them still lack node MTBF, bytes per token and the dataloader: none is given)
    assert check(record, "restart-behavior")["evidence"]["missing"] == [MTBF]


def test_inputs_read_without_a_policy_fill_no_default() -> None:
    inputs = Inputs(first_quote())

    assert inputs.default_fills == [] and inputs.quantity(MTBF) is None


# ---- the defaults against their published figures ------------------------------------------------------------------

def test_the_node_mtbf_is_the_llama_3_fleet_interruption_rate() -> None:
    # The Llama 3 Herd of Models (arXiv 2407.21783) §3.3.4, Table 5: 419 unexpected interruptions in a 54-day
    # snapshot on 16,384 H100 GPUs, 8 per server.
    nodes = 16_384 / 8
    node_hours = nodes * 54 * 24
    assert (nodes, node_hours) == (2_048, 2_654_208)
    assert node_hours / 419 == pytest.approx(6_334.6, abs=0.05)
    assert default_policy().value("defaults.training.reliability.node_mtbf_h.value") == pytest.approx(
        node_hours / 419, abs=0.05)


def test_bytes_per_token_are_megatron_s_token_id_sizes() -> None:
    # Megatron-LM megatron/core/datasets/indexed_dataset.py, DType.optimal_dtype: uint16 below a vocabulary of
    # 65,500, int32 otherwise.
    given = default_policy().document["defaults"]["training"]["data"]["bytes_per_token"]
    assert given["value"] == np.dtype(np.int32).itemsize == 4
    assert given["when_vocab_below"] == {"vocab": 65_500, "value": np.dtype(np.uint16).itemsize}


def test_the_dataloader_defaults_are_megatron_s_and_the_published_measurements() -> None:
    dataloader = default_policy().document["defaults"]["training"]["dataloader"]
    # Megatron-LM megatron/training/arguments.py: --num-workers default 2
    assert dataloader["workers_per_gpu"]["value"] == 2
    # One worker measured at 1.2 GB (pytorch/pytorch#19355) and 1.5 GB (argonne-lcf/dlio_benchmark#141): the
    # default is the larger, in GiB, rounded up.
    assert 1.5e9 / 2**30 <= dataloader["worker_rss_gib"]["value"] < 1.5e9 / 2**30 + 1


def test_the_decode_rate_lies_between_the_published_tokeniser_rates() -> None:
    # b0o/tiktoken-bench README, tiktoken 1.0.7 on a Threadripper 1950X: 161,998 tokens/s per worker with 32
    # workers, 276,243 tokens/s on one thread.
    assert 161_998 <= default_policy().value("defaults.training.data.tokens_per_s_per_core.value") <= 276_243

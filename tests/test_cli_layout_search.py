"""`quotecheck evaluate` reports the layout search: the best layout of the quoted GPUs and the checks at it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import schemas
from rules.advice.best_layout import layout_patch
from rules.advice.compare import merge_patch
from rules.advice.search import search_submission
from rules.evaluate import evaluate
from service.cli import main

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "fail-70b-ddp-one-rack.json"
SERVING = ROOT / "examples" / "l40s-8b-serving.json"


def _record(*args: str) -> dict:
    result = CliRunner().invoke(main, ["evaluate", *args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)


def test_the_record_holds_the_search_and_the_checks_at_the_best_layout() -> None:
    # Given the failing 70B example (DDP on 32 H100s: the model state alone does not fit)
    document = json.loads(EXAMPLE.read_text())

    # When it is evaluated from the command line
    record = _record(str(EXAMPLE))

    # Then its record holds the search quotecheck search gives, valid against the record schema
    assert schemas.validate("record", record) == []
    section, searched = record["layout_search"], search_submission(document)
    assert (section["best"], section["submitted"]) == (searched["best"], searched["submitted"])
    assert section["submitted_vs_best"] == searched["submitted_vs_best"]
    # and the layout-dependent checks as an evaluation of the patched submission gives them
    at_best = evaluate(merge_patch(document, section["patch"]))
    statuses = {c["id"]: c["status"] for c in at_best["checks"]}
    assert {row["id"]: row["best"]["status"] for row in section["checks"]} == {
        check_id: statuses[check_id] for check_id in ("peak-memory", "sharding", "gradient-accumulation",
                                                      "time-to-result")}
    assert section["verdict_at_best"] == at_best["verdict"]
    # The submitted DDP does not fit; the best layout shards the model state and fits
    rows = {row["id"]: row for row in section["checks"]}
    assert rows["peak-memory"]["submitted"]["status"] == "fail"
    assert rows["peak-memory"]["best"]["status"] in ("pass", "warn")  # it fits (a warning: with little headroom)
    assert section["best"]["sharding"] != "ddp"
    # and the checks themselves judge the submitted layout, as without the search
    assert record["checks"] == _record(str(EXAMPLE), "--no-search")["checks"]


def test_the_patch_writes_the_layout_and_drops_what_belongs_to_the_submitted_one() -> None:
    document = json.loads(EXAMPLE.read_text())
    best = search_submission(document)["best"]

    patch, removed = layout_patch(document, best)

    training = merge_patch(document, patch)["workload"]["training"]
    assert training["parallelism"]["sharding"] == best["sharding"]
    assert training["micro_batch"] == best["micro_batch"] and training["precision"] == best["precision"]
    assert training["activation_checkpointing"] == best["recompute"]
    assert ("throughput" in document["workload"]["training"]) == ("throughput" not in training)
    assert len(removed) == ("throughput" in document["workload"]["training"])


def test_the_table_ends_with_the_search_and_a_serving_quote_has_none(tmp_path: Path) -> None:
    table = CliRunner().invoke(main, ["evaluate", str(EXAMPLE)]).output
    assert "layout search: " in table and "slower than the best that fits" in table
    assert "at the best layout the verdict is" in table

    assert "layout_search" not in _record(str(SERVING))
    assert "layout_search" not in _record(str(EXAMPLE), "--no-search")


def test_the_best_layout_of_every_training_example_fits_memory_in_the_full_evaluation_too() -> None:
    """The search's memory model and peak-memory agree: what the search ranks as fitting, the check lets fit."""
    for path in sorted((ROOT / "examples").glob("*.json")):
        record = _record(str(path))
        if "layout_search" not in record:
            continue
        rows = {row["id"]: row for row in record["layout_search"]["checks"]}
        assert rows["peak-memory"]["best"]["status"] in ("pass", "warn"), (path.name, rows["peak-memory"])
        assert record["layout_search"]["best"]["step_s"] <= record["layout_search"]["submitted"]["step_s"]

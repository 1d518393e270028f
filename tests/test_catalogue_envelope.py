"""Checks on the catalogue's published MFU envelope (rules/data/catalogue.json ``published_mfu_envelope``).

Every row carries a published figure with its source and commit, the peak its MFU divides by and its FLOP
convention; the figures are pinned to docs/mfu-envelope-sources.md §2 in tests/estimates/test_mfu_envelope.py. Here:
the rows agree with themselves and with the catalogue's GPUs, and the table holds what its note says it holds.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = json.loads((ROOT / "rules" / "data" / "catalogue.json").read_text(encoding="utf-8"))
SCHEMA = json.loads((ROOT / "schemas" / "catalogue.schema.json").read_text(encoding="utf-8"))
TABLE = CATALOGUE["published_mfu_envelope"]
ROWS = TABLE["rows"]
# FLOPs per token each convention counts, fewest first: B (causal attention at half) ≤ A (no input embedding) ≤ palm.
CONVENTION_ORDER = ("B", "A", "palm")


def _key(row: dict) -> tuple:
    return row["size_class"], row["architecture"], tuple(row.get("gpu_models", ())), row["precision"]


def _gpus_covered(row: dict) -> list[str]:
    return row.get("gpu_models") or [gpu for gpu, spec in CATALOGUE["gpus"].items()
                                     if spec["architecture"] == row["architecture"]]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{'/'.join(map(str, _key(r)))}/{r['convention']}")
def test_mfu_is_the_tflops_over_the_peak(row: dict) -> None:
    # A published MFU is rounded (47% for 465.9 / 989.4 = 47.1 %); a derived one is computed from the TFLOP/s
    assert row["mfu"] == pytest.approx(row["tflops_per_gpu"] / row["peak_tflops"], abs=0.005)
    assert "published" in (row["mfu_basis"], row["tflops_basis"])


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{'/'.join(map(str, _key(r)))}/{r['convention']}")
def test_the_peak_is_the_dense_bf16_peak_of_the_gpu_the_run_used(row: dict) -> None:
    # The run's GPU is the SXM part of its generation (A100, H100 SXM5) or the named Blackwell part; fp8 rows too
    # divide by the bf16 peak, as peak_precision says.
    peaks = {gpu: CATALOGUE["gpus"][gpu]["bf16_tflops"] for gpu in _gpus_covered(row)}
    assert row["peak_precision"] == "bf16"
    assert row["peak_tflops"] == max(peaks.values()), peaks


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{'/'.join(map(str, _key(r)))}/{r['convention']}")
def test_named_gpus_are_catalogued_parts_of_the_rows_architecture(row: dict) -> None:
    for gpu in row.get("gpu_models", ()):
        assert CATALOGUE["gpus"][gpu]["architecture"] == row["architecture"]
    assert _gpus_covered(row), "a row covers at least one catalogued GPU"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{'/'.join(map(str, _key(r)))}/{r['convention']}")
def test_each_source_names_its_commit_or_says_it_has_none(row: dict) -> None:
    assert "https://" in row["source"]
    assert " @ " in row["source"] or "no commit" in row["source"]


def test_one_row_per_convention_and_none_another_dominates() -> None:
    # A row is left out when another of its class, GPU and precision has as high an MFU in a convention that counts
    # no more FLOPs per token: converted alike, that one is always at least as high.
    keys = [(*_key(row), row["convention"]) for row in ROWS]
    assert len(keys) == len(set(keys))
    for row in ROWS:
        for other in ROWS:
            if other is row or _key(other) != _key(row):
                continue
            fewer = CONVENTION_ORDER.index(other["convention"]) <= CONVENTION_ORDER.index(row["convention"])
            assert not (fewer and other["mfu"] >= row["mfu"]), (row["run"]["model"], other["run"]["model"])


def test_every_row_names_a_size_class_of_the_table() -> None:
    assert {row["size_class"] for row in ROWS} <= set(TABLE["size_classes"])
    bounds = sorted((c["min_parameters"], c["max_parameters"]) for c in TABLE["size_classes"].values())
    # The classes tile [0, ∞): each starts where the last ended
    assert bounds[0][0] == 0 and bounds[-1][1] is None
    assert all(low_next == high for (_, high), (low_next, _) in zip(bounds, bounds[1:], strict=False))


def test_the_schema_describes_the_table() -> None:
    validator = Draft202012Validator(SCHEMA)
    assert not list(validator.iter_errors(CATALOGUE))
    for change in ({"unexpected": 1}, {"convention": "causal"}, {"precision": "fp16"}, {"mfu": 47}):
        bad = copy.deepcopy(CATALOGUE)
        bad["published_mfu_envelope"]["rows"][0].update(change)
        with pytest.raises(ValidationError):
            validator.validate(bad)
    bad = copy.deepcopy(CATALOGUE)
    bad["published_mfu_envelope"]["rows"][0]["source"] = "a README table without its address"
    with pytest.raises(ValidationError):
        validator.validate(bad)

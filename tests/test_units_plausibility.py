"""Figures in the wrong unit (rules/job/plausibility.py): a node's max_power_w below its GPUs' board power is refused
at its pointer (exit 2) with the kilowatt reading spelled out; a plausible figure, or one with no GPU power to compare,
is evaluated as before."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from rules.catalogue import load_catalogue
from rules.job.plausibility import unit_problems
from service.cli import main

EXAMPLE = Path(__file__).parent.parent / "examples" / "dgx-h100-70b-finetune.json"


def _with_power(power) -> dict:
    submission = json.loads(EXAMPLE.read_text())
    submission["quote"]["node_groups"][0]["max_power_w"] = power
    return submission


def test_kilowatts_in_a_watt_field_exit_2_naming_the_field_and_kw(tmp_path: Path):
    path = tmp_path / "quote.json"
    path.write_text(json.dumps(_with_power(10.2)))

    result = CliRunner().invoke(main, ["evaluate", str(path), "--no-search", "--no-remedies"])

    assert result.exit_code == 2
    expected = "/quote/node_groups/0/max_power_w: max_power_w 10.2 W is below what the node's 8 GPUs alone draw"
    assert expected in result.output
    assert "(8 × 700 W = 5,600 W)" in result.output and "10.2 kW is 10,200 W" in result.output


def test_plausible_or_uncomparable_power_is_not_a_problem():
    catalogue = load_catalogue()
    assert unit_problems(_with_power(10200), catalogue) == []
    assert unit_problems(_with_power({"value": 10200, "source": "vendor"}), catalogue) == []
    assert [p.pointer for p in unit_problems(_with_power({"value": 9.8, "source": "vendor"}), catalogue)] == [
        "/quote/node_groups/0/max_power_w"]
    no_tdp = _with_power(10.2)
    no_tdp["quote"]["node_groups"][0]["gpu"] = {"model": "Custom-GPU", "count": 8, "memory_gib": 80}
    assert unit_problems(no_tdp, catalogue) == []

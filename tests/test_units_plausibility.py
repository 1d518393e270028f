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


def test_a_server_named_by_its_alias_gives_the_gpus_to_compare_with():
    # Given an 8 x HGX H200 node group that names only its server ("HGX-H200", an alias of HGX-H200-8GPU: 8 x
    # H200-SXM-141GB at 700 W each) and types its 10.2 kW as 10.2 in the W field
    submission = _with_power(10.2)
    group = submission["quote"]["node_groups"][0]
    del group["gpu"]
    group["server_model"] = "HGX-H200"
    [problem] = unit_problems(submission, load_catalogue())
    assert problem.pointer == "/quote/node_groups/0/max_power_w"
    assert "(8 × 700 W = 5,600 W)" in problem.message and "10.2 kW is 10,200 W" in problem.message
    # and a server the catalogue lacks, with no GPUs stated, leaves nothing to compare
    group["server_model"] = "Custom-8GPU"
    assert unit_problems(submission, load_catalogue()) == []

"""GPU ids on the command line: an id the catalogue lacks, with nothing else describing the GPU, is refused (exit 2)
at its pointer with the closest catalogued ids, instead of leaving every check that needs the GPU undecided."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rules.catalogue import load_catalogue
from service.cli import main

EXAMPLE = Path(__file__).parent.parent / "examples" / "h200-128node-pretraining.json"


@pytest.mark.parametrize(("name", "closest"), [("H200", "H200-SXM-141GB"), ("h100 sxm", "H100-SXM5-80GB"),
                                               ("MI300", "MI300X-192GB"), ("A100-80GB", "A100-SXM4-80GB")])
def test_the_closest_catalogued_ids(name, closest):
    assert closest in load_catalogue().closest_gpus(name)


def test_an_unknown_gpu_id_alone_exits_2_naming_the_field_and_the_closest_id(tmp_path: Path):
    submission = json.loads(EXAMPLE.read_text())
    submission["quote"]["node_groups"][0]["gpu"] = {"model": "H200", "count": 8}
    path = tmp_path / "quote.json"
    path.write_text(json.dumps(submission))

    result = CliRunner().invoke(main, ["evaluate", str(path), "--no-search", "--no-remedies"])

    assert result.exit_code == 2
    assert "/quote/node_groups/0/gpu/model: GPU 'H200' is not in the catalogue" in result.output
    assert "did you mean H200-SXM-141GB?" in result.output

"""The API and the command line read a submission with one reader: the same bytes are refused in the same words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from service.cli import main

EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "dgx-h100-70b-finetune.json").read_text()

BODIES = {
    "repeated-name": EXAMPLE.replace('"vendor": ', '"vendor": "Someone Else", "vendor": ', 1),
    "too-deep": '{"a":' * 65 + "1" + "}" * 65,
    "nul": EXAMPLE.replace('"quote_id": "', '"quote_id": "\\u0000', 1),
    "lone-surrogate": EXAMPLE.replace('"quote_id": "', '"quote_id": "\\ud800', 1),
    "inexact-integer": json.dumps({**json.loads(EXAMPLE), "schema_version": 2**60}),
    "not-json": EXAMPLE[:300],
}


@pytest.mark.parametrize("name", BODIES)
def test_a_body_the_api_refuses_is_refused_by_the_cli_in_the_same_words(as_role, tmp_path, name):
    body = BODIES[name]
    problem = as_role("submitter").post("/api/v1/submissions", data=body,
                                        headers={"Content-Type": "application/json"}).get_json()
    path = tmp_path / f"{name}.json"
    path.write_text(body)

    result = CliRunner().invoke(main, ["validate", str(path)])

    assert problem["status"] in (400, 422) and result.exit_code == 2
    assert problem["detail"].startswith("the body ")
    assert f"error: {path}{problem['detail'].removeprefix('the body')}" in result.output
    for error in problem.get("errors", []):
        assert f"  {error['pointer']}: {error['message']}" in result.output

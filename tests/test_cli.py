"""The command line: exit codes, clear errors for bad input, the table and the record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from service.cli import main
from tests.checks.fixture_support import load_fixture, load_fixture_policy

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "dgx-h100-70b-finetune.json"


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def _write(tmp_path: Path, document: object | str, name: str = "submission.json") -> str:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


@pytest.fixture
def submission() -> dict:
    return json.loads(EXAMPLE.read_text())


def test_validate_accepts_the_example() -> None:
    code, output = _run("validate", str(EXAMPLE))

    assert code == 0 and "valid submission" in output


def test_a_misspelt_field_is_named_with_the_closest_known_one(tmp_path: Path, submission: dict) -> None:
    group = submission["quote"]["node_groups"][0]
    group["host_memory_gb"] = group.pop("host_memory_gib")

    code, output = _run("validate", _write(tmp_path, submission))

    assert code == 2
    assert "/quote/node_groups/0/host_memory_gb" in output
    assert "did you mean 'host_memory_gib'?" in output


def test_a_negative_gpu_count_names_its_pointer_and_the_minimum(tmp_path: Path, submission: dict) -> None:
    submission["quote"]["node_groups"][0]["gpu"]["count"] = -8

    code, output = _run("validate", _write(tmp_path, submission))

    assert code == 2
    assert "/quote/node_groups/0/gpu/count: must be ≥ 1, found -8" in output


def test_a_negative_quantity_in_sourced_form_names_the_value_pointer(tmp_path: Path, submission: dict) -> None:
    submission["workload"]["training"]["gpus"] = {"value": -1, "source": "assumption"}

    code, output = _run("validate", _write(tmp_path, submission))

    assert code == 2 and "/workload/training/gpus/value: must be ≥ 1, found -1" in output


def test_truncated_json_is_a_clear_error(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()[:500]

    code, output = _run("validate", _write(tmp_path, text))

    assert code == 2
    assert "is not valid JSON" in output and "line" in output and "Traceback" not in output


@pytest.mark.parametrize(("pointer", "value", "expected"), [
    ("/quote/node_groups/0/count", "sixteen", "expected an integer, found text 'sixteen'"),
    ("/workload/training/sequence_length", 8192.5, "expected an integer, found number 8192.5"),
    ("/workload/training/flash_attention", "yes", "expected true or false, found text 'yes'"),
    ("/quote/node_groups", {}, "expected a list, found object"),
    ("/workload/training/parallelism/sharding", "zero4", "'zero4' is not one of ddp, zero1"),
])
def test_wrong_types_name_pointer_and_expectation(tmp_path: Path, submission: dict, pointer: str, value: object,
                                                  expected: str) -> None:
    *parents, leaf = pointer.strip("/").split("/")
    node = submission
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[leaf] = value

    code, output = _run("validate", _write(tmp_path, submission))

    assert code == 2 and f"{pointer}: {expected}" in output


def test_a_ten_megabyte_string_field_is_rejected_without_echoing_it(tmp_path: Path, submission: dict) -> None:
    submission["quote"]["vendor"] = "x" * (10 * 1024 * 1024)

    code, output = _run("validate", _write(tmp_path, submission))

    assert code == 2
    assert "bytes; the limit is 2,097,152 bytes" in output
    assert "/quote/vendor: text of 10,485,760 characters exceeds the limit of 200" in output
    assert len(output) < 1000


def test_a_long_string_under_the_size_limit_names_the_field_and_its_limit(tmp_path: Path, submission: dict) -> None:
    submission["quote"]["vendor"] = "x" * 100_000

    code, output = _run("validate", _write(tmp_path, submission))

    assert code == 2
    assert "/quote/vendor: text of 100,000 characters exceeds the limit of 200" in output
    assert len(output) < 1000


def test_a_missing_file_and_a_non_utf8_file_are_input_errors(tmp_path: Path) -> None:
    assert _run("validate", str(tmp_path / "nope.json"))[0] == 2
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")

    code, output = _run("validate", str(binary))

    assert code == 2 and "not UTF-8" in output


def test_evaluate_prints_one_row_per_check_and_writes_the_record(tmp_path: Path) -> None:
    out = tmp_path / "out" / "record.json"

    code, output = _run("evaluate", str(EXAMPLE), "--out", str(out))

    record = json.loads(out.read_text())
    assert code == (1 if record["verdict"] == "fail" else 0)
    for check in record["checks"]:
        assert check["id"] in output
    assert f"verdict: {record['verdict'].upper()}" in output


def test_evaluate_json_output_is_the_record_and_satisfies_its_schema() -> None:
    import schemas

    code, output = _run("evaluate", str(EXAMPLE), "--format", "json")

    record = json.loads(output)
    assert schemas.validate("record", record) == []
    assert record["policy"]["digest"].startswith("sha256:")


def test_a_failed_check_exits_1(tmp_path: Path) -> None:
    fixture = load_fixture(ROOT / "tests" / "checks" / "peak_memory" / "fail_dgx_h100_7b_ddp.json")

    code, output = _run("evaluate", _write(tmp_path, fixture))

    assert code == 1 and "FAIL" in output


def test_an_invalid_policy_exits_2(tmp_path: Path) -> None:
    policy = json.loads((ROOT / "rules" / "data" / "policy.default.json").read_text())
    policy["memory"]["headroom_fraction"] = 1.5

    code, output = _run("evaluate", str(EXAMPLE), "--policy", _write(tmp_path, policy, "policy.json"))

    assert code == 2 and "/memory/headroom_fraction: must be ≤ 1, found 1.5" in output


def test_a_custom_policy_is_named_with_its_digest(tmp_path: Path) -> None:
    policy = json.loads((ROOT / "rules" / "data" / "policy.default.json").read_text())
    policy["policy_id"] = "acme-strict"
    path = _write(tmp_path, policy, "policy.json")

    code, output = _run("evaluate", str(EXAMPLE), "--policy", path, "--format", "json")

    import hashlib
    record = json.loads(output)
    assert record["policy"]["id"] == "acme-strict"
    assert record["policy"]["digest"] == "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_help_documents_the_exit_codes() -> None:
    for command in ([], ["evaluate"], ["validate"]):
        code, output = _run(*command, "--help")
        assert code == 0 and "Exit codes" in output and "2  the input is invalid" in output


def test_the_console_script_runs_as_a_process() -> None:
    result = subprocess.run([sys.executable, "-m", "service.cli", "validate", str(EXAMPLE)],
                            capture_output=True, text=True, cwd=ROOT, timeout=60)

    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("command", ["validate", "evaluate"])
def test_a_bidi_override_in_free_text_exits_2_naming_the_field(tmp_path: Path, submission: dict, command: str) -> None:
    # "EUR \u202e000,052\u202c" displays as "EUR 250,000": refused, not evaluated
    submission["quote"]["notes"] = "Total EUR \u202e000,052\u202c"
    submission["quote"]["node_groups"][0]["name"] = "gpu\u200b"

    code, output = _run(command, _write(tmp_path, submission))

    assert code == 2
    assert "/quote/notes: contains U+202E RIGHT-TO-LEFT OVERRIDE, U+202C POP DIRECTIONAL FORMATTING" in output
    assert "/quote/node_groups/0/name: contains U+200B ZERO WIDTH SPACE" in output


def test_a_lone_surrogate_in_a_file_exits_2_naming_the_member(tmp_path: Path, submission: dict) -> None:
    text = json.dumps(submission).replace('"quote_id": "', '"x\\udc00": 1, "quote_id": "\\ud800', 1)

    code, output = _run("evaluate", _write(tmp_path, text))

    assert code == 2
    assert "/quote/quote_id: contains U+D800 (a lone surrogate" in output
    assert "/quote/x<U+DC00>: contains U+DC00 (a lone surrogate" in output


# --- JSON as the API reads it (schemas/json_reader.py) ---------------------------------------------------------

REPEATED_VENDOR = ("member name 'vendor' appears more than once in one object",
                   "/quote/vendor: appears more than once in this object")


@pytest.mark.parametrize("command", ["validate", "evaluate"])
def test_a_repeated_member_name_exits_2_naming_its_pointer(tmp_path: Path, command: str) -> None:
    # Which of two equal names wins differs between JSON readers: the file would mean two different quotes.
    text = EXAMPLE.read_text().replace('"vendor": ', '"vendor": "Someone Else", "vendor": ', 1)
    path = _write(tmp_path, text)

    code, output = _run(command, path)

    assert code == 2
    assert f"{path} is not acceptable JSON: {REPEATED_VENDOR[0]}" in output
    assert REPEATED_VENDOR[1] in output


@pytest.mark.parametrize("command", ["validate", "evaluate"])
def test_nesting_beyond_64_levels_exits_2_without_a_traceback(tmp_path: Path, command: str) -> None:
    path = _write(tmp_path, '{"a":' * 5000 + "1" + "}" * 5000)

    code, output = _run(command, path)

    assert code == 2 and "more than 64 levels deep" in output and "Traceback" not in output


def test_nul_in_a_file_exits_2_naming_the_member(tmp_path: Path, submission: dict) -> None:
    submission["quote"]["vendor"] = "Acme\u0000"

    code, output = _run("validate", _write(tmp_path, submission))

    assert code == 2 and "/quote/vendor: must not contain U+0000 (NUL)" in output


def test_an_integer_json_does_not_carry_exactly_exits_2_naming_it(tmp_path: Path, submission: dict) -> None:
    submission["quote"]["line_items"][0]["quantity"] = 2**60

    code, output = _run("validate", _write(tmp_path, submission))

    assert code == 2
    assert "/quote/line_items/0/quantity: 1152921504606846976 is outside the numbers JSON carries exactly" in output


def test_a_byte_order_mark_is_ignored_as_the_api_ignores_it(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + EXAMPLE.read_bytes())

    assert _run("validate", str(path))[0] == 0


def test_an_incomplete_evaluation_fails_closed_unless_allowed(tmp_path: Path):
    """A check left undecided (here data-feed, without bytes_per_token under a policy that gives no default for it)
    and none failed: verdict INCOMPLETE, exit 1, so that a CI gate on the exit code does not pass a quote part of
    which was never judged; --allow-incomplete exits 0 for it, and never for a failure."""
    fixture = Path(__file__).parent / "checks" / "data_feed" / "insufficient_data_no_bytes_per_token.json"
    path = tmp_path / "incomplete.json"
    path.write_text(json.dumps(load_fixture(fixture)))
    policy = _write(tmp_path, load_fixture_policy(fixture).document, "policy.json")
    code, out = _run("evaluate", str(path), "--policy", policy, "--no-search", "--no-remedies", "--format", "json")
    assert json.loads(out)["verdict"] == "incomplete"
    assert code == 1
    code, _ = _run("evaluate", str(path), "--policy", policy, "--no-search", "--no-remedies", "--allow-incomplete")
    assert code == 0
    failing = Path(__file__).parent.parent / "examples" / "fail-70b-ddp-one-rack.json"
    code, _ = _run("evaluate", str(failing), "--no-search", "--no-remedies", "--allow-incomplete")
    assert code == 1
    code, help_text = _run("evaluate", "--help")
    assert "--allow-incomplete" in help_text and "INCOMPLETE" in help_text


def test_a_field_typed_in_another_unit_is_told_the_conversion(tmp_path: Path, submission: dict) -> None:
    """write_gbps for write_gbs: the suggestion says GB/s and the factor of 8: the figure is converted, not copied."""
    storage = submission["quote"]["storage"]
    storage["write_gbps"] = storage.pop("write_gbs")

    code, output = _run("evaluate", _write(tmp_path, submission))

    assert code == 2
    assert ("/quote/storage/write_gbps: unknown field 'write_gbps'; did you mean 'write_gbs'? (write_gbs is in "
            "GB/s, gigabytes per second: a figure in Gb/s is 8 times larger, divide it by 8)") in output

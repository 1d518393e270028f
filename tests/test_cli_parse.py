"""`quotecheck parse KIND FILE`: the parsers' JSON on standard output, exit 2 naming the line for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import parsers
from service.cli import main

DATA = Path(__file__).parent / "data"


def _run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_parse_topo_prints_each_gpus_nearest_nic_and_link():
    # Given the Princeton Della matrix: two A100s, one per socket, each beside its own mlx5 port
    code, out, _ = _run("parse", "topo", str(DATA / "topology" / "princeton_della_2x_a100_two_sockets.txt"))

    assert code == 0
    result = json.loads(out)
    assert [(g["name"], g["numa_node"], g["nearest_nic"]) for g in result["gpus"]] == [
        ("GPU0", 0, {"name": "mlx5_0", "device": "mlx5_0", "link": "NODE"}),
        ("GPU1", 1, {"name": "mlx5_1", "device": "mlx5_1", "link": "NODE"}),
    ]
    assert result["links"]["GPU0"]["GPU1"] == "SYS"


def test_parse_nccl_prints_the_table_and_the_average_bus_bandwidth():
    code, out, _ = _run("parse", "nccl", str(DATA / "nccl" / "all_reduce_a3mega_2x8_h100.txt"))

    assert code == 0
    result = json.loads(out)
    assert set(result) == {"collective", "nranks", "rows", "avg_busbw_gbs", "peak_busbw_gbs"}
    assert (result["collective"], result["nranks"], result["avg_busbw_gbs"], result["peak_busbw_gbs"]) == (
        "all_reduce", 16, 70.742, 338.82)
    assert set(result["rows"][0]) == {"size_bytes", "count", "type", "redop", "out_of_place", "in_place"}


def test_parse_nccl_takes_the_collective_for_output_that_does_not_name_it():
    path = str(DATA / "nccl" / "all_reduce_dgx_a100_2node_old_error_column.txt")

    code, out, _ = _run("parse", "nccl", path, "--collective", "all_reduce")

    assert code == 0 and json.loads(out)["collective"] == "all_reduce"


@pytest.mark.parametrize(("kind", "path"), [
    ("topo", "topology/hgx_8x_nv18_10nic_tabs_ansi.txt"),
    ("nccl", "nccl/all_gather_2x_rtx2080ti_pcie.txt"),
    ("fio", "fio/seq_rw_4k_fio3.33_interrupted.json"),
])
def test_the_printed_json_is_the_parsers_result(kind: str, path: str):
    text = (DATA / path).read_text(encoding="utf-8")

    code, out, _ = _run("parse", kind, str(DATA / path))

    assert code == 0 and json.loads(out) == parsers.parse(kind, text)


@pytest.mark.parametrize(("kind", "text", "expected"), [
    ("torch-memory", "max_memory_allocated: 1073741824\nmax_memory_reserved: 2147483648\n",
     {"max_allocated_gib": 1.0, "max_reserved_gib": 2.0}),
    ("scaling-csv", "gpus,tokens_per_s\n8,1000\n16,1900\n",
     {"points": [{"gpus": 8, "tokens_per_s": 1000.0}, {"gpus": 16, "tokens_per_s": 1900.0}]}),
    ("power-csv", "timestamp,watts\n0,500\n1,700\n", {"scope": None}),
])
def test_standard_input_is_read_for_a_dash(kind: str, text: str, expected: dict):
    code, out, _ = _run("parse", kind, "-", stdin=text)

    assert code == 0
    assert expected.items() <= json.loads(out).items()


def test_a_truncated_matrix_exits_2_naming_the_line_and_what_was_expected(tmp_path: Path):
    # Given the HGX matrix cut after its NIC5 row, as a paste that stopped early
    lines = (DATA / "topology" / "hgx_8x_nv18_10nic_tabs_ansi.txt").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "topo.txt"
    path.write_text("\n".join(lines[:15]) + "\n", encoding="utf-8")

    code, out, err = _run("parse", "topo", str(path))

    assert (code, out) == (2, "")
    assert err == f"error: {path}: line 16: expected the row for NIC6 (18 devices in the header), found end of input\n"


def test_nccl_output_cut_before_its_average_exits_2():
    text = "\n".join((DATA / "nccl" / "all_reduce_a3mega_2x8_h100.txt").read_text().splitlines()[:60])

    code, _, err = _run("parse", "nccl", "-", stdin=text)

    assert code == 2
    assert "standard input: line 60: expected '# Avg bus bandwidth' after the last row, found end of input" in err


def test_an_unknown_kind_is_a_usage_error_listing_the_kinds():
    code, _, err = _run("parse", "iperf", "-", stdin="")

    assert code == 2 and "topo" in err and "power-csv" in err


def test_a_missing_file_and_a_binary_file_exit_2(tmp_path: Path):
    binary = tmp_path / "capture.bin"
    binary.write_bytes(b"\xff\xfe\x00GPU0")

    assert _run("parse", "topo", str(tmp_path / "absent.txt"))[0] == 2
    code, _, err = _run("parse", "topo", str(binary))
    assert code == 2 and "is not UTF-8 text" in err


def test_collective_is_refused_for_other_kinds():
    code, _, err = _run("parse", "fio", "-", "--collective", "all_reduce", stdin="{}")

    assert code == 2 and "--collective applies to nccl output only" in err


def test_help_lists_the_kinds_and_the_exit_codes():
    code, out, _ = _run("parse", "--help")

    assert code == 0
    assert "nvidia-smi topo -m" in out and "fio --output-format=json" in out and "Exit codes" in out


def test_validate_refuses_a_submission_whose_pasted_matrix_is_cut_short(tmp_path: Path):
    # Given the example submission with the Della matrix pasted up to its GPU0 row
    submission = json.loads((Path(__file__).parent.parent / "examples" / "dgx-h100-70b-finetune.json").read_text())
    matrix = (DATA / "topology" / "princeton_della_2x_a100_two_sockets.txt").read_text(encoding="utf-8")
    submission["measurements"] = {"topology": {"nvidia_smi_topo_m": "\n".join(matrix.splitlines()[:4])}}
    path = tmp_path / "submission.json"
    path.write_text(json.dumps(submission), encoding="utf-8")

    code, _, err = _run("validate", str(path))

    assert code == 2
    assert ("/measurements/topology/nvidia_smi_topo_m: nvidia-smi topo -m output cannot be read: line 5: expected the "
            "row for GPU1 (4 devices in the header), found end of input") in err

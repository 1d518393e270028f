"""Raw diagnostics in a submission's measurements: accepted by the schema, read by parsers, refused by line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rules.artifacts import FIO, NCCL_TESTS, TOPOLOGY, located, parse
from rules.errors import InvalidSubmission
from rules.evaluate import validate_submission
from tests.checks.fixture_support import load_base

DATA = Path(__file__).parent / "data"


def sample(path: str) -> str:
    return (DATA / path).read_text(encoding="utf-8")


FIO_TEXT = sample("fio/seq_rw_4k_fio3.33_interrupted.json")


def with_measurements(**measurements: object) -> dict:
    submission = load_base("4x-dgx-h100-llama3-8b-fsdp-fine-tune")
    submission["measurements"] = measurements
    return submission


def problems(submission: dict) -> list[tuple[str, str]]:
    with pytest.raises(InvalidSubmission) as caught:
        validate_submission(submission)
    return [(p.pointer, p.message) for p in caught.value.problems]


def test_every_kind_of_raw_artifact_is_accepted_where_the_schema_puts_it():
    # Given real outputs for the topology, nccl-tests and fio, and the documented layouts of the others
    submission = with_measurements(
        topology={"nvidia_smi_topo_m": sample("topology/princeton_della_2x_a100_two_sockets.txt"),
                  "compute_nics": ["mlx5_0", "mlx5_1"]},
        nccl_tests=[{"nodes": 2, "raw": sample("nccl/all_reduce_dgx_a100_2node_old_error_column.txt"),
                     "collective": "all_reduce"}],
        fio=FIO_TEXT,
        peak_memory=[{"torch_memory": "max_memory_allocated: 1073741824\nmax_memory_reserved: 2147483648"}],
        scaling_csv="gpus,tokens_per_s\n8,80000\n16,150000\n",
        power_csv="timestamp,node,watts\n0,n1,9000\n1,n1,9100\n",
    )

    assert validate_submission(submission) is None


def test_fio_json_is_taken_as_the_text_fio_printed_not_as_an_object():
    # as an object, each of fio's numbers would become an input of the record
    document = json.loads(FIO_TEXT[FIO_TEXT.index("{"):])

    [(pointer, message)] = problems(with_measurements(fio=document))

    assert pointer == "/measurements/fio" and message.startswith("expected text, found object")


def test_a_truncated_topology_matrix_is_refused_at_its_pointer_with_the_line():
    lines = sample("topology/hgx_8x_nv18_10nic_tabs_ansi.txt").replace("\x1b[4m", "").replace("\x1b[0m", "")
    cut = "\n".join(lines.splitlines()[:15]) + "\n"

    assert problems(with_measurements(topology={"nvidia_smi_topo_m": cut})) == [(
        "/measurements/topology/nvidia_smi_topo_m",
        "nvidia-smi topo -m output cannot be read: line 16: expected the row for NIC6 (18 devices in the header), "
        "found end of input")]


def test_nccl_output_cut_short_and_a_collective_that_contradicts_the_output_are_refused():
    text = sample("nccl/broadcast_2x_rtx2080ti_pcie.txt")
    cut = "\n".join(text.splitlines()[:30])

    found = problems(with_measurements(nccl_tests=[{"raw": cut}, {"raw": text, "collective": "all_reduce"}]))

    assert found == [
        ("/measurements/nccl_tests/0/raw",
         "nccl-tests output cannot be read: line 30: expected '# Avg bus bandwidth' after the last row, found end "
         "of input"),
        ("/measurements/nccl_tests/1/raw",
         "nccl-tests output cannot be read: line 1: expected the output of all_reduce_perf, found broadcast_perf"),
    ]


def test_a_peak_memory_run_needs_a_figure_or_the_torch_output():
    found = problems(with_measurements(peak_memory=[{"micro_batch": 2}]))

    assert ("/measurements/peak_memory/0/allocated_gib", "required field 'allocated_gib' is missing") in found
    assert ("/measurements/peak_memory/0/torch_memory", "required field 'torch_memory' is missing") in found


def test_malformed_csvs_and_torch_output_name_their_line():
    found = problems(with_measurements(scaling_csv="gpus,tokens_per_s\nx,1\n", power_csv="time\n1\n",
                                       peak_memory=[{"torch_memory": "nothing here"}]))

    assert [pointer for pointer, _ in found] == ["/measurements/peak_memory/0/torch_memory",
                                                 "/measurements/scaling_csv", "/measurements/power_csv"]
    assert found[1][1] == ("scaling-run CSV output cannot be read: line 2: expected gpus as a positive integer, "
                           "found 'x'")
    assert all("line " in message for _, message in found)


def test_fio_text_that_is_not_fio_json_names_the_line():
    found = problems(with_measurements(fio='{"fio version": "fio-3.33"}'))

    assert found[0][0] == "/measurements/fio" and found[0][1].startswith(
        "fio --output-format=json output cannot be read: line 1: expected")


def test_terminal_escapes_in_a_pasted_matrix_are_refused_as_hidden_text():
    # the parsers take ESC[4m underlines; a submission's text may not hold control characters
    matrix = sample("topology/hgx_8x_nv18_10nic_tabs_ansi.txt")

    found = problems(with_measurements(topology={"nvidia_smi_topo_m": matrix}))

    assert found[0][0] == "/measurements/topology/nvidia_smi_topo_m" and "U+001B" in found[0][1]


def test_located_walks_every_item_of_an_array():
    submission = with_measurements(nccl_tests=[{"raw": "a"}, {"nodes": 2}, {"raw": "b"}])

    assert [(p, v) for p, v, _ in located(submission, NCCL_TESTS)] == [
        ("/measurements/nccl_tests/0/raw", "a"), ("/measurements/nccl_tests/2/raw", "b")]
    assert list(located(submission, TOPOLOGY)) == []


def test_a_parse_is_the_callers_own_copy():
    first = parse(FIO, FIO_TEXT)
    first["write_gbs"] = 0

    assert parse(FIO, FIO_TEXT)["write_gbs"] == pytest.approx(0.161128721)

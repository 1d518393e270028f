"""parsers.nccl_tests on real nccl-tests runs (tests/data/README.md names each source).

The expected figures are the samples' own: their "# Avg bus bandwidth" line, their largest busbw cell
and their first and last rows.
"""

from pathlib import Path

import pytest

from parsers import ParseError, nccl_tests

DATA = Path(__file__).parents[1] / "data" / "nccl"


def sample(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def parse_error(text: str, **options: str) -> str:
    with pytest.raises(ParseError) as caught:
        nccl_tests.parse(text, **options)
    return str(caught.value)


def all_busbw(result: dict) -> list[float]:
    return [row[run]["busbw_gbs"] for row in result["rows"] for run in ("out_of_place", "in_place")]


# ---------------------------------------------------------------- one sample per collective and layout


def test_all_reduce_on_two_a3_mega_nodes_with_current_header():
    result = nccl_tests.parse(sample("all_reduce_a3mega_2x8_h100.txt"))

    assert (result["collective"], result["nranks"], len(result["rows"])) == ("all_reduce", 16, 31)
    assert result["avg_busbw_gbs"] == 70.742
    assert result["peak_busbw_gbs"] == 338.82  # out-of-place busbw at 8 GiB
    assert result["rows"][0] == {
        "size_bytes": 8,
        "count": 2,
        "type": "float",
        "redop": "sum",
        "out_of_place": {"time_us": 135.8, "algbw_gbs": 0.0, "busbw_gbs": 0.0},
        "in_place": {"time_us": 123.5, "algbw_gbs": 0.0, "busbw_gbs": 0.0},
    }
    assert result["rows"][-1]["size_bytes"] == 8589934592
    assert result["rows"][-1]["in_place"] == {"time_us": 47743.0, "algbw_gbs": 179.92, "busbw_gbs": 337.35}


def test_all_gather_prints_redop_none_and_rows_of_size_zero():
    result = nccl_tests.parse(sample("all_gather_2x_rtx2080ti_pcie.txt"))

    assert (result["collective"], result["nranks"], len(result["rows"])) == ("all_gather", 2, 28)
    assert result["avg_busbw_gbs"] == 1.6651
    assert result["peak_busbw_gbs"] == 3.84
    assert [r["size_bytes"] for r in result["rows"][:3]] == [0, 0, 32]
    assert {r["redop"] for r in result["rows"]} == {"none"}


def test_broadcast_with_root_zero():
    result = nccl_tests.parse(sample("broadcast_2x_rtx2080ti_pcie.txt"))

    assert (result["collective"], result["nranks"]) == ("broadcast", 2)
    assert result["avg_busbw_gbs"] == 5.07658
    assert result["peak_busbw_gbs"] == 11.09
    assert result["rows"][-1]["out_of_place"] == {"time_us": 96800.0, "algbw_gbs": 11.09, "busbw_gbs": 11.09}


def test_alltoall_with_unchecked_in_place_runs():
    result = nccl_tests.parse(sample("alltoall_2x_rtx2080ti_pcie.txt"))

    assert (result["collective"], result["nranks"], len(result["rows"])) == ("alltoall", 2, 28)
    assert result["avg_busbw_gbs"] == 2.06935
    assert result["peak_busbw_gbs"] == 4.73  # in-place at 1 GiB
    assert result["rows"][-1]["in_place"]["busbw_gbs"] == 4.73


def test_pre_2_10_layout_without_root_and_with_float_error_column():
    # The DGX A100 sample has no header and no command line: the collective comes from the caller
    result = nccl_tests.parse(sample("all_reduce_dgx_a100_2node_old_error_column.txt"), collective="all_reduce_perf")

    assert (result["collective"], result["nranks"], len(result["rows"])) == ("all_reduce", None, 30)
    assert result["avg_busbw_gbs"] == 53.7098
    assert result["peak_busbw_gbs"] == 188.70
    assert result["rows"][-1] == {
        "size_bytes": 4294967296,
        "count": 1073741824,
        "type": "float",
        "redop": "sum",
        "out_of_place": {"time_us": 42715.0, "algbw_gbs": 100.55, "busbw_gbs": 188.53},
        "in_place": {"time_us": 42677.0, "algbw_gbs": 100.64, "busbw_gbs": 188.70},
    }


def test_old_layout_with_na_errors_inside_an_indented_markdown_list():
    result = nccl_tests.parse(sample("all_reduce_dgx2h_superpod_error_na.txt"))

    assert (result["collective"], result["nranks"], len(result["rows"])) == (None, None, 31)
    assert result["avg_busbw_gbs"] == 16.2513
    assert result["peak_busbw_gbs"] == 81.57
    assert result["rows"][-1]["out_of_place"]["busbw_gbs"] == 81.53  # the figure DeepOps quotes


def test_mpirun_tag_output_prefixes_are_stripped():
    result = nccl_tests.parse(sample("all_reduce_p5_mpirun_tagged_no_header.txt"))

    assert (result["collective"], result["nranks"], len(result["rows"])) == (None, None, 32)
    assert result["avg_busbw_gbs"] == 156.742
    assert result["peak_busbw_gbs"] == 483.35
    assert result["rows"][-1]["size_bytes"] == 17179869184


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.txt")))
def test_average_line_is_the_mean_busbw_of_every_row_and_both_runs(name):
    # nccl-tests common.cu adds each run's busbw and divides by their number; the table's cells
    # are rounded to 0.01 GB/s, so the recomputed mean may differ from the printed one by 0.005
    result = nccl_tests.parse(sample(name))
    busbw = all_busbw(result)

    assert sum(busbw) / len(busbw) == pytest.approx(result["avg_busbw_gbs"], abs=0.005)
    assert result["peak_busbw_gbs"] == max(busbw)


# ---------------------------------------------------------------- the collective: output and argument


def test_collective_argument_agrees_with_the_binary_in_the_output():
    result = nccl_tests.parse(sample("broadcast_2x_rtx2080ti_pcie.txt"), collective="broadcast")

    assert result["collective"] == "broadcast"


def test_collective_argument_contradicting_the_output_is_rejected():
    assert parse_error(sample("broadcast_2x_rtx2080ti_pcie.txt"), collective="all_reduce") == (
        "line 1: expected the output of all_reduce_perf, found broadcast_perf"
    )


def test_two_runs_pasted_together_are_rejected():
    text = sample("all_gather_2x_rtx2080ti_pcie.txt") + sample("broadcast_2x_rtx2080ti_pcie.txt")

    assert parse_error(text) == (
        "line 42: expected the output of one nccl-tests binary, found all_gather_perf (line 1), "
        "broadcast_perf (line 42)"
    )


def test_two_runs_of_one_binary_are_rejected_after_the_first_average():
    text = sample("broadcast_2x_rtx2080ti_pcie.txt") * 2

    # the second copy starts on line 42; its first row (line 52) follows the first run's average
    assert parse_error(text) == "line 52: expected one nccl-tests run, found more after '# Avg bus bandwidth'"


# ---------------------------------------------------------------- malformed and truncated input


def test_row_cut_mid_line_names_the_line_and_the_columns():
    lines = sample("all_reduce_a3mega_2x8_h100.txt").splitlines()
    lines[61] = "  8589934592    2147483648     float     sum      -1    47535  180.71"  # line 62

    assert parse_error("\n".join(lines)) == (
        "line 62: expected 13 columns (size count type redop root time algbw busbw #wrong time algbw busbw #wrong)"
        ", found 7"
    )


def test_output_cut_before_the_average_line_is_truncated():
    lines = sample("all_reduce_a3mega_2x8_h100.txt").splitlines()

    assert parse_error("\n".join(lines[:60])) == (
        "line 60: expected '# Avg bus bandwidth' after the last row, found end of input"
    )


def test_cell_that_is_not_a_number_is_named():
    text = sample("broadcast_2x_rtx2080ti_pcie.txt").replace("96800   11.09", "96800   ERR")

    assert parse_error(text) == "line 38: expected the out-of-place algbw (GB/s) as a number, found 'ERR'"


def test_old_layout_row_with_a_column_too_many_is_rejected():
    lines = sample("all_reduce_dgx_a100_2node_old_error_column.txt").splitlines()
    lines[4] = lines[4].replace("sum", "sum      -1")  # a root cell the header does not have

    assert parse_error("\n".join(lines)) == (
        "line 5: expected 12 columns (size count type redop time algbw busbw error time algbw busbw error), found 13"
    )


def test_output_without_result_rows_is_rejected():
    text = "# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor)\n#\n# Using devices\n"

    assert parse_error(text) == "line 4: expected nccl-tests result rows (size count type ... busbw #wrong), found none"

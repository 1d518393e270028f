"""Tests for rules.estimates.nccl_tests: parsing nccl-tests output and the busbw a job relies on."""

import pytest

from rules.estimates.nccl_tests import (
    NcclTestsRun,
    measured_busbw,
    parse_nccl_tests_avg_busbw_gbs,
    parse_nccl_tests_output,
    peak_busbw_gbs,
)

# A realistic all_reduce_perf run on one 8×H100 node, in the layout nccl-tests prints (header comments,
# device list, result table with out-of-place and in-place blocks, footer). Numbers are representative
# of the ~370 GB/s ring busbw NCCL maintainers quote for H100 NVLink (nccl-tests issue #212).
ALL_REDUCE_PERF_8XH100 = "\n".join(
    [
        "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 8589934592 step: 4(factor) warmup iters: 5"
        " iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
        "#  Rank  0 Group  0 Pid  41233 on   node-001 device  0 [0x18] NVIDIA H100 80GB HBM3",
        "#  Rank  1 Group  0 Pid  41233 on   node-001 device  1 [0x2a] NVIDIA H100 80GB HBM3",
        "#  Rank  2 Group  0 Pid  41233 on   node-001 device  2 [0x3a] NVIDIA H100 80GB HBM3",
        "#  Rank  3 Group  0 Pid  41233 on   node-001 device  3 [0x5d] NVIDIA H100 80GB HBM3",
        "#  Rank  4 Group  0 Pid  41233 on   node-001 device  4 [0x9a] NVIDIA H100 80GB HBM3",
        "#  Rank  5 Group  0 Pid  41233 on   node-001 device  5 [0xab] NVIDIA H100 80GB HBM3",
        "#  Rank  6 Group  0 Pid  41233 on   node-001 device  6 [0xba] NVIDIA H100 80GB HBM3",
        "#  Rank  7 Group  0 Pid  41233 on   node-001 device  7 [0xdb] NVIDIA H100 80GB HBM3",
        "NCCL version 2.21.5+cuda12.4",
        "#",
        "#                                                              out-of-place              "
        "         in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong    "
        " time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)           "
        " (us)  (GB/s)  (GB/s)",
        "     1048576        262144     float     sum      -1    29.61   35.41   61.97      0   "
        " 29.14   35.98   62.97      0",
        "     4194304       1048576     float     sum      -1    50.12   83.69  146.45      0   "
        " 49.80   84.22  147.39      0",
        "    16777216       4194304     float     sum      -1    114.9  146.02  255.53      0   "
        " 114.2  146.91  257.09      0",
        "    67108864      16777216     float     sum      -1    343.7  195.26  341.70      0   "
        " 342.9  195.71  342.49      0",
        "   268435456      67108864     float     sum      -1   1293.6  207.51  363.15      0  "
        " 1291.8  207.80  363.65      0",
        "  1073741824     268435456     float     sum      -1   5083.4  211.23  369.65      0  "
        " 5080.1  211.36  369.89      0",
        "  4294967296    1073741824     float     sum      -1    20268  211.91  370.84      0   "
        " 20261  211.98  370.97      0",
        "  8589934592    2147483648     float     sum      -1    40511  212.04  371.07      0   "
        " 40497  212.11  371.20      0",
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 285.376",
        "#",
        "",
    ]
)




def test_parse_all_reduce_perf_output():
    rows = parse_nccl_tests_output(ALL_REDUCE_PERF_8XH100)
    assert len(rows) == 8
    assert rows[0].size_bytes == 1048576 and rows[0].count == 262144
    assert rows[0].dtype == "float" and rows[0].redop == "sum" and rows[0].root == -1
    last = rows[-1]
    assert last.size_bytes == 8589934592
    assert last.out_of_place_busbw_gbs == pytest.approx(371.07)
    assert last.in_place_busbw_gbs == pytest.approx(371.20)
    assert last.out_of_place_wrong == 0 and last.in_place_wrong == 0
    assert last.busbw_gbs == pytest.approx(371.20)
    assert peak_busbw_gbs(rows) == pytest.approx(371.20)
    assert peak_busbw_gbs(rows[:3], min_size_bytes=4194304) == pytest.approx(257.09)
    assert parse_nccl_tests_avg_busbw_gbs(ALL_REDUCE_PERF_8XH100) == pytest.approx(285.376)


def test_parse_old_format_without_root_and_with_error_column_and_mpi_prefixes():
    # Older nccl-tests print no root column and a float "error" (NVIDIA/nccl issue #1244 output).
    raw = (
        "[1,0]<stdout>:#       size         count      type   redop     time   algbw   busbw  error"
        "     time   algbw   busbw  error\n"
        "[1,0]<stdout>:   268435456      67108864     float     sum   2952.1   90.93  170.49  2e-07"
        "   2950.3   90.99  170.60  2e-07\n"
        "[1,0]<stdout>:# Avg bus bandwidth    : 170.5\n"
    )
    rows = parse_nccl_tests_output(raw)
    assert len(rows) == 1
    assert rows[0].root is None and rows[0].redop == "sum"
    assert rows[0].out_of_place_wrong is None
    assert rows[0].busbw_gbs == pytest.approx(170.60)
    assert parse_nccl_tests_avg_busbw_gbs(raw) == pytest.approx(170.5)


def test_parse_rejects_output_without_rows():
    with pytest.raises(ValueError, match="no nccl-tests result rows"):
        parse_nccl_tests_output("# nThread 1 nGpus 8\n# Avg bus bandwidth    : 0\n")
    assert parse_nccl_tests_avg_busbw_gbs("nothing") is None


def test_measured_busbw_keeps_the_lowest_node_run_and_the_multi_node_run_nearest_the_job():
    # Two single-node runs (371.2 and the same output again) keep the lowest; of runs on 2 and 16 nodes a
    # 12-node job takes the 16-node one (4 nodes away, not 10); a run without a table is noted.
    runs = [NcclTestsRun("run/0", 1, ALL_REDUCE_PERF_8XH100), NcclTestsRun("run/1", 2, ALL_REDUCE_PERF_8XH100),
            NcclTestsRun("run/2", 16, ALL_REDUCE_PERF_8XH100), NcclTestsRun("run/3", 8, "no table")]

    measured = measured_busbw(runs, job_nodes=12)

    assert measured.node_busbw_gbs == pytest.approx(371.20)
    assert (measured.cluster_nodes, measured.cluster_busbw_gbs) == (16, pytest.approx(371.20))
    assert measured.notes == ("run/3 not used: no nccl-tests result rows found (expected lines: size count type "
                              "... busbw #wrong)",)

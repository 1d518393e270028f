"""rules.estimates.communication.nccl_tests: the busbw a job's gradient collectives reach, read off real nccl-tests
runs.

The runs are the published outputs of tests/data/nccl (sources in tests/data/README.md), parsed by
parsers.nccl_tests; the expected figures are the runs' own cells and the frameworks' documented bucket sizes.
"""

import math
from pathlib import Path

import pytest

from parsers import nccl_tests as nccl_parser
from rules.errors import InconsistentInput
from rules.estimates.communication.nccl_tests import (
    MEGATRON_MIN_BUCKET_PARAMETERS,
    PYTORCH_DDP_BUCKET_BYTES,
    GradientBuckets,
    GradientMessage,
    NcclTestsRow,
    NcclTestsRun,
    busbw_at_size_gbs,
    gradient_message,
    measured_busbw,
    peak_busbw_gbs,
)
from rules.estimates.model.shapes import ModelShape

DATA = Path(__file__).parents[1] / "data" / "nccl"


def rows(name: str) -> tuple[NcclTestsRow, ...]:
    parsed = nccl_parser.parse((DATA / name).read_text(encoding="utf-8"))
    return tuple(NcclTestsRow(r["size_bytes"], r["out_of_place"]["busbw_gbs"], r["in_place"]["busbw_gbs"])
                 for r in parsed["rows"])


A3MEGA = rows("all_reduce_a3mega_2x8_h100.txt")  # 16 ranks on two 8x H100 nodes, 8 B to 8 GiB


def test_peak_is_the_best_cell_of_the_sweep():
    assert peak_busbw_gbs(A3MEGA) == 338.82  # out-of-place at 8 GiB
    assert peak_busbw_gbs(rows("all_reduce_dgx_a100_2node_old_error_column.txt")) == 188.70
    with pytest.raises(InconsistentInput):
        peak_busbw_gbs(A3MEGA, min_size_bytes=2**40)


def test_busbw_at_a_measured_size_is_that_rows_better_run():
    by_size = {row.size_bytes: row for row in A3MEGA}

    assert busbw_at_size_gbs(A3MEGA, 2**30) == by_size[2**30].busbw_gbs
    assert busbw_at_size_gbs(A3MEGA, 8589934592) == 338.82


def test_busbw_between_two_sizes_is_linear_in_log2_of_the_size():
    # 3 × 2^27 B = 1.5 × 2^28 B lies log2(1.5) = 0.585 of the way from the row at 2^28 B to the row at 2^29 B
    by_size = {row.size_bytes: row.busbw_gbs for row in A3MEGA}
    size = 3 * 2**27
    share = math.log2(size) - 28

    expected = by_size[2**28] + share * (by_size[2**29] - by_size[2**28])

    assert busbw_at_size_gbs(A3MEGA, size) == pytest.approx(expected)


def test_sizes_beyond_the_sweep_take_its_first_or_last_figure():
    sweep = rows("all_gather_2x_rtx2080ti_pcie.txt")  # starts with two rows of size 0, then 32 B
    nonzero = [row for row in sweep if row.size_bytes > 0]

    assert busbw_at_size_gbs(sweep, 1) == nonzero[0].busbw_gbs
    assert busbw_at_size_gbs(sweep, 2**40) == nonzero[-1].busbw_gbs
    with pytest.raises(InconsistentInput):
        busbw_at_size_gbs((NcclTestsRow(0, 0.0, 0.0),), 1e6)


def test_measured_busbw_keeps_the_lowest_node_run_and_the_multi_node_run_nearest_the_job():
    # Given two single-node runs and runs on 2 and 16 nodes, a 12-node job takes the 16-node run (4 nodes away)
    p5, dgx = rows("all_reduce_p5_mpirun_tagged_no_header.txt"), rows("all_reduce_dgx_a100_2node_old_error_column.txt")
    runs = [NcclTestsRun("run/0", 1, p5), NcclTestsRun("run/1", 1, dgx), NcclTestsRun("run/2", 2, p5),
            NcclTestsRun("run/3", 16, dgx)]

    measured = measured_busbw(runs, job_nodes=12)

    assert (measured.node_busbw_gbs, measured.node_run.name) == (188.70, "run/1")
    assert (measured.cluster_nodes, measured.cluster_busbw_gbs, measured.cluster_run.name) == (16, 188.70, "run/3")
    assert measured.message is None and measured.measured


def test_measured_busbw_at_the_gradient_message_size():
    message = GradientMessage(PYTORCH_DDP_BUCKET_BYTES, "PyTorch DDP bucket_cap_mb 25")

    measured = measured_busbw([NcclTestsRun("run/0", 2, A3MEGA)], job_nodes=2, message=message)

    assert measured.cluster_busbw_gbs == pytest.approx(busbw_at_size_gbs(A3MEGA, 25 * 2**20))
    assert measured.cluster_busbw_gbs < 338.82 and measured.message is message


LLAMA3_8B = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256, mlp="swiglu",
                       norm="rmsnorm", dropout=False, tied_embeddings=False)
GRADIENTS_8B_BF16 = 8_030_261_248 * 2


@pytest.mark.parametrize(("framework", "data_parallel", "expected_bytes"), [
    ("pytorch-ddp", 16, 25 * 2**20),  # bucket_cap_mb=25
    ("deepspeed-zero", 16, 500_000_000 * 2),  # reduce_bucket_size 5e8 bf16 elements
    ("megatron-core", 16, MEGATRON_MIN_BUCKET_PARAMETERS * 2),  # max(4e7, 1e6 × 16) parameters
    ("megatron-core", 64, 64_000_000 * 2),  # max(4e7, 1e6 × 64)
    ("pytorch-fsdp", 16, 218_112_000 * 2),  # one Llama-3-8B decoder layer: (8,030,261,248 − 2 × V·h − h) / 32
])
def test_gradient_message_is_the_frameworks_documented_bucket(framework, data_parallel, expected_bytes):
    buckets = GradientBuckets(framework, GRADIENTS_8B_BF16, 2.0, data_parallel, LLAMA3_8B)

    assert gradient_message(buckets).size_bytes == expected_bytes


def test_fsdp_unit_splits_over_tensor_parallel_ranks_and_is_the_whole_buffer_without_the_architecture():
    split = gradient_message(GradientBuckets("pytorch-fsdp", GRADIENTS_8B_BF16, 2.0, 8, LLAMA3_8B, tensor_parallel=2))
    unknown = gradient_message(GradientBuckets("pytorch-fsdp", GRADIENTS_8B_BF16, 2.0, 8))

    assert split.size_bytes == 218_112_000
    assert (unknown.size_bytes, unknown.set_by) == (
        GRADIENTS_8B_BF16, "the whole gradient buffer: the FSDP unit is unknown without the architecture")


def test_a_gradient_smaller_than_the_bucket_is_sent_whole():
    message = gradient_message(GradientBuckets("deepspeed-zero", 1e8, 2.0, 8))

    assert (message.size_bytes, message.set_by) == (
        1e8, "the whole gradient buffer, smaller than the DeepSpeed reduce_bucket_size 5e8 elements")


def test_a_run_against_its_reference_is_its_peak_busbw_over_the_reference():
    from rules.estimates.communication.nccl_tests import NcclTestsRun, reference_fraction

    # azurehpc-health-checks accepts an 8 x H200 node at all_reduce >= 431 GB/s at 16 GB; ml-engineering measured 482.26
    # with NVLS at 16 GiB: a node that just passes Azure's check is at 431 / 482.26 = 0.8937 of the reference
    table = (NcclTestsRow(1 << 30, 402.0, 401.5), NcclTestsRow(16 << 30, 431.0, 430.2),
             NcclTestsRow(4 << 30, 425.0, 429.9))
    peak, fraction = reference_fraction(NcclTestsRun("node", 1, table), 482.26)
    assert peak == 431.0 and fraction == pytest.approx(0.8937, abs=1e-4)
    assert reference_fraction(None, 482.26) == (None, None)
    assert reference_fraction(NcclTestsRun("node", 1, table), None) == (None, None)

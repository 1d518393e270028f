"""nccl-tests results: the busbw at the message size a job's gradient collectives use, and the runs a job relies on.

The runs arrive parsed (``parsers.nccl_tests``, the same reader as ``quotecheck parse nccl``); bandwidth
definitions follow nccl-tests ``doc/PERFORMANCE.md``: busbw is algbw × the collective's bus factor, so it is
comparable across rank counts and with the hardware's bandwidth, and it rises with the message size until
the links are saturated.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from rules.errors import InconsistentInput
from rules.estimates._args import require_choice, require_positive, require_positive_int
from rules.estimates.memory.comm_buffers import DEEPSPEED_REDUCE_BUCKET_ELEMENTS, FRAMEWORKS
from rules.estimates.model.parameters import decoder_layer_parameters
from rules.estimates.model.shapes import ModelShape

# PyTorch DistributedDataParallel(bucket_cap_mb=25): gradients are all-reduced in buckets of 25 MiB
# (torch/nn/parallel/distributed.py; the docs' "bucket_cap_mb ... Default: 25").
PYTORCH_DDP_BUCKET_BYTES: Final = 25 * 2**20
# Megatron-LM's gradient buckets hold max(40,000,000, 1,000,000 × data-parallel size) parameters
# (megatron/training/training.py, DistributedDataParallelConfig.bucket_size when overlap_grad_reduce).
MEGATRON_MIN_BUCKET_PARAMETERS: Final = 40_000_000
MEGATRON_BUCKET_PARAMETERS_PER_DP_RANK: Final = 1_000_000


@dataclass(frozen=True)
class NcclTestsRow:
    """One message size of an nccl-tests run: its size and the busbw of the out-of-place and in-place runs."""

    size_bytes: int
    out_of_place_busbw_gbs: float
    in_place_busbw_gbs: float

    @property
    def busbw_gbs(self) -> float:
        """The better of the out-of-place and in-place bus bandwidths."""
        return max(self.out_of_place_busbw_gbs, self.in_place_busbw_gbs)


def peak_busbw_gbs(rows: Iterable[NcclTestsRow], min_size_bytes: int = 0) -> float:
    """Return the highest busbw (GB/s) among rows of at least ``min_size_bytes``.

    Source: nccl-tests ``doc/PERFORMANCE.md``: on large sizes time is linear in size, so the large-size
    busbw is the bandwidth figure to compare with hardware.
    """
    candidates = [r.busbw_gbs for r in rows if r.size_bytes >= min_size_bytes]
    if not candidates:
        raise InconsistentInput(f"no nccl-tests row of at least {min_size_bytes} bytes")
    return max(candidates)


def busbw_at_size_gbs(rows: Iterable[NcclTestsRow], size_bytes: float) -> float:
    """Returns the busbw (GB/s) an nccl-tests run measured at ``size_bytes``, interpolated between its sizes.

    nccl-tests sweeps sizes geometrically (``-f 2``: each twice the last), so the busbw between two measured
    sizes is interpolated linearly in log2(size). Below the smallest size the smallest size's figure stands
    (the run says nothing smaller), above the largest the largest's (busbw levels off once the links are
    saturated, doc/PERFORMANCE.md). Rows of size 0 (all_gather of an empty buffer) carry no bandwidth.
    """
    require_positive("size_bytes", size_bytes)
    measured = sorted((r.size_bytes, r.busbw_gbs) for r in rows if r.size_bytes > 0)
    if not measured:
        raise InconsistentInput("the nccl-tests run has no row of a non-zero size")
    if size_bytes <= measured[0][0]:
        return measured[0][1]
    for (low, low_busbw), (high, high_busbw) in zip(measured, measured[1:], strict=False):
        if low <= size_bytes <= high:
            if high == low:
                return max(low_busbw, high_busbw)
            share = (math.log2(size_bytes) - math.log2(low)) / (math.log2(high) - math.log2(low))
            return low_busbw + share * (high_busbw - low_busbw)
    return measured[-1][1]


@dataclass(frozen=True)
class GradientBuckets:
    """What sets the size of one gradient collective a framework issues: the framework and the gradients."""

    framework: str  # one of comm_buffers.FRAMEWORKS
    gradient_bytes: float  # one model-parallel shard's full gradient buffer (StepCommunication.gradient_bytes)
    working_bytes_per_param: float  # bytes of one gradient element (bf16/fp16: 2)
    data_parallel_ranks: int
    model_shape: ModelShape | None = None  # sizes FSDP's wrapped unit (a decoder layer); None: unknown
    tensor_parallel: int = 1  # the unit is split over the tensor-parallel ranks


@dataclass(frozen=True)
class GradientMessage:
    """The message size at which a job's gradient collectives run, and what sets it, in words."""

    size_bytes: float
    set_by: str


def gradient_message(buckets: GradientBuckets) -> GradientMessage:
    """Returns the size of one gradient collective: the framework's bucket, at most the whole gradient buffer.

    PyTorch DDP all-reduces buckets of ``bucket_cap_mb`` 25 MiB; DeepSpeed ZeRO reduces buckets of
    ``reduce_bucket_size`` 5e8 elements (deepspeed/runtime/zero/config.py); Megatron-LM buckets of
    max(4e7, 1e6 × DP) parameters; PyTorch FSDP gathers and reduce-scatters one wrapped unit at a time, under
    ``transformer_auto_wrap_policy`` one decoder layer
    (:func:`rules.estimates.model.parameters.decoder_layer_parameters`,
    split over the tensor-parallel ranks), the unit that carries all the gradients but the root's embeddings.
    Without the architecture, FSDP's message is taken as the whole buffer, which overstates the busbw a layer
    reaches.
    """
    require_choice("framework", buckets.framework, FRAMEWORKS)
    require_positive("gradient_bytes", buckets.gradient_bytes)
    require_positive("working_bytes_per_param", buckets.working_bytes_per_param)
    require_positive_int("data_parallel_ranks", buckets.data_parallel_ranks)
    element = buckets.working_bytes_per_param
    if buckets.framework == "pytorch-ddp":
        bucket, words = PYTORCH_DDP_BUCKET_BYTES, "PyTorch DDP bucket_cap_mb 25"
    elif buckets.framework == "deepspeed-zero":
        bucket, words = DEEPSPEED_REDUCE_BUCKET_ELEMENTS * element, "DeepSpeed reduce_bucket_size 5e8 elements"
    elif buckets.framework == "megatron-core":
        parameters = max(MEGATRON_MIN_BUCKET_PARAMETERS,
                         MEGATRON_BUCKET_PARAMETERS_PER_DP_RANK * buckets.data_parallel_ranks)
        bucket, words = parameters * element, f"Megatron-LM bucket of {parameters:,} parameters"
    elif buckets.model_shape is not None:
        require_positive_int("tensor_parallel", buckets.tensor_parallel)
        unit = decoder_layer_parameters(buckets.model_shape) / buckets.tensor_parallel
        bucket, words = unit * element, f"PyTorch FSDP unit of one decoder layer, {unit:,.0f} parameters"
    else:
        return GradientMessage(buckets.gradient_bytes,
                               "the whole gradient buffer: the FSDP unit is unknown without the architecture")
    if bucket >= buckets.gradient_bytes:
        return GradientMessage(buckets.gradient_bytes, f"the whole gradient buffer, smaller than the {words}")
    return GradientMessage(bucket, words)


@dataclass(frozen=True)
class NcclTestsRun:
    """One recorded nccl-tests run: where the submission holds it, how many nodes it spanned, its table."""

    name: str  # how notes refer to the run (its place in the submission)
    nodes: int
    rows: tuple[NcclTestsRow, ...]
    collective: str | None = None  # all_reduce, all_gather, ... as the output or the submission names it
    avg_busbw_gbs: float | None = None  # the run's "# Avg bus bandwidth" line


@dataclass(frozen=True)
class MeasuredBusbw:
    """The busbw recorded nccl-tests runs give a job: inside one node, and across the run nearest its size."""

    node_busbw_gbs: float | None  # the lowest of the single-node runs; None without one
    cluster_nodes: int | None  # nodes of the multi-node run nearest the job's size; None without one
    cluster_busbw_gbs: float | None
    notes: tuple[str, ...]  # runs not used, and why
    message: GradientMessage | None = None  # the size the figures were read at; None: each run's peak
    node_run: NcclTestsRun | None = None
    cluster_run: NcclTestsRun | None = None

    @property
    def measured(self) -> bool:
        """Returns whether any run was used."""
        return self.node_run is not None or self.cluster_run is not None


NOT_MEASURED: Final = MeasuredBusbw(None, None, None, ())


def measured_busbw(runs: Iterable[NcclTestsRun], job_nodes: int,
                   message: GradientMessage | None = None) -> MeasuredBusbw:
    """Returns the measured intra-node busbw and the (nodes, busbw) of the multi-node run nearest ``job_nodes``.

    Each run's figure is its busbw at ``message`` (:func:`busbw_at_size_gbs`, the size the job's gradient
    collectives run at, :func:`gradient_message`), else its peak over sizes (nccl-tests doc/PERFORMANCE.md: the
    large-size busbw is the one to compare with hardware); several single-node runs keep the lowest; among
    multi-node runs the one nearest the job's node count wins, the lower busbw on a tie.
    """
    node: tuple[float, NcclTestsRun] | None = None
    widest: tuple[int, float, NcclTestsRun] | None = None
    for run in runs:
        busbw = busbw_at_size_gbs(run.rows, message.size_bytes) if message else peak_busbw_gbs(run.rows)
        if run.nodes == 1:
            if node is None or busbw < node[0]:
                node = (busbw, run)
        elif widest is None or (abs(run.nodes - job_nodes), busbw) < (abs(widest[0] - job_nodes), widest[1]):
            widest = (run.nodes, busbw, run)
    return MeasuredBusbw(node[0] if node else None, widest[0] if widest else None, widest[1] if widest else None,
                         (), message, node[1] if node else None, widest[2] if widest else None)


def reference_fraction(run: NcclTestsRun | None, reference_gbs: float | None) -> tuple[float | None, float | None]:
    """Returns (the run's peak busbw, that ÷ ``reference_gbs``): how much of what the quoted links should deliver a
    delivered system measured; (None, None) without a run or a reference.

    Source: the peak over sizes is the figure to compare with hardware (nccl-tests ``doc/PERFORMANCE.md``), read at
    large messages as the operators' acceptance thresholds are (azurehpc-health-checks ``conf/nd96isr_h200_v5.conf``:
    all-reduce at 16 GB; GoogleCloudPlatform/cluster-health-scanner ``nccl_healthcheck``: 2–8 GiB).
    """
    if run is None or not reference_gbs:
        return None, None
    peak = peak_busbw_gbs(run.rows)
    return peak, peak / reference_gbs

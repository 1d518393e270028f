"""Tests for rules.estimates.memory.gpu_context: the CUDA context per GPU, by hand from its published parts."""

import json
from pathlib import Path

import pytest

from rules.errors import InconsistentInput
from rules.estimates.memory.gpu_context import cuda_context, local_memory_bytes
from rules.estimates.model.hardware import GpuSpec

GIB, MIB = 2**30, 2**20
CATALOGUE = json.loads((Path(__file__).resolve().parents[2] / "rules" / "data" / "catalogue.json").read_text())
# H100 whitepaper: 132 SMs (SXM5); CUDA C++ Programming Guide: 2048 resident threads per SM at compute
# capability 9.0; PyTorch CublasHandlePool.cpp: 32 MiB cuBLAS workspace on Hopper.
H100_SXM5 = GpuSpec(sm_count=132, max_threads_per_sm=2048, blas_workspace_mib=32)


def test_local_memory_is_threads_per_sm_times_sms_times_the_stack():
    # NVIDIA forums "Local memory management": MAX_THREADS_PER_SM x SMs x LOCAL_MEM_PER_THREAD; at 1 KiB:
    # H100 SXM5 2048 × 132 × 1024 = 276,824,064 B (264 MiB); A100 2048 × 108 × 1024 = 226,492,416 B (216 MiB);
    # L40S (compute capability 8.9: 1536 threads) 1536 × 142 × 1024 = 223,346,688 B (213 MiB).
    assert local_memory_bytes(H100_SXM5) == 276_824_064 == 264 * MIB
    a100 = GpuSpec(sm_count=108, max_threads_per_sm=2048, blas_workspace_mib=8.125)
    assert local_memory_bytes(a100) == 226_492_416 == 216 * MIB
    assert local_memory_bytes(GpuSpec(sm_count=142, max_threads_per_sm=1536, blas_workspace_mib=8.125)) == 223_346_688
    # A kernel that raised the stack to 4 KiB leaves four times as much behind (cuCtxSetLimit).
    assert local_memory_bytes(H100_SXM5, stack_bytes_per_thread=4096) == 4 * 276_824_064


def test_h100_context_is_the_driver_share_plus_local_memory_plus_the_cublas_workspace():
    # 0.21 GiB = 225,485,783.04 B + 276,824,064 B + 32 MiB 33,554,432 B = 535,864,279.04 B = 0.49906 GiB.
    context = cuda_context(H100_SXM5, driver_gib=0.21)
    assert context.local_memory_bytes == 276_824_064
    assert context.blas_workspace_bytes == 33_554_432
    assert context.total_bytes == pytest.approx(535_864_279.04)
    assert context.total_gib == pytest.approx(0.4990625)


def test_the_driver_share_reproduces_the_measured_empty_context_it_was_taken_from():
    # unslothai/unsloth-zoo#1053: an empty context (mem_get_info, no kernel run, no cuBLAS workspace yet) reads
    # 426 MiB on an RTX 6000 Ada (142 SMs, compute capability 8.9). Its 213 MiB of local memory plus the
    # policy's 0.21 GiB (215.04 MiB) driver share give 428.04 MiB, within 0.5 % of the measurement.
    rtx_6000_ada = GpuSpec(sm_count=142, max_threads_per_sm=1536, blas_workspace_mib=8.125)
    empty = cuda_context(rtx_6000_ada, driver_gib=0.21)
    assert (empty.driver_bytes + empty.local_memory_bytes) / MIB == pytest.approx(426, rel=0.005)


def test_the_catalogue_gives_the_parts_for_its_nvidia_parts_with_a_published_sm_count():
    contexts = {model: cuda_context(GpuSpec(sm_count=spec["sm_count"], max_threads_per_sm=spec["max_threads_per_sm"],
                                                    blas_workspace_mib=spec["blas_workspace_mib"]), 0.21).total_gib
                for model, spec in CATALOGUE["gpus"].items() if "sm_count" in spec}
    assert contexts == {
        "A100-SXM4-40GB": pytest.approx((0.21 * GIB + 216 * MIB + 8.125 * MIB) / GIB),
        "A100-SXM4-80GB": pytest.approx((0.21 * GIB + 216 * MIB + 8.125 * MIB) / GIB),
        "H100-SXM5-80GB": pytest.approx(0.4990625),
        "H100-PCIe-80GB": pytest.approx((0.21 * GIB + 114 * 2 * MIB + 32 * MIB) / GIB),
        "H200-SXM-141GB": pytest.approx(0.4990625),
        "L40S-48GB": pytest.approx((0.21 * GIB + 223_346_688 + 8.125 * MIB) / GIB),
    }


def test_refusals_name_the_argument():
    with pytest.raises(InconsistentInput, match="sm_count"):
        local_memory_bytes(GpuSpec(sm_count=0, max_threads_per_sm=2048, blas_workspace_mib=32))
    with pytest.raises(InconsistentInput, match="driver_gib"):
        cuda_context(H100_SXM5, driver_gib=-0.1)
    with pytest.raises(InconsistentInput, match="blas_workspace_mib"):
        cuda_context(GpuSpec(sm_count=132, max_threads_per_sm=2048, blas_workspace_mib=0), driver_gib=0.21)

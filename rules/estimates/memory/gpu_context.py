"""The CUDA context one training process holds on its GPU: the driver's share, the local memory, the cuBLAS workspace.

Three parts, of which two depend on the GPU:

- Local memory. "the local memory allocation is context wide and is calculated as MAX_THREADS_PER_SM x SMs x
  LOCAL_MEM_PER_THREAD" (NVIDIA developer forums, "Local memory management",
  https://forums.developer.nvidia.com/t/local-memory-management/289339/9, pointing to cuCtxCreate and
  cuCtxSetLimit). At the per-thread stack a context starts with (``cudaLimitStackSize`` reads 1 KiB; per
  cuCtxSetLimit the driver raises it for a kernel that needs more and does not lower it again) that is
  132 × 2048 × 1 KiB = 264 MiB on an H100 SXM5 and 108 × 2048 × 1 KiB = 216 MiB on an A100.
- The cuBLAS workspace PyTorch reserves per handle and stream through its caching allocator: 32 MiB on
  Hopper, 8.125 MiB before it (``aten/src/ATen/cuda/CublasHandlePool.cpp``, parseChosenWorkspaceSize); one
  compute stream is counted.
- What does not depend on the GPU: the driver, the runtime and the kernels loaded lazily since CUDA 11.7
  (CUDA C++ Programming Guide, "Lazy Loading"), a policy value (memory.cuda_driver_gib).

The catalogue gives the first two for the parts whose SM count is published (catalogue convention 13); for
any other GPU the policy's whole-context figure (memory.cuda_context_gib) stands in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rules.estimates._args import require_non_negative, require_positive, require_positive_int
from rules.estimates.model.hardware import GpuSpec
from rules.units import GIB

DEFAULT_STACK_BYTES_PER_THREAD: Final = 1024  # cudaLimitStackSize before any kernel asks for more
MIB: Final = 2**20


@dataclass(frozen=True)
class CudaContext:
    """One process's CUDA context on one GPU, in bytes, by part."""

    driver_bytes: float  # driver, runtime, lazily loaded kernels
    local_memory_bytes: float  # the context-wide local-memory (stack) allocation
    blas_workspace_bytes: float  # PyTorch's cuBLAS workspace

    @property
    def total_bytes(self) -> float:
        return self.driver_bytes + self.local_memory_bytes + self.blas_workspace_bytes

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GIB


def local_memory_bytes(spec: GpuSpec, stack_bytes_per_thread: int = DEFAULT_STACK_BYTES_PER_THREAD) -> int:
    """Returns the context's local-memory allocation: max resident threads per SM × SMs × stack per thread."""
    require_positive_int("sm_count", spec.sm_count)
    require_positive_int("max_threads_per_sm", spec.max_threads_per_sm)
    require_positive_int("stack_bytes_per_thread", stack_bytes_per_thread)
    return spec.max_threads_per_sm * spec.sm_count * stack_bytes_per_thread


def cuda_context(spec: GpuSpec, driver_gib: float) -> CudaContext:
    """Returns the CUDA context on a GPU of ``spec``: the driver's ``driver_gib`` + local memory + cuBLAS workspace."""
    require_non_negative("driver_gib", driver_gib)
    require_positive("blas_workspace_mib", spec.blas_workspace_mib)
    return CudaContext(driver_bytes=driver_gib * GIB, local_memory_bytes=local_memory_bytes(spec),
                       blas_workspace_bytes=spec.blas_workspace_mib * MIB)

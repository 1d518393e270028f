"""The quoted hardware as every estimator takes it: one GPU's datasheet figures and a node group of servers.

``GpuSpec`` holds a GPU's nameplate (rules/data/catalogue.json, whose entries cite each figure's datasheet:
NVIDIA A100, H100, H200, B200 datasheets and the CUDA occupancy tables), ``NodeSpec`` the identical servers
of one node group of a quote: how many, how many GPUs each, and how those GPUs reach each other and the
compute fabric. Memory, step time, serving, power and the searches all read these two; a figure the quote
and the catalogue leave unknown is None, and the estimator that needs it refuses (rules/estimates/_args.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.errors import InconsistentInput
from rules.estimates._args import require_non_negative, require_positive, require_positive_int

# Figures that must be positive where given (None: not known).
_POSITIVE_GPU_FIGURES = ("capacity_bytes", "hbm_tbs", "bf16_tflops", "fp8_tflops", "tdp_w", "blas_workspace_mib")
_COUNT_GPU_FIGURES = ("pcie_gen", "sm_count", "max_threads_per_sm")


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's datasheet figures (catalogue units: bytes, TB/s, dense TFLOP/s, GB/s, W); None where not known."""

    model: str = "GPU"  # catalogue id, e.g. H100-SXM-80GB
    capacity_bytes: float | None = None  # memory as the driver reports it
    hbm_tbs: float | None = None  # HBM bandwidth
    bf16_tflops: float | None = None  # dense BF16 peak
    fp8_tflops: float | None = None  # dense FP8 peak; None where the GPU has no FP8 Tensor Cores
    nvlink_gbs: float = 0.0  # bidirectional NVLink per GPU; 0 without NVLink (PCIe only)
    pcie_gen: int = 5
    tdp_w: float | None = None
    sm_count: int | None = None  # streaming multiprocessors (they size the CUDA context's local memory)
    max_threads_per_sm: int | None = None
    blas_workspace_mib: float | None = None  # PyTorch's cuBLAS workspace on this architecture
    mxfp8: bool = False  # Tensor Cores that run OCP MXFP8 block-scaled GEMMs (catalogue step_time.mxfp8_architectures)

    def __post_init__(self) -> None:
        for name in _POSITIVE_GPU_FIGURES:
            if getattr(self, name) is not None:
                require_positive(name, getattr(self, name))
        for name in _COUNT_GPU_FIGURES:
            if getattr(self, name) is not None:
                require_positive_int(name, getattr(self, name))
        require_non_negative("nvlink_gbs", self.nvlink_gbs)

    def dense_tflops(self, precision: str) -> float:
        """Returns the dense peak a layout's GEMMs run against at ``precision``; InconsistentInput for fp8 on a GPU
        without FP8 Tensor Cores, or when the BF16 peak is not known."""
        if precision == "fp8-mixed":
            if self.fp8_tflops is None:
                raise InconsistentInput("precision fp8-mixed needs a GPU with FP8 Tensor Cores (fp8_tflops is None)")
            return self.fp8_tflops
        if self.bf16_tflops is None:
            raise InconsistentInput(f"GPU {self.model} has no known bf16_tflops")
        return self.bf16_tflops


@dataclass(frozen=True)
class NodeSpec:
    """A node group of the quote: identical servers, the GPUs each holds and how those GPUs are connected."""

    gpu: GpuSpec
    gpus_per_node: int
    nodes: int = 1
    nvlink_domain_gpus: int | None = None  # GPUs that reach each other over NVLink; None: the node's GPUs
    nic_gbps_per_gpu: float | None = None  # compute-fabric line rate per GPU (Gb/s); None: not known
    pointer: str = ""  # JSON Pointer of the node group in the submission ("" outside one)

    def __post_init__(self) -> None:
        require_positive_int("gpus_per_node", self.gpus_per_node)
        require_positive_int("nodes", self.nodes)
        if self.nvlink_domain_gpus is not None:
            require_positive_int("nvlink_domain_gpus", self.nvlink_domain_gpus)
        if self.nic_gbps_per_gpu is not None:
            require_positive("nic_gbps_per_gpu", self.nic_gbps_per_gpu)

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def domain_gpus(self) -> int:
        """Returns the GPUs one NVLink domain holds: ``nvlink_domain_gpus``, else the node's GPUs."""
        return self.gpus_per_node if self.nvlink_domain_gpus is None else self.nvlink_domain_gpus

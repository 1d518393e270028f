"""The figures the step-time model runs on: a GPU's nameplate, achievable efficiencies, measurements.

``NodeSpec`` (rules/estimates/model/hardware.py) holds datasheet figures (the catalogue,
rules/data/catalogue.json), ``Efficiencies`` the
achievable shares of them and the measured kernel rates, each from data: the catalogue's per-GPU maximum
achievable matmul rates (mamf-finder measurements) and HBM triad bandwidths, its ``step_time`` section (GEMM
rates by shape from the OpenXLA sweep, FlashAttention-2 rates, the kernel launch time, the HBM fraction from
BabelStream, collective latency from all_reduce_perf sweeps, and the one fitted constant per architecture: the
share of the sweep's rate a training step's GEMMs reach, fitted to the two calibration sets), and the policy's
``interconnect`` fractions (NVLink, NIC, PCIe busbw). ``Measured`` replaces any rate with a measurement of the
quoted system. ``achievable_rates`` combines the three into the rates one GPU works at.

Pure functions over plain mappings: the caller loads the catalogue and policy documents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from rules.errors import InconsistentInput
from rules.estimates._args import (
    require_fraction,
    require_non_negative,
    require_positive,
)
from rules.estimates.communication.interconnect import nvlink_busbw_gbs, pcie_x16_gbs
from rules.estimates.model.hardware import GpuSpec, NodeSpec
from rules.estimates.training_time.kernel_rates import (
    AttentionRates,
    GemmSweep,
    attention_rates_from_data,
    gemm_sweep_from_data,
)

TERA: Final = 1e12
MIB: Final = 2**20


@dataclass(frozen=True)
class Efficiencies:
    """Achievable shares of nameplate and the measured kernel rates, each from data (see ``efficiencies_from_data``)."""

    mamf_bf16_fraction: float  # maximum achievable matmul FLOP/s ÷ dense bf16 peak
    mamf_fp8_fraction: float | None
    gemm_fraction_in_step: float  # a training step's GEMMs ÷ the sweep's rate at their shape (fitted, per architecture)
    hbm_fraction: float  # STREAM-like bandwidth ÷ HBM nameplate (where the GPU has no triad measurement)
    nvlink_busbw_fraction: float  # large-message all-reduce busbw ÷ NVLink per-direction rate
    pcie_busbw_fraction: float
    nic_busbw_fraction: float  # cross-node busbw ÷ NIC line rate
    collective_half_bytes: float  # S½ of the collective time model
    gemm_sweep: GemmSweep  # GEMM rates by shape (the profile of the GPU's architecture)
    attention: AttentionRates  # FlashAttention-2 forward + backward rates
    attention_scale: float  # this GPU's best bf16 matmul ÷ that of the GPU the attention rates were measured on
    kernel_launch_s: float  # GPU time of one kernel launch
    hbm_triad_tbs: float | None = None  # measured triad bandwidth of the GPU, where published
    residual_band: tuple[float, float] = (0.0, 0.0)  # lowest, highest relative error of the calibration runs
    all_to_all_nvlink_fraction: float = 1.0  # expert all-to-all bottleneck bandwidth ÷ NVLink per-direction rate
    all_to_all_nic_fraction: float = 1.0  # the same across NVLink domains ÷ NIC line rate

    def __post_init__(self) -> None:
        for name in ("mamf_bf16_fraction", "gemm_fraction_in_step", "hbm_fraction", "nvlink_busbw_fraction",
                     "pcie_busbw_fraction", "nic_busbw_fraction"):
            require_fraction(name, getattr(self, name))
        require_fraction("all_to_all_nvlink_fraction", self.all_to_all_nvlink_fraction)
        require_fraction("all_to_all_nic_fraction", self.all_to_all_nic_fraction)
        if self.mamf_fp8_fraction is not None:
            require_fraction("mamf_fp8_fraction", self.mamf_fp8_fraction)
        require_non_negative("collective_half_bytes", self.collective_half_bytes)
        require_non_negative("kernel_launch_s", self.kernel_launch_s)
        require_positive("attention_scale", self.attention_scale)
        if self.hbm_triad_tbs is not None:
            require_positive("hbm_triad_tbs", self.hbm_triad_tbs)
        low, high = self.residual_band
        if not -1 < low <= 0 <= high:
            raise InconsistentInput(f"residual_band must hold its lowest error in (-1, 0] and its highest at 0 or "
                                    f"above, got {self.residual_band!r}")


@dataclass(frozen=True)
class Measured:
    """Measurements that replace the modelled rates; None keeps the model."""

    gemm_tflops: float | None = None  # mamf-finder style best matmul TFLOP/s at the layout's precision
    hbm_tbs: float | None = None  # STREAM/BabelStream triad
    nvlink_busbw_gbs: float | None = None  # nccl-tests all_reduce_perf busbw, large messages, one domain
    nic_busbw_gbs: float | None = None  # per-GPU busbw of a collective across nodes

    def __post_init__(self) -> None:
        for name in ("gemm_tflops", "hbm_tbs", "nvlink_busbw_gbs", "nic_busbw_gbs"):
            value = getattr(self, name)
            if value is not None:
                require_positive(name, value)


def hardware_from_catalogue(catalogue: Mapping[str, Any], server_model: str) -> NodeSpec:
    """Return one catalogued server as a NodeSpec of one node: peaks, HBM, NVLink domain, compute NIC rate per GPU.

    The NVLink domain is the server's ``nvlink_domain_gpus`` (72 on an NVL72 rack), else its GPU count;
    the NIC rate per GPU is the sum of the compute NICs' line rates over the GPUs (one 200 Gb/s HDR NIC per
    A100 in a DGX A100, one 400 Gb/s NDR NIC per H100 in a DGX H100). KeyError names an unknown model.
    """
    server = catalogue["servers"][server_model]
    gpu = catalogue["gpus"][server["gpu_model"]]
    compute_gbps = sum(nic["count"] * nic["gbps"] for nic in server["nics"] if nic["purpose"] == "compute")
    return NodeSpec(
        gpu=GpuSpec(model=server["gpu_model"], bf16_tflops=gpu["bf16_tflops"], fp8_tflops=gpu["fp8_tflops"],
                    hbm_tbs=gpu["hbm_tbs"], nvlink_gbs=gpu["nvlink_gbs"], pcie_gen=gpu["pcie_gen"],
                    mxfp8=mxfp8_tensor_cores(catalogue, server["gpu_model"])),
        gpus_per_node=server["gpu_count"],
        nvlink_domain_gpus=server.get("nvlink_domain_gpus", server["gpu_count"]),
        nic_gbps_per_gpu=compute_gbps / server["gpu_count"],
    )


def mxfp8_tensor_cores(catalogue: Mapping[str, Any], gpu_model: str | None) -> bool:
    """Returns whether the catalogue's ``gpu_model`` has Tensor Cores that run MXFP8 (its architecture is one of
    ``step_time.mxfp8_architectures``); False for a GPU the catalogue lacks."""
    gpu = catalogue["gpus"].get(gpu_model) if gpu_model is not None else None
    return gpu is not None and gpu["architecture"] in catalogue["step_time"]["mxfp8_architectures"]


def efficiencies_from_data(catalogue: Mapping[str, Any], policy: Mapping[str, Any], gpu_model: str) -> Efficiencies:
    """Return the default Efficiencies of ``gpu_model`` from the catalogue and policy documents.

    MAMF fractions: the GPU's ``mamf_bf16_tflops`` / ``mamf_fp8_tflops`` over its dense peaks, or the
    catalogue's ``step_time.mamf_fraction_unmeasured`` where the part has no measurement (an FP8 GPU
    without an FP8 measurement uses its BF16 fraction). The GPU's ``architecture`` picks its GEMM sweep,
    attention rates, in-step GEMM fraction and residual band; an architecture without calibration runs takes the
    lowest fitted fraction (the slower prediction, until runs on it are in a calibration set) and the widest band
    of the calibrated ones. The rest:
    ``step_time`` (HBM fraction, S½, kernel launch) and the policy's ``interconnect`` section.
    """
    gpu = catalogue["gpus"][gpu_model]
    section = catalogue["step_time"]
    interconnect = policy["interconnect"]
    architecture = gpu["architecture"]
    fitted = section["gemm_fraction_in_step"]
    attention = attention_rates_from_data(section, architecture)
    measured_on = catalogue["gpus"][attention.gpu]
    bf16 = gpu["mamf_bf16_tflops"] / gpu["bf16_tflops"] if "mamf_bf16_tflops" in gpu else None
    fp8 = None
    if gpu["fp8_tflops"] is not None:
        fp8 = gpu["mamf_fp8_tflops"] / gpu["fp8_tflops"] if "mamf_fp8_tflops" in gpu else bf16
    unmeasured = section["mamf_fraction_unmeasured"]
    best_bf16 = gpu.get("mamf_bf16_tflops", unmeasured * gpu["bf16_tflops"])
    return Efficiencies(
        mamf_bf16_fraction=bf16 if bf16 is not None else unmeasured,
        mamf_fp8_fraction=fp8 if fp8 is not None or gpu["fp8_tflops"] is None else unmeasured,
        gemm_fraction_in_step=fitted.get(architecture, min(fitted.values())),
        hbm_fraction=section["hbm_fraction"],
        nvlink_busbw_fraction=interconnect["nvlink_busbw_fraction"],
        pcie_busbw_fraction=interconnect["pcie_busbw_fraction"],
        nic_busbw_fraction=interconnect["nic_busbw_fraction"],
        collective_half_bytes=section["collective_half_mib"] * MIB,
        gemm_sweep=gemm_sweep_from_data(section, architecture),
        attention=attention,
        attention_scale=best_bf16 / measured_on.get("mamf_bf16_tflops", unmeasured * measured_on["bf16_tflops"]),
        kernel_launch_s=section["kernel_launch_us"] * 1e-6,
        hbm_triad_tbs=gpu.get("hbm_triad_tbs"),
        residual_band=_band(section["residual_band"], architecture),
        all_to_all_nvlink_fraction=section["all_to_all"]["nvlink_fraction"],
        all_to_all_nic_fraction=section["all_to_all"]["nic_fraction"],
    )


def _band(bands: Mapping[str, Any], architecture: str) -> tuple[float, float]:
    """Returns the architecture's calibration band, else the widest of the calibrated ones."""
    if architecture in bands:
        return tuple(bands[architecture])  # type: ignore[return-value]
    return min(low for low, _ in bands.values()), max(high for _, high in bands.values())


@dataclass(frozen=True)
class Rates:
    """The rates one GPU works at under a layout's precision."""

    gemm_flops_s: float  # best-shape GEMM rate in a step at the layout's precision (× the sweep's efficiency by shape)
    attention_flops_s: float  # the same in 16 bits: attention matmuls without FlashAttention, the output layer
    attention_scale: float  # FlashAttention rates on this GPU ÷ those measured (Efficiencies.attention)
    hbm_bytes_s: float
    domain_gpus: int
    domain_busbw_gbs: float  # collectives inside one NVLink domain
    link_gbs: float  # one direction of one GPU's NVLink (or PCIe), point-to-point
    nic_busbw_gbs: float  # per GPU, across domains
    all_to_all_domain_gbs: float = 0.0  # a GPU's all-to-all bottleneck bandwidth inside its NVLink domain
    all_to_all_nic_gbs: float = 0.0  # the same to GPUs of other domains, over its NICs


def achievable_rates(node: NodeSpec, eff: Efficiencies, measured: Measured, precision: str) -> Rates:
    """Return the GEMM, attention, HBM and link rates: nameplate × efficiency, or the measurement where given.

    The best GEMM rate is peak(precision) × MAMF fraction × gemm_fraction_in_step, which the step model scales by
    the sweep's efficiency at each GEMM's shape; attention and the output layer stay in 16-bit (Transformer
    Engine runs FP8 only in the linear layers). HBM runs at the GPU's measured triad bandwidth, else
    hbm_fraction of its nameplate. NVLink busbw is the
    per-direction rate × fraction (``interconnect.nvlink_busbw_gbs``); GPUs without NVLink use PCIe x16. The
    expert all-to-all runs at the per-direction NVLink (or PCIe) rate and the NIC line rate × the catalogue's
    ``step_time.all_to_all`` fractions.
    The node must know its GPU's BF16 peak and HBM bandwidth and its compute NICs (``require_step_figures``).
    """
    require_step_figures(node)
    gpu = node.gpu
    bf16_best = gpu.dense_tflops("bf16-mixed") * eff.mamf_bf16_fraction
    best = bf16_best
    if precision == "fp8-mixed":
        fraction = eff.mamf_fp8_fraction if eff.mamf_fp8_fraction is not None else eff.mamf_bf16_fraction
        best = gpu.dense_tflops(precision) * fraction
    if measured.gemm_tflops is not None:
        best = measured.gemm_tflops
        if precision != "fp8-mixed":
            bf16_best = best
    if gpu.nvlink_gbs > 0:
        link = gpu.nvlink_gbs / 2 * eff.nvlink_busbw_fraction
        domain = nvlink_busbw_gbs(gpu.nvlink_gbs, eff.nvlink_busbw_fraction)
    else:
        link = domain = pcie_x16_gbs(gpu.pcie_gen) * eff.pcie_busbw_fraction
    if measured.nvlink_busbw_gbs is not None:
        domain = measured.nvlink_busbw_gbs
    nic = node.nic_gbps_per_gpu / 8 * eff.nic_busbw_fraction
    if measured.nic_busbw_gbs is not None:
        nic = measured.nic_busbw_gbs
    # The expert all-to-all at DeepEP's measured bottleneck bandwidths (catalogue step_time.all_to_all).
    a2a_domain, a2a_nic = all_to_all_gbs(gpu, node.nic_gbps_per_gpu, eff.all_to_all_nvlink_fraction,
                                         eff.all_to_all_nic_fraction)
    hbm_tbs = eff.hbm_triad_tbs if eff.hbm_triad_tbs is not None else gpu.hbm_tbs * eff.hbm_fraction
    if measured.hbm_tbs is not None:
        hbm_tbs = measured.hbm_tbs
    return Rates(gemm_flops_s=best * eff.gemm_fraction_in_step * TERA,
                  attention_flops_s=bf16_best * eff.gemm_fraction_in_step * TERA,
                  attention_scale=eff.attention_scale,
                  hbm_bytes_s=hbm_tbs * TERA, domain_gpus=node.domain_gpus,
                  domain_busbw_gbs=domain, link_gbs=link, nic_busbw_gbs=nic,
                  all_to_all_domain_gbs=a2a_domain, all_to_all_nic_gbs=a2a_nic)


def all_to_all_gbs(gpu: GpuSpec, nic_gbps_per_gpu: float | None, nvlink_fraction: float,
                   nic_fraction: float) -> tuple[float, float]:
    """Returns a GPU's expert all-to-all bottleneck bandwidths, GB/s: inside its NVLink domain (the per-direction
    NVLink rate, or PCIe x16 without NVLink, × ``nvlink_fraction``) and across domains (the NIC line rate ÷ 8 ×
    ``nic_fraction``; 0 where the NICs are not known). The fractions are DeepEP's measured bottleneck bandwidths
    over the links' rates (catalogue ``step_time.all_to_all``: 153 of H800's 200 GB/s, 43 of a 400 Gb/s NIC's
    50 GB/s; ``deepseek-ai/DeepEP`` docs/legacy.md)."""
    domain = (gpu.nvlink_gbs / 2 if gpu.nvlink_gbs > 0 else pcie_x16_gbs(gpu.pcie_gen)) * nvlink_fraction
    nic = nic_gbps_per_gpu / 8 * nic_fraction if nic_gbps_per_gpu else 0.0
    return domain, nic


def require_step_figures(node: NodeSpec) -> None:
    """Refuses (InconsistentInput, naming the figure) a node the step model cannot time: its GPU's BF16 peak and
    HBM bandwidth and its compute-fabric rate per GPU must be known."""
    for name, value in (("bf16_tflops", node.gpu.bf16_tflops), ("hbm_tbs", node.gpu.hbm_tbs),
                        ("nic_gbps_per_gpu", node.nic_gbps_per_gpu)):
        if value is None:
            raise InconsistentInput(f"the step-time model needs {name} of {node.gpu.model}")

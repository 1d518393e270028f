"""The figures the step-time model runs on: a GPU's nameplate, achievable efficiencies, measurements.

``NodeSpec`` (rules/estimates/model/hardware.py) holds datasheet figures (the catalogue,
rules/data/catalogue.json), ``Efficiencies`` the
achievable shares of them, each from data: the catalogue's per-GPU maximum achievable matmul rates
(mamf-finder measurements) and its ``step_time`` section (HBM fraction from BabelStream, collective latency
from all_reduce_perf sweeps, the GEMM share fitted to Korthikanti et al. 2022 Table 5), and the policy's
``interconnect`` fractions (NVLink, NIC, PCIe busbw; overlap). ``Measured`` replaces any rate with a
measurement of the quoted system. ``achievable_rates`` combines the three into the rates one GPU works at.

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
    require_unit_interval,
)
from rules.estimates.communication.interconnect import nvlink_busbw_gbs, pcie_x16_gbs
from rules.estimates.model.hardware import GpuSpec, NodeSpec

TERA: Final = 1e12
MIB: Final = 2**20


@dataclass(frozen=True)
class Efficiencies:
    """Achievable shares of nameplate, each from data (see ``efficiencies_from_data``)."""

    mamf_bf16_fraction: float  # maximum achievable matmul FLOP/s ÷ dense bf16 peak
    mamf_fp8_fraction: float | None
    gemm_fraction_of_mamf: float  # transformer GEMMs in a training step ÷ the best-shape matmul
    hbm_fraction: float  # STREAM-like bandwidth ÷ HBM nameplate
    nvlink_busbw_fraction: float  # large-message all-reduce busbw ÷ NVLink per-direction rate
    pcie_busbw_fraction: float
    nic_busbw_fraction: float  # cross-node busbw ÷ NIC line rate
    collective_half_bytes: float  # S½ of the collective time model
    overlap_fraction: float  # share of the compute a data-parallel collective may hide behind

    def __post_init__(self) -> None:
        for name in ("mamf_bf16_fraction", "gemm_fraction_of_mamf", "hbm_fraction", "nvlink_busbw_fraction",
                     "pcie_busbw_fraction", "nic_busbw_fraction"):
            require_fraction(name, getattr(self, name))
        if self.mamf_fp8_fraction is not None:
            require_fraction("mamf_fp8_fraction", self.mamf_fp8_fraction)
        require_non_negative("collective_half_bytes", self.collective_half_bytes)
        require_unit_interval("overlap_fraction", self.overlap_fraction)


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
                    hbm_tbs=gpu["hbm_tbs"], nvlink_gbs=gpu["nvlink_gbs"], pcie_gen=gpu["pcie_gen"]),
        gpus_per_node=server["gpu_count"],
        nvlink_domain_gpus=server.get("nvlink_domain_gpus", server["gpu_count"]),
        nic_gbps_per_gpu=compute_gbps / server["gpu_count"],
    )


def efficiencies_from_data(catalogue: Mapping[str, Any], policy: Mapping[str, Any], gpu_model: str) -> Efficiencies:
    """Return the default Efficiencies of ``gpu_model`` from the catalogue and policy documents.

    MAMF fractions: the GPU's ``mamf_bf16_tflops`` / ``mamf_fp8_tflops`` over its dense peaks, or the
    catalogue's ``step_time.mamf_fraction_unmeasured`` where the part has no measurement (an FP8 GPU
    without an FP8 measurement uses its BF16 fraction). The rest: ``step_time`` (GEMM share of MAMF, HBM
    fraction, S½) and the policy's ``interconnect`` section.
    """
    gpu = catalogue["gpus"][gpu_model]
    section = catalogue["step_time"]
    interconnect = policy["interconnect"]
    bf16 = gpu["mamf_bf16_tflops"] / gpu["bf16_tflops"] if "mamf_bf16_tflops" in gpu else None
    fp8 = None
    if gpu["fp8_tflops"] is not None:
        fp8 = gpu["mamf_fp8_tflops"] / gpu["fp8_tflops"] if "mamf_fp8_tflops" in gpu else bf16
    unmeasured = section["mamf_fraction_unmeasured"]
    return Efficiencies(
        mamf_bf16_fraction=bf16 if bf16 is not None else unmeasured,
        mamf_fp8_fraction=fp8 if fp8 is not None or gpu["fp8_tflops"] is None else unmeasured,
        gemm_fraction_of_mamf=section["gemm_fraction_of_mamf"],
        hbm_fraction=section["hbm_fraction"],
        nvlink_busbw_fraction=interconnect["nvlink_busbw_fraction"],
        pcie_busbw_fraction=interconnect["pcie_busbw_fraction"],
        nic_busbw_fraction=interconnect["nic_busbw_fraction"],
        collective_half_bytes=section["collective_half_mib"] * MIB,
        overlap_fraction=interconnect["overlap_fraction"],
    )


@dataclass(frozen=True)
class Rates:
    """The rates one GPU works at under a layout's precision."""

    gemm_flops_s: float  # at the layout's precision
    attention_flops_s: float  # 16-bit: attention, the output layer
    hbm_bytes_s: float
    domain_gpus: int
    domain_busbw_gbs: float  # collectives inside one NVLink domain
    link_gbs: float  # one direction of one GPU's NVLink (or PCIe), point-to-point
    nic_busbw_gbs: float  # per GPU, across domains


def achievable_rates(node: NodeSpec, eff: Efficiencies, measured: Measured, precision: str) -> Rates:
    """Return the GEMM, attention, HBM and link rates: nameplate × efficiency, or the measurement where given.

    GEMMs run at peak(precision) × MAMF fraction × gemm_fraction_of_mamf; attention and the output layer
    stay in 16-bit (Transformer Engine runs FP8 only in the linear layers). NVLink busbw is the
    per-direction rate × fraction (``interconnect.nvlink_busbw_gbs``); GPUs without NVLink use PCIe x16.
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
    hbm_tbs = measured.hbm_tbs if measured.hbm_tbs is not None else gpu.hbm_tbs * eff.hbm_fraction
    return Rates(gemm_flops_s=best * eff.gemm_fraction_of_mamf * TERA,
                  attention_flops_s=bf16_best * eff.gemm_fraction_of_mamf * TERA,
                  hbm_bytes_s=hbm_tbs * TERA, domain_gpus=node.domain_gpus,
                  domain_busbw_gbs=domain, link_gbs=link, nic_busbw_gbs=nic)


def require_step_figures(node: NodeSpec) -> None:
    """Refuses (InconsistentInput, naming the figure) a node the step model cannot time: its GPU's BF16 peak and
    HBM bandwidth and its compute-fabric rate per GPU must be known."""
    for name, value in (("bf16_tflops", node.gpu.bf16_tflops), ("hbm_tbs", node.gpu.hbm_tbs),
                        ("nic_gbps_per_gpu", node.nic_gbps_per_gpu)):
        if value is None:
            raise InconsistentInput(f"the step-time model needs {name} of {node.gpu.model}")

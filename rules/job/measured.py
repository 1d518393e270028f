"""What the job's measurements hold: storage, restore, power, topology, peak memory, scaling, nccl-tests and serving
latency runs."""

from __future__ import annotations

from dataclasses import dataclass

from rules.job.fields import at
from rules.job.given import Given


@dataclass(frozen=True)
class StorageMeasurement:
    """Measured storage bandwidth."""

    read_gbs: Given[float] = at("read_gbs")
    write_gbs: Given[float] = at("write_gbs")
    pointer: str = ""


@dataclass(frozen=True)
class RestoreTest:
    """A restore from a checkpoint, tried on the quoted system."""

    passed: Given[bool] = at("passed")
    restore_min: Given[float] = at("restore_min")
    pointer: str = ""


@dataclass(frozen=True)
class PowerMeasurement:
    """Measured sustained power draw."""

    sustained_w_per_node: Given[float] = at("sustained_w_per_node")
    pointer: str = ""


@dataclass(frozen=True)
class ScalingRun:
    """One measured training throughput at a GPU count."""

    gpus: Given[int] = at("gpus")
    tokens_per_s: Given[float] = at("tokens_per_s")
    pointer: str = ""


@dataclass(frozen=True)
class PeakMemoryRun:
    """One measured peak of GPU memory per GPU: the step's micro-batch and sequence, the retyped peaks, and
    PyTorch's own output (parsed by the facts)."""

    micro_batch: Given[int] = at("micro_batch")
    sequence_length: Given[int] = at("sequence_length")
    allocated_gib: Given[float] = at("allocated_gib")
    reserved_gib: Given[float] = at("reserved_gib")
    torch_memory: Given[str] = at("torch_memory")
    pointer: str = ""


@dataclass(frozen=True)
class NcclTestsRun:
    """One recorded nccl-tests run: its raw output (parsed by the facts), collective and node count."""

    nodes: Given[int] = at("nodes", 1)
    raw: Given[str] = at("raw")
    collective: Given[str] = at("collective")
    pointer: str = ""


@dataclass(frozen=True)
class TopologyMeasurement:
    """A node's measured topology: the ``nvidia-smi topo -m`` output (parsed by the facts) and the compute NICs."""

    nvidia_smi_topo_m: Given[str] = at("nvidia_smi_topo_m")
    compute_nics: Given[tuple[str, ...]] = at("compute_nics", scalars=True)
    pointer: str = ""


@dataclass(frozen=True)
class ServingLatencyRun:
    """One measured load point of a serving replica: p95 TTFT and TPOT at a concurrency (its prompt_tokens and
    tensor_parallel default to the serving workload's, which rules/checks/facts/serving_latency.py applies)."""

    batch: Given[int] = at("batch")
    ttft_ms: Given[float] = at("ttft_ms")
    tpot_ms: Given[float] = at("tpot_ms")
    prompt_tokens: Given[int] = at("prompt_tokens")
    context_tokens: Given[int] = at("context_tokens", lambda given: given["prompt_tokens"].value)
    tensor_parallel: Given[int] = at("tensor_parallel")
    pointer: str = ""


@dataclass(frozen=True)
class Measurements:
    """What was measured on the quoted system (raw tool outputs are parsed by the facts that read them)."""

    storage: StorageMeasurement = at("storage", section=StorageMeasurement)
    restore_test: RestoreTest = at("restore_test", section=RestoreTest)
    power: PowerMeasurement = at("power", section=PowerMeasurement)
    topology: TopologyMeasurement = at("topology", section=TopologyMeasurement)
    peak_memory: tuple[PeakMemoryRun, ...] = at("peak_memory", each=PeakMemoryRun)
    scaling: tuple[ScalingRun, ...] = at("scaling", each=ScalingRun)
    nccl_tests: tuple[NcclTestsRun, ...] = at("nccl_tests", each=NcclTestsRun)
    serving_latency: tuple[ServingLatencyRun, ...] = at("serving_latency", each=ServingLatencyRun)
    pointer: str = ""

"""The job a submission describes, typed: what is trained and served, how, on which hardware, what was measured.

Each leaf is a ``Given`` (value, JSON Pointer, source); sections mirror schemas/submission.schema.json, whose
member names the field metadata holds (``at``), so that the parser (rules/job/parse.py) is the one place that
walks the submission and applies defaults (``default``: a value, or a function of the section's other values).
The estimators' vocabulary (ModelShape, Layout, GpuSpec, NodeSpec) is built from these by the facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from rules.job.given import Given


def at(member: str, default: Any = None, *, section: type | None = None, each: type | None = None,
       keyed: bool = False) -> Any:
    """Declares a field read from the submission member ``member``: a leaf (with its ``default``), a nested
    ``section``, an array whose items are ``each``, or (``keyed``) an object whose members are leaves, as
    (name, Given) pairs in the submission's order."""
    return field(metadata={"at": member, "default": default, "section": section, "each": each, "keyed": keyed})


def member_pointer(section: Any, name: str) -> str:
    """Returns the JSON Pointer of the member that the field ``name`` of ``section`` is read from: how evidence names
    an array or an object of the submission, which has no Given of its own."""
    member = next(f.metadata["at"] for f in fields(section) if f.name == name)
    return f"{section.pointer}/{member}"


@dataclass(frozen=True)
class Architecture:
    """The transformer's architecture (Hugging Face config.json names in schemas/submission.schema.json)."""

    layers: Given[int] = at("layers")
    hidden: Given[int] = at("hidden")
    heads: Given[int] = at("heads")
    kv_heads: Given[int] = at("kv_heads", lambda given: given["heads"].value)  # no GQA: one KV head per head
    head_dim: Given[int] = at("head_dim")
    ffn_hidden: Given[int] = at("ffn_hidden")
    vocab: Given[int] = at("vocab")
    tied_embeddings: Given[bool] = at("tied_embeddings", False)
    mlp: Given[str] = at("mlp", "gelu")
    # Dropout masks are stored for GPT-style (gelu) models; Llama-style (swiglu) models train without.
    dropout: Given[bool] = at("dropout", lambda given: given["mlp"].value == "gelu")
    norm: Given[str] = at("norm", lambda given: "rmsnorm" if given["mlp"].value == "swiglu" else "layernorm")
    pointer: str = ""


@dataclass(frozen=True)
class Model:
    """A model of the workload: its name, parameter counts and architecture."""

    name: Given[str] = at("name")
    parameters: Given[float] = at("parameters")
    trainable_parameters: Given[float] = at("trainable_parameters", lambda given: given["parameters"].value)
    architecture: Architecture = at("architecture", section=Architecture)
    pointer: str = ""


@dataclass(frozen=True)
class Parallelism:
    """How the training job's GPUs are split and its state is sharded (the submitted layout)."""

    sharding: Given[str] = at("sharding", "ddp")
    tensor: Given[int] = at("tensor", 1)
    pipeline: Given[int] = at("pipeline", 1)
    context: Given[int] = at("context", 1)
    virtual_stages: Given[int] = at("virtual_stages", 1)
    shard_group: Given[int] = at("shard_group")
    sequence_parallel: Given[bool] = at("sequence_parallel", False)
    gradient_as_bucket_view: Given[bool] = at("gradient_as_bucket_view")
    offload: Given[str] = at("offload")
    pointer: str = ""


@dataclass(frozen=True)
class Throughput:
    """A stated training throughput: tokens per second per GPU, or an MFU or hardware rate."""

    tokens_per_s_per_gpu: Given[float] = at("tokens_per_s_per_gpu")
    mfu: Given[float] = at("mfu")
    hardware_tflops_per_gpu: Given[float] = at("hardware_tflops_per_gpu")
    mfu_peak_tflops: Given[float] = at("mfu_peak_tflops")
    measured_at_gpus: Given[int] = at("measured_at_gpus")
    pointer: str = ""


@dataclass(frozen=True)
class Checkpointing:
    """How often the training job checkpoints and what a checkpoint holds."""

    interval_min: Given[float] = at("interval_min")
    max_save_s: Given[float] = at("max_save_s")
    include_gradients: Given[bool] = at("include_gradients", False)
    pointer: str = ""


@dataclass(frozen=True)
class Reliability:
    """Failures and restarts of the training job."""

    node_mtbf_h: Given[float] = at("node_mtbf_h")
    restart_min: Given[float] = at("restart_min")
    pointer: str = ""


@dataclass(frozen=True)
class DataFeed:
    """The training data as the input pipeline reads it."""

    bytes_per_token: Given[float] = at("bytes_per_token")
    tokens_per_s_per_core: Given[float] = at("tokens_per_s_per_core")
    pointer: str = ""


@dataclass(frozen=True)
class Dataloader:
    """The dataloader's workers and pinned buffers on the host."""

    workers_per_gpu: Given[int] = at("workers_per_gpu")
    worker_rss_gib: Given[float] = at("worker_rss_gib")
    pinned_gib_per_gpu: Given[float] = at("pinned_gib_per_gpu")
    pointer: str = ""


@dataclass(frozen=True)
class Training:
    """The training workload: the model, its objective and number formats, the layout, the schedule."""

    objective: Given[str] = at("objective")
    model: Model = at("model", section=Model)
    precision: Given[str] = at("precision")
    optimizer: Given[str] = at("optimizer")
    parallelism: Parallelism = at("parallelism", section=Parallelism)
    activation_checkpointing: Given[str] = at("activation_checkpointing", "none")
    flash_attention: Given[bool] = at("flash_attention", False)
    sequence_length: Given[int] = at("sequence_length")
    micro_batch: Given[int] = at("micro_batch")
    global_batch: Given[int] = at("global_batch")
    gpus: Given[int] = at("gpus")
    node_group: Given[str] = at("node_group")
    dataset_tokens: Given[float] = at("dataset_tokens")
    epochs: Given[float] = at("epochs", 1)
    completion_window_days: Given[float] = at("completion_window_days")
    shared_cluster_utilisation: Given[float] = at("shared_cluster_utilisation")
    measured_queue_wait_days: Given[float] = at("measured_queue_wait_days")
    throughput: Throughput = at("throughput", section=Throughput)
    checkpoint: Checkpointing = at("checkpoint", section=Checkpointing)
    reliability: Reliability = at("reliability", section=Reliability)
    data: DataFeed = at("data", section=DataFeed)
    dataloader: Dataloader = at("dataloader", section=Dataloader)
    pointer: str = ""


@dataclass(frozen=True)
class Slo:
    """The serving latency objectives at the 95th percentile."""

    ttft_ms_p95: Given[float] = at("ttft_ms_p95")
    tpot_ms_p95: Given[float] = at("tpot_ms_p95")
    pointer: str = ""


@dataclass(frozen=True)
class Serving:
    """The inference workload: the served model, its formats and parallelism, its traffic and SLOs."""

    model: Model = at("model", section=Model)
    weight_precision: Given[str] = at("weight_precision")
    kv_cache_precision: Given[str] = at("kv_cache_precision")
    tensor_parallel: Given[int] = at("tensor_parallel")
    node_group: Given[str] = at("node_group")
    context_tokens: Given[int] = at("context_tokens")
    prompt_tokens: Given[int] = at("prompt_tokens")
    output_tokens: Given[int] = at("output_tokens")
    rps: Given[float] = at("rps")
    peak_factor: Given[float] = at("peak_factor")
    headroom: Given[float] = at("headroom")
    slo: Slo = at("slo", section=Slo)
    gpu_memory_utilization: Given[float] = at("gpu_memory_utilization")
    pointer: str = ""


@dataclass(frozen=True)
class QuotedGpu:
    """The GPUs of one quoted server: model and count, and the figures the quote or the catalogue states."""

    model: Given[str] = at("model")
    count: Given[int] = at("count")
    memory_gib: Given[float] = at("memory_gib")
    hbm_tbs: Given[float] = at("hbm_tbs")
    bf16_tflops: Given[float] = at("bf16_tflops")
    tdp_w: Given[float] = at("tdp_w")
    nvlink_gbs: Given[float] = at("nvlink_gbs")
    pointer: str = ""


@dataclass(frozen=True)
class QuotedCpu:
    """The CPUs of one quoted server."""

    model: Given[str] = at("model")
    sockets: Given[int] = at("sockets")
    cores_per_socket: Given[int] = at("cores_per_socket")
    pointer: str = ""


@dataclass(frozen=True)
class QuotedNic:
    """One line of a quoted server's NICs: how many, their line rate, and what they are for."""

    model: Given[str] = at("model")
    count: Given[int] = at("count")
    gbps: Given[float] = at("gbps")
    purpose: Given[str] = at("purpose")
    pointer: str = ""


@dataclass(frozen=True)
class QuotedNodeGroup:
    """A node group of the quote as submitted (catalogue fills included), each figure with its pointer."""

    name: Given[str] = at("name")
    count: Given[int] = at("count")
    server_model: Given[str] = at("server_model")
    unit_price: Given[float] = at("unit_price")
    gpu: QuotedGpu = at("gpu", section=QuotedGpu)
    cpu: QuotedCpu = at("cpu", section=QuotedCpu)
    host_memory_gib: Given[float] = at("host_memory_gib")
    nics: tuple[QuotedNic, ...] = at("nics", each=QuotedNic)
    local_nvme_tb: Given[float] = at("local_nvme_tb")
    max_power_w: Given[float] = at("max_power_w")
    rack_units: Given[float] = at("rack_units")
    pointer: str = ""


@dataclass(frozen=True)
class Fabric:
    """The compute fabric between the nodes."""

    technology: Given[str] = at("technology")
    topology: Given[str] = at("topology")
    link_gbps: Given[float] = at("link_gbps")
    oversubscription: Given[float] = at("oversubscription")
    pointer: str = ""


@dataclass(frozen=True)
class Storage:
    """The quoted shared storage."""

    kind: Given[str] = at("kind")
    capacity_tb: Given[float] = at("capacity_tb")
    read_gbs: Given[float] = at("read_gbs")
    write_gbs: Given[float] = at("write_gbs")
    pointer: str = ""


@dataclass(frozen=True)
class Pdus:
    """One line of a rack's power distribution units."""

    count: Given[int] = at("count")
    rating_kw: Given[float] = at("rating_kw")
    pointer: str = ""


@dataclass(frozen=True)
class Rack:
    """One line of the quote's racks: how many, their power budget, cooling, PDUs and redundancy."""

    name: Given[str] = at("name")
    count: Given[int] = at("count", 1)
    power_budget_kw: Given[float] = at("power_budget_kw")
    cooling: Given[str] = at("cooling")
    cooling_capacity_kw: Given[float] = at("cooling_capacity_kw")
    pdus: tuple[Pdus, ...] = at("pdus", each=Pdus)
    redundancy: Given[str] = at("redundancy", "N")
    node_groups: tuple[tuple[str, Given[int]], ...] = at("node_groups", keyed=True)  # nodes of each group per rack
    pointer: str = ""


@dataclass(frozen=True)
class LineItem:
    """One priced line of the quote."""

    sku: Given[str] = at("sku")
    description: Given[str] = at("description")
    quantity: Given[float] = at("quantity")
    unit_price: Given[float] = at("unit_price")
    pointer: str = ""


@dataclass(frozen=True)
class Cluster:
    """The quoted hardware: node groups, fabric, storage, racks and PDUs, and the priced lines."""

    vendor: Given[str] = at("vendor")
    quote_id: Given[str] = at("quote_id")
    currency: Given[str] = at("currency")
    node_groups: tuple[QuotedNodeGroup, ...] = at("node_groups", each=QuotedNodeGroup)
    fabric: Fabric = at("fabric", section=Fabric)
    storage: Storage = at("storage", section=Storage)
    racks: tuple[Rack, ...] = at("racks", each=Rack)
    line_items: tuple[LineItem, ...] = at("line_items", each=LineItem)
    pointer: str = ""

    def group_named(self, name: str | None) -> QuotedNodeGroup | None:
        """Returns the node group a workload names, else (``name`` None) the first with GPUs; None when none is."""
        for group in self.node_groups:
            if name is not None and group.name.value == name:
                return group
        if name is None:
            for group in self.node_groups:
                if group.gpu.count.value:
                    return group
        return None

    def group_at(self, pointer: str | None) -> QuotedNodeGroup | None:
        """Returns the node group whose JSON Pointer is ``pointer`` (a workload's, as its layout names it); None
        when none is."""
        return next((group for group in self.node_groups if group.pointer == pointer), None)


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
class Measurements:
    """What was measured on the quoted system (the arrays of runs are read by the facts that parse them)."""

    storage: StorageMeasurement = at("storage", section=StorageMeasurement)
    restore_test: RestoreTest = at("restore_test", section=RestoreTest)
    power: PowerMeasurement = at("power", section=PowerMeasurement)
    pointer: str = ""


@dataclass(frozen=True)
class Job:
    """The whole job of one submission: training and serving workloads, the quoted cluster, the measurements.

    Every section is there whether or not the submission holds it (its values then absent), so that a check can
    name what is missing; ``trains`` and ``serves`` say whether it holds each workload.
    """

    training: Training
    serving: Serving
    cluster: Cluster
    measurements: Measurements
    trains: bool
    serves: bool

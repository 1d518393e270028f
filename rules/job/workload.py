"""The workloads of the job: the training run (model, formats, layout, schedule, checkpoints, data) and serving."""

from __future__ import annotations

from dataclasses import dataclass

from rules.job.fields import at
from rules.job.given import Given


@dataclass(frozen=True)
class MixtureOfExperts:
    """The architecture's mixture-of-experts layers as submitted (``architecture.experts``; absent: a dense model).

    Each layer after the leading ``dense_layers`` replaces its MLP by a router over ``count`` routed experts of
    ``ffn_hidden``, ``active`` of which run per token, plus ``shared`` experts of ``shared_ffn_hidden`` every token
    runs through (Megatron-LM --num-experts, --moe-router-topk, --moe-ffn-hidden-size,
    --moe-shared-expert-intermediate-size, --moe-layer-freq).
    """

    count: Given[int] = at("count")
    active: Given[int] = at("active")
    ffn_hidden: Given[int] = at("ffn_hidden")
    shared: Given[int] = at("shared", 0)
    shared_ffn_hidden: Given[int] = at("shared_ffn_hidden", lambda given: given["ffn_hidden"].value)
    dense_layers: Given[int] = at("dense_layers", 0)
    pointer: str = ""


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
    experts: MixtureOfExperts = at("experts", section=MixtureOfExperts)
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
    expert: Given[int] = at("expert", 1)  # expert-parallel degree (Megatron-LM --expert-model-parallel-size)
    expert_tensor: Given[int] = at("expert_tensor", 1)  # expert tensor-parallel degree (--expert-tensor-parallel-size)
    virtual_stages: Given[int] = at("virtual_stages", 1)
    shard_group: Given[int] = at("shard_group")
    sequence_parallel: Given[bool] = at("sequence_parallel", False)
    tensor_comm_overlap: Given[bool] = at("tensor_comm_overlap", False)
    gradient_as_bucket_view: Given[bool] = at("gradient_as_bucket_view")
    offload: Given[str] = at("offload", "none")
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
    kernels: Given[str] = at("kernels", "fused")  # Megatron-Core/Transformer Engine fused kernels unless stated
    fp8_recipe: Given[str] = at("fp8_recipe", "delayed")  # Transformer Engine's default; read under fp8-mixed only
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


# The weight precisions whose 16-bit dtype the KV cache keeps, and the KV-cache precision of the others.
SIXTEEN_BIT, KV_CACHE_DEFAULT = ("bf16", "fp16"), "bf16"


def _kv_cache_default(weights: Given[str]) -> str | None:
    """Returns the KV-cache precision of weights in ``weights``: their own 16-bit dtype, else bf16."""
    return None if weights.value is None else weights.value if weights.value in SIXTEEN_BIT else KV_CACHE_DEFAULT


def _sum(*given: Given[int]) -> int | None:
    """Returns the sum of the values, or None when one is absent."""
    values = [g.value for g in given]
    return None if None in values else sum(values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ServingParallelism:
    """How a served mixture-of-experts model's routed experts are split (``inference.parallelism``)."""

    expert: Given[int] = at("expert", 1)
    expert_tensor: Given[int] = at("expert_tensor", 1)
    pointer: str = ""


@dataclass(frozen=True)
class Serving:
    """The inference workload: the served model, its formats and parallelism, its traffic and SLOs."""

    model: Model = at("model", section=Model)
    weight_precision: Given[str] = at("weight_precision")
    # vLLM's kv_cache_dtype "auto" keeps the model's 16-bit dtype; quantised and fp32 weights get a bf16 cache.
    kv_cache_precision: Given[str] = at("kv_cache_precision",
                                        lambda given: _kv_cache_default(given["weight_precision"]))
    tensor_parallel: Given[int] = at("tensor_parallel", 1)
    parallelism: ServingParallelism = at("parallelism", section=ServingParallelism)
    node_group: Given[str] = at("node_group")
    prompt_tokens: Given[int] = at("prompt_tokens")
    output_tokens: Given[int] = at("output_tokens")
    # A sequence's KV cache holds its prompt and every token it generates (vLLM allocates blocks for both).
    context_tokens: Given[int] = at("context_tokens",
                                    lambda given: _sum(given["prompt_tokens"], given["output_tokens"]))
    rps: Given[float] = at("rps")
    peak_factor: Given[float] = at("peak_factor")
    headroom: Given[float] = at("headroom")
    slo: Slo = at("slo", section=Slo)
    gpu_memory_utilization: Given[float] = at("gpu_memory_utilization")
    pointer: str = ""

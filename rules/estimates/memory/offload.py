"""Offloaded model state: what leaves the GPU under ZeRO-Offload and ZeRO-Infinity, what stays, what the host holds.

Pure functions; results are bytes (or parameter counts where the name says so). Sources, cited again where used:
- Ren et al., "ZeRO-Offload: Democratizing Billion-Scale Model Training", USENIX ATC 2021 (arXiv 2101.06840):
  the fp16 parameters stay on the GPU (2M bytes for M parameters); the fp16 gradients are moved to the CPU as
  backward produces them, where the fp32 master weights and the Adam moments live and are updated (2 + 12 = 14M).
- Rajbhandari et al., "ZeRO-Infinity: Breaking the GPU Memory Wall for Extreme Scale Deep Learning", SC'21
  (arXiv 2104.07857), and DeepSpeed ZeRO-3 ``offload_param``: the parameter partitions move to the host too, and
  a layer's parameters are gathered onto the GPU only while it computes (plus those prefetched for the next).
- DeepSpeed ``deepspeed/runtime/zero/config.py`` (DeepSpeedZeroConfig defaults): ``stage3_prefetch_bucket_size``
  5e7 elements, ``stage3_max_live_parameters`` 1e9, ``stage3_param_persistence_threshold`` 1e5;
  ``partitioned_param_coordinator.py`` (``fetch_sub_module``: prefetch while fewer than
  min(prefetch bucket, max live − available) elements are in flight); ``parameter_offload.py``
  (``mark_persistent_parameters``: numel ≤ threshold) and ``partition_parameters.py`` (persistent parameters
  stay whole on the GPU, offload or not); ``stage_1_and_2.py`` (under ``offload_optimizer`` the 16-bit
  gradient partition is copied into the pinned fp32 gradient buffer on the host).
- DeepSpeed ``docs/code-docs/source/memory.rst`` and the estimators in ``stage_1_and_2.py`` / ``stage3.py``:
  ``additional_buffer_factor=1.5`` over the host model state, "an additional buffer factor to be conservative"
  (pinned buffers and staging copies).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rules.estimates._args import (
    require_bool,
    require_non_negative,
    require_non_negative_int,
    require_positive,
    require_positive_int,
)
from rules.estimates.model.shapes import ModelShape

OFFLOADS: Final = ("none", "optimizer", "optimizer+parameters")


@dataclass(frozen=True)
class ZeroSettings:
    """DeepSpeed ZeRO values the policy fixes (rules/data/policy.default.json, ``memory.deepspeed``).

    The defaults are DeepSpeed's own: ``additional_buffer_factor`` of estimate_zero2/3_model_states_mem_needs,
    the three ``stage3_*`` defaults of DeepSpeedZeroConfig (deepspeed/runtime/zero/config.py), and the
    estimators' ``zero_init=True`` (``deepspeed.zero.Init``, which Hugging Face Transformers uses under ZeRO-3).
    """

    additional_buffer_factor: float = 1.5  # host bytes per byte of host model state (pinned and staging copies)
    stage3_prefetch_bucket_size: int = 50_000_000  # elements fetched ahead of use
    stage3_max_live_parameters: int = 1_000_000_000  # elements resident per GPU before prefetching stops
    stage3_param_persistence_threshold: int = 100_000  # parameters with at most this many elements stay whole
    zero_init: bool = True  # the model is built partitioned (deepspeed.zero.Init), not whole on every rank


# --------------------------------------------------------------------------------------------------
# What leaves the GPU
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RankState:
    """The model state one rank holds before anything is offloaded, bytes."""

    weights_bytes: float  # 16-bit weights (the shard under ZeRO-3/FSDP)
    gradients_bytes: float  # gradients in the training precision, as the sharding keeps them
    gradient_partition_bytes: float  # the share of those gradients this rank's optimizer updates
    fp32_gradient_bytes: float  # an fp32 copy of that share the optimizer steps on (DeepSpeed ZeRO-1/2), else 0
    optimizer_bytes: float  # fp32 master weights and moments of this rank's partition
    gradients_partitioned: bool  # ZeRO-2/3 and FSDP keep only the partition; ZeRO-1 keeps every gradient


@dataclass(frozen=True)
class OffloadedRank:
    """One rank's model state split between its GPU and its host, bytes."""

    gpu_weights_bytes: float
    gpu_gradients_bytes: float
    gpu_optimizer_bytes: float
    host_weights_bytes: float
    host_gradients_bytes: float
    host_optimizer_bytes: float

    @property
    def host_bytes(self) -> float:
        """Returns the bytes this rank keeps in host memory (before pinned buffers and staging copies)."""
        return self.host_weights_bytes + self.host_gradients_bytes + self.host_optimizer_bytes


def offload_rank_state(rank: RankState, offload_optimizer: bool, offload_parameters: bool) -> OffloadedRank:
    """Returns what stays on the GPU and what moves to the host (ZeRO-Offload, ATC'21; ZeRO-Infinity, SC'21).

    ``offload_optimizer`` (ZeRO-Offload, DeepSpeed ``offload_optimizer``): the optimizer state (fp32 master
    weights, moments) moves to the host, and so does the rank's gradient partition, which the host optimizer
    updates from: at its training width (ZeRO-Offload's fp16 gradients, 2 + 12 = 14 B/param) or, where the
    optimizer keeps an fp32 gradient copy, into that copy (DeepSpeed stage_1_and_2.py copies the 16-bit
    partition into the pinned fp32 buffer, so the host holds 4 + 12 = 16 B/param, no 16-bit copy). Gradients
    that ZeRO does not partition (ZeRO-1) stay on the GPU: the all-reduce needs every one of them.
    ``offload_parameters`` (ZeRO-Infinity, DeepSpeed ``offload_param``, FSDP ``CPUOffload``): the weight shard
    moves to the host too; what the GPU still gathers is :func:`zero3_working_set_bytes`.
    Reduction buckets on the GPU are communication buffers, not counted here.
    """
    require_bool("offload_optimizer", offload_optimizer)
    require_bool("offload_parameters", offload_parameters)
    for name in ("weights_bytes", "gradients_bytes", "gradient_partition_bytes", "fp32_gradient_bytes",
                 "optimizer_bytes"):
        require_non_negative(name, getattr(rank, name))
    gpu_gradients = rank.gradients_bytes + rank.fp32_gradient_bytes
    host_gradients = host_optimizer = 0.0
    if offload_optimizer:
        host_optimizer = rank.optimizer_bytes
        has_fp32_copy = rank.fp32_gradient_bytes > 0
        host_gradients = rank.fp32_gradient_bytes if has_fp32_copy else rank.gradient_partition_bytes
        gpu_gradients = 0.0 if rank.gradients_partitioned else rank.gradients_bytes
    return OffloadedRank(
        gpu_weights_bytes=0.0 if offload_parameters else rank.weights_bytes, gpu_gradients_bytes=gpu_gradients,
        gpu_optimizer_bytes=0.0 if offload_optimizer else rank.optimizer_bytes,
        host_weights_bytes=rank.weights_bytes if offload_parameters else 0.0, host_gradients_bytes=host_gradients,
        host_optimizer_bytes=host_optimizer)


# --------------------------------------------------------------------------------------------------
# What ZeRO-3 keeps gathered on the GPU
# --------------------------------------------------------------------------------------------------
def gathered_parameters_bytes(
    largest_layer_parameters: float, bytes_per_param: float = 2, prefetch_layers: int = 1
) -> float:
    """Return bytes of unsharded layer buffers under ZeRO-3/FSDP (DeepSpeed stage3.py; PyTorch FSDP prefetch).

    ``largest_layer_parameters × bytes_per_param × (1 + prefetch_layers)``: the layer being computed plus
    the ones gathered ahead. Defaults (2 bytes, 1 prefetched) give 4 × largest-layer parameters, which is
    both DeepSpeed's ``largest_layer_memory = 4 * largest_layer_params`` in
    ``deepspeed/runtime/zero/stage3.py`` (estimate_zero3_model_states_mem_needs) and PyTorch FSDP with
    forward/backward prefetch holding the current and the next unit unsharded (torch.distributed.fsdp,
    ``forward_prefetch`` / ``BackwardPrefetch.BACKWARD_PRE``). Set ``prefetch_layers=0`` for no prefetch.
    """
    require_non_negative("largest_layer_parameters", largest_layer_parameters)
    require_positive("bytes_per_param", bytes_per_param)
    require_non_negative_int("prefetch_layers", prefetch_layers)
    return largest_layer_parameters * bytes_per_param * (1 + prefetch_layers)


def persistent_parameters(shape: ModelShape, threshold: int) -> int:
    """Returns the parameters DeepSpeed ZeRO-3 never partitions: every tensor of at most ``threshold`` elements.

    DeepSpeed ``parameter_offload.py`` (mark_persistent_parameters: ``param.ds_numel <= param_threshold``) and
    ``partition_parameters.py`` (a persistent parameter's tensor stays on the GPU, with or without
    ``offload_param``). Counted per tensor of the decoder (HF ``modeling_llama.py`` layout): the two norms of
    each layer and the final norm (RMSNorm a weight of h, LayerNorm a weight and a bias of h), the projection
    biases where the shape has them, and any projection or embedding matrix that small; a mixture-of-experts
    layer's router (hidden × count) and expert matrices in place of its MLP's. Tensor parallelism is not taken into
    account (the whole tensor is counted), which errs on the large side.
    """
    require_positive_int("layers", shape.layers)
    require_positive_int("hidden", shape.hidden)
    require_positive_int("heads", shape.heads)
    require_non_negative_int("threshold", threshold)
    h, ffn = shape.hidden, shape.ffn_hidden_size
    head_dim = shape.head_dim or h // shape.heads
    q_width, kv_width = shape.heads * head_dim, shape.kv_head_count * head_dim
    up_matrices = 2 if shape.mlp == "swiglu" else 1
    norm = [h] * (1 if shape.norm == "rmsnorm" else 2)
    attention = [*norm, *norm, h * q_width, h * kv_width, h * kv_width, q_width * h]
    if shape.linear_biases:
        attention += [q_width, kv_width, kv_width, h]

    def mlp(inner: int, copies: int = 1) -> list[int]:
        return [*[h * inner] * up_matrices, inner * h, *([*[inner] * up_matrices, h] if shape.linear_biases else [])
                ] * copies
    model = [*norm]
    if shape.vocab:
        model += [shape.vocab * h] * (1 if shape.tied_embeddings else 2)
    experts, expert_layers = shape.experts, shape.expert_layers
    dense = [*attention, *mlp(ffn)]
    persistent = (shape.layers - expert_layers) * sum(n for n in dense if n <= threshold)
    if experts is not None:
        layer = [*attention, h * experts.count, *mlp(experts.ffn_hidden, experts.count),
                 *mlp(experts.shared_ffn_hidden_size, experts.shared)]
        persistent += expert_layers * sum(n for n in layer if n <= threshold)
    return persistent + sum(n for n in model if n <= threshold)


def zero3_working_set_bytes(largest_module_parameters: float, persistent: float, bytes_per_param: float,
                            settings: ZeroSettings) -> float:
    """Returns the bytes ZeRO-3 holds gathered on a GPU at once, with or without parameter offload.

    (2 × largest + prefetch + persistent) × bytes_per_param, in elements of the training precision:
    - the largest module's parameters, gathered while it computes, and its gradient, computed whole before it
      is reduce-scattered: DeepSpeed's own ``largest_layer_memory = 4 * largest_layer_params`` (stage3.py,
      estimate_zero3_model_states_mem_needs; memory.rst: "2 bytes fp16 params are gathered and 2 bytes fp16
      grads are computed");
    - the prefetch: partitioned_param_coordinator.py ``fetch_sub_module`` keeps gathering upcoming parameters
      while fewer than min(``stage3_prefetch_bucket_size``, ``stage3_max_live_parameters`` − available)
      elements are in flight (the last parameter may cross that limit; the crossing part is not counted);
    - the persistent parameters (:func:`persistent_parameters`), whole on every GPU.
    Defaults of deepspeed/runtime/zero/config.py in :class:`ZeroSettings`.
    """
    require_non_negative("largest_module_parameters", largest_module_parameters)
    require_non_negative("persistent", persistent)
    require_positive("bytes_per_param", bytes_per_param)
    require_non_negative_int("stage3_prefetch_bucket_size", settings.stage3_prefetch_bucket_size)
    require_non_negative_int("stage3_max_live_parameters", settings.stage3_max_live_parameters)
    room = max(0.0, settings.stage3_max_live_parameters - largest_module_parameters)
    prefetch = min(settings.stage3_prefetch_bucket_size, room)
    return (2 * largest_module_parameters + prefetch + persistent) * bytes_per_param


# --------------------------------------------------------------------------------------------------
# What the host holds
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HostModelState:
    """The model state one node's host RAM holds for the job's ranks on it, bytes."""

    state_bytes: float  # offloaded weights, gradients and optimizer state of the node's ranks
    buffer_bytes: float  # pinned buffers and staging copies on top of them
    basis: str  # how it was sized, in words for the record

    @property
    def total_bytes(self) -> float:
        """Returns the state and its buffers together."""
        return self.state_bytes + self.buffer_bytes


NO_HOST_MODEL_STATE: Final = HostModelState(0.0, 0.0, "nothing offloaded")


def offloaded_host_state(host_bytes_per_rank: float, ranks_on_node: int,
                         additional_buffer_factor: float) -> HostModelState:
    """Returns the node's host model state: its ranks' offloaded bytes, and (factor − 1) × that in buffers.

    Each rank offloads its own shard (:func:`offload_rank_state`), so the node holds ranks_on_node of them.
    Offload also needs pinned (page-locked) buffers for the host-device copies and staging copies of what is
    copied; DeepSpeed's estimators size them with ``additional_buffer_factor`` (1.5 in
    estimate_zero2/3_model_states_mem_needs; memory.rst: "an additional buffer factor to be conservative").
    """
    require_non_negative("host_bytes_per_rank", host_bytes_per_rank)
    require_positive_int("ranks_on_node", ranks_on_node)
    require_positive("additional_buffer_factor", additional_buffer_factor)
    if host_bytes_per_rank == 0:
        return NO_HOST_MODEL_STATE
    state = host_bytes_per_rank * ranks_on_node
    return HostModelState(state, state * (additional_buffer_factor - 1),
                          f"{ranks_on_node} ranks' offloaded state × the buffer factor {additional_buffer_factor:g}")


def from_buffered_total(total_bytes: float, additional_buffer_factor: float, basis: str) -> HostModelState:
    """Returns a host model state given with its buffers (DeepSpeed's per-CPU estimate) split into the two."""
    require_non_negative("total_bytes", total_bytes)
    require_positive("additional_buffer_factor", additional_buffer_factor)
    state = total_bytes / additional_buffer_factor
    return HostModelState(state, total_bytes - state, basis)

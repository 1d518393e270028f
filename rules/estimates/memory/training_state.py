"""A training job's model state on its most loaded GPU and on its node's host: one estimate for both.

peak-memory sizes the GPU from it and host-ram the host, so the two cannot disagree on what was offloaded.
Sources (cited again where used): ZeRO §5 and the byte conventions (rules/estimates/memory/model_state.py);
ZeRO-Offload, ZeRO-Infinity and DeepSpeed's ZeRO-3 working set (rules/estimates/memory/offload.py); DeepSpeed's own
estimators for the ``deepspeed`` convention (rules/estimates/memory/deepspeed_estimators.py); PyTorch FSDP's prefetch
(:func:`rules.estimates.memory.offload.gathered_parameters_bytes`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from rules.estimates.memory.deepspeed_estimators import (
    DeepSpeedOptions,
    deepspeed_node,
    largest_layer_memory,
    zero2_model_states_mem_needs,
    zero3_model_states_mem_needs,
)
from rules.estimates.memory.expert_state import expert_model_state_on_gpu
from rules.estimates.memory.model_state import (
    PARAMETER_SHARDED,
    ModelStatePerGpu,
    StateBytesPerParam,
    TrainedModel,
    effective_sharding,
    model_state_bytes_per_param,
    model_state_on_gpu,
)
from rules.estimates.memory.offload import (
    HostModelState,
    ZeroSettings,
    from_buffered_total,
    gathered_parameters_bytes,
    offloaded_host_state,
    persistent_parameters,
    zero3_working_set_bytes,
)
from rules.estimates.model.layout import Layout, with_sharding
from rules.estimates.model.parameters import first_stage_parameter_factor, largest_layer_parameters
from rules.estimates.model.shapes import ModelShape

DEEPSPEED_CONVENTION: Final = "deepspeed"
# The shardings DeepSpeed runs itself (its ZeRO stages); FSDP and DDP are sized the generic way in any convention.
DEEPSPEED_STAGES: Final = ("zero1", "zero2", "zero3")


@dataclass(frozen=True)
class StateSettings:
    """The policy's choices that size model state: the byte convention, FSDP's prefetch, DeepSpeed's ZeRO values."""

    convention: str  # a key of model_state.BYTE_CONVENTIONS (policy conventions.model_state_bytes)
    gathered_layers: int  # units FSDP holds unsharded at once (policy memory.gathered_layers)
    zero: ZeroSettings  # policy memory.deepspeed


@dataclass(frozen=True)
class TrainingModelState:
    """The model state of one GPU of a training job and of its node's host, bytes."""

    sharding: str  # as sized (ddp becomes zero1 under Megatron's distributed optimizer)
    state: StateBytesPerParam
    per_gpu: ModelStatePerGpu  # weights, gradients and optimizer state left on the GPU, and what its rank offloads
    gathered_bytes: float  # ZeRO-3's working set or FSDP's unsharded units, on the GPU
    host: HostModelState  # what the node's host holds for its ranks, buffers included
    first_stage_factor: float  # the most loaded pipeline stage's parameters over an even share


def host_holds_model_state(convention: str, offload: str) -> bool:
    """Returns whether the host holds model state: under offload, or by DeepSpeed's estimate of start-up."""
    return offload != "none" or convention == DEEPSPEED_CONVENTION


def training_model_state(model: TrainedModel, shape: ModelShape | None, offload: str, layout: Layout,
                         settings: StateSettings, sharding: str | None = None) -> TrainingModelState:
    """Returns the model state of ``model`` on one GPU of ``layout`` (or under another sharding) and on its host.

    GPU: :func:`rules.estimates.memory.model_state.model_state_on_gpu` for the most loaded pipeline stage (its share,
    :func:`rules.estimates.model.parameters.first_stage_parameter_factor`) with ``offload`` (ZeRO-Offload,
    ZeRO-Infinity), of a mixture of experts with its routed experts on the expert grid
    (:func:`rules.estimates.memory.expert_state.expert_model_state_on_gpu`), plus what ZeRO-3 or FSDP holds gathered
    (:func:`gathered_bytes`). Host: the node's ranks'
    offloaded state with DeepSpeed's buffer factor (:func:`rules.estimates.memory.offload.offloaded_host_state`);
    under the ``deepspeed`` convention and a DeepSpeed ZeRO stage, DeepSpeed's own per-CPU estimate instead
    (:func:`_deepspeed_host`), which also counts the fp32 model built at start-up.
    """
    sharding = effective_sharding(sharding or layout.sharding, settings.convention)
    layout = with_sharding(layout, sharding)
    state = model_state_bytes_per_param(model.precision, model.optimizer, settings.convention, sharding)
    stage_factor = first_stage_parameter_factor(shape, layout.pipeline)
    return sharded_model_state(model, shape, offload, layout, settings, state, stage_factor,
                               lambda: gathered_bytes(shape, sharding, state, settings, layout.expert_shards))


def sharded_model_state(model: TrainedModel, shape: ModelShape | None, offload: str, layout: Layout,
                        settings: StateSettings, state: StateBytesPerParam, stage_factor: float,
                        gathered_of: Callable[[], float]) -> TrainingModelState:
    """Returns :func:`training_model_state` of ``layout``, already under the sharding the state is sized with.

    From the pieces that do not depend on the data-parallel degree: the bytes per parameter ``state``
    (:func:`rules.estimates.memory.model_state.model_state_bytes_per_param` of that sharding), the first stage's
    share ``stage_factor`` and ``gathered_of``, which returns :func:`gathered_bytes` and is asked only under
    parameter sharding, after the GPU's share is sized (so that of two refusals the same one comes first):
    what a search over GPU counts computes once and passes to each count it tries.
    """
    sharding = layout.sharding
    if shape is not None and shape.experts is not None:
        per_gpu = expert_model_state_on_gpu(model, shape, layout, state, offload, stage_factor)
    else:
        per_gpu = model_state_on_gpu(model, layout, state, offload, stage_factor)
    gathered = gathered_of() if sharding in PARAMETER_SHARDED else 0.0
    if settings.convention == DEEPSPEED_CONVENTION and sharding in DEEPSPEED_STAGES:
        host = _deepspeed_host(model, shape, offload, layout, stage_factor, settings.zero)
    else:
        host = offloaded_host_state(per_gpu.host_offload_bytes, layout.gpus_on_node,
                                    settings.zero.additional_buffer_factor)
    return TrainingModelState(sharding=sharding, state=state, per_gpu=per_gpu, gathered_bytes=gathered, host=host,
                              first_stage_factor=stage_factor)


def _largest_module(shape: ModelShape | None) -> int:
    """Returns the largest module's parameters (DeepSpeed gathers module by module); 0 when not known."""
    if shape is None or shape.vocab is None:
        return 0
    return largest_layer_parameters(shape, "module")


def gathered_bytes(shape: ModelShape | None, sharding: str, state: StateBytesPerParam,
                   settings: StateSettings, expert_shards: int = 1) -> float:
    """Returns the bytes held unsharded: ZeRO-3's working set (per module) or FSDP's units (per decoder layer).

    ZeRO-3: :func:`rules.estimates.memory.offload.zero3_working_set_bytes` with DeepSpeed's stage-3 defaults; under
    the ``deepspeed`` convention DeepSpeed's estimator's own 4 × largest_layer_params. FSDP:
    ``settings.gathered_layers`` decoder layers (transformer_auto_wrap_policy units, the current one and those
    prefetched), a mixture-of-experts layer with its routed experts split over ``expert_shards`` ranks. 0 when the
    architecture is not known.
    """
    if shape is None or shape.vocab is None:
        return 0.0
    if sharding == "zero3":
        largest = _largest_module(shape)
        if settings.convention == DEEPSPEED_CONVENTION:
            return largest_layer_memory(largest)
        persistent = persistent_parameters(shape, settings.zero.stage3_param_persistence_threshold)
        return zero3_working_set_bytes(largest, persistent, state.weights_bytes_per_param, settings.zero)
    return gathered_parameters_bytes(largest_layer_parameters(shape, "block", expert_shards),
                                     bytes_per_param=state.weights_bytes_per_param,
                                     prefetch_layers=settings.gathered_layers - 1)


def _deepspeed_host(model: TrainedModel, shape: ModelShape | None, offload: str, layout: Layout,
                    stage_factor: float, zero: ZeroSettings) -> HostModelState:
    """Returns the node's host model state as DeepSpeed's estimator for the layout's ZeRO stage gives it.

    Each model-parallel slice (parameters × stage share / (t × p)) is one DeepSpeed ZeRO group over the
    layout's data × context ranks, ``dp_ranks_per_node`` of them on a node: the estimator's
    ``num_gpus_per_node`` and ``num_nodes``. A node hosts gpus_on_node / dp_ranks_per_node slices. Without
    tensor or pipeline parallelism that is DeepSpeed's own call on the job's GPUs per node and nodes.
    ZeRO-1 uses the stage_1_and_2.py estimator that serves both stages (DeepSpeed names it zero2). The
    estimators assume 16-bit mixed precision and Adam, whatever the job's precision and optimizer.
    """
    ranks_per_node = layout.dp_ranks_per_node
    hardware = deepspeed_node(ranks_per_node, math.ceil(layout.shard_ranks / ranks_per_node))
    options = DeepSpeedOptions(cpu_offload=offload != "none", cpu_offload_params=offload == "optimizer+parameters",
                               zero_init=zero.zero_init, additional_buffer_factor=zero.additional_buffer_factor)
    slice_parameters = model.parameters * stage_factor / layout.model_parallel
    if layout.sharding == "zero3":
        needs = zero3_model_states_mem_needs(slice_parameters, _largest_module(shape), hardware, options)
        name = "stage3.py estimate_zero3_model_states_mem_needs"
    else:
        needs = zero2_model_states_mem_needs(slice_parameters, hardware, options)
        name = "stage_1_and_2.py estimate_zero2_model_states_mem_needs"
    slices = max(1, layout.gpus_on_node // ranks_per_node)
    basis = f"DeepSpeed {name}, per CPU" + (f", × {slices} model-parallel slices" if slices > 1 else "")
    return from_buffered_total(needs.cpu_bytes * slices, zero.additional_buffer_factor, basis)

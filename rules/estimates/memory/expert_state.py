"""The model state of a mixture-of-experts model on one GPU: its routed experts on the expert grid, the rest as a dense
model's.

Megatron-Core lays the routed experts out on a grid of their own (rules/estimates/model/layout.py): each rank holds
1 / (expert × expert_tensor) of every stage's routed experts, and their gradients are reduced, and the distributed
optimizer shards their state, over the expert-data-parallel ranks (gpus / (expert_tensor × expert × pipeline)); the
attention, norms, routers, shared experts and embeddings are split over tensor × pipeline and sharded over the data ×
context ranks, as a dense model's are. Megatron-LM ``megatron/training/theoretical_memory_usage.py`` at commit
a7c9e8c44ae89bea013a085ef33ab52a9b7a19b4 sizes the two parts so: ``expert_sharded_params_on_most_loaded_shard ×
num_bytes_per_parameter(expert_data_parallel_size)`` beside the others × ``num_bytes_per_parameter(data_parallel_size)``
(:func:`rules.estimates.model.parameters.megatron_weight_and_optimizer_bytes` reproduces it). ZeRO and FSDP shard
each part over its own data-parallel ranks the same way (DeepSpeed-MoE's expert data-parallel groups; PyTorch FSDP
with expert parallelism shards the experts' units over the ranks that hold the same experts). Pure; bytes.
"""

from __future__ import annotations

import math

from rules.errors import InconsistentInput
from rules.estimates.memory.model_state import (
    PARAMETER_SHARDED,
    ModelStatePerGpu,
    StateBytesPerParam,
    TrainedModel,
    model_state_on_gpu,
    model_state_per_gpu_bytes,
)
from rules.estimates.model.layout import Layout
from rules.estimates.model.parameters import routed_expert_parameters
from rules.estimates.model.shapes import ModelShape


def expert_model_state_on_gpu(model: TrainedModel, shape: ModelShape, layout: Layout,
                              bytes_per_param: StateBytesPerParam, offload: str,
                              stage_factor: float = 1.0) -> ModelStatePerGpu:
    """Returns the model state of a mixture of experts on one GPU of ``layout``: the two parts' sum.

    Routed experts: X = :func:`rules.estimates.model.parameters.routed_expert_parameters` of the shape, split over
    expert × expert_tensor ranks and the p stages (evenly, as Megatron-LM splits them) and sharded over the
    ``layout.expert_data_parallel`` ranks under the layout's sharding (fsdp-hybrid: its shard group's common divisor
    with them), :func:`rules.estimates.memory.model_state.model_state_per_gpu_bytes`. The rest, the stated parameters
    less X: :func:`rules.estimates.memory.model_state.model_state_on_gpu` with the first stage's ``stage_factor``
    (:func:`rules.estimates.model.parameters.first_stage_parameter_factor`, of the parameters besides the routed
    experts). Trainable parameters (adapters) are taken in the same proportion in both parts. Offload moves both
    parts' optimizer state (and, with ``optimizer+parameters``, weights) alike.

    InconsistentInput when the stated parameters do not exceed the routed experts the architecture counts.
    """
    routed = routed_expert_parameters(shape)
    if routed >= model.parameters:
        raise InconsistentInput(f"parameters {model.parameters:,.0f} do not exceed the {routed:,} parameters of the "
                                "routed experts the architecture holds; state the model's total parameters")
    trainable_share = model.trainable_parameters / model.parameters
    others = TrainedModel(model.parameters - routed, (model.parameters - routed) * trainable_share, model.precision,
                          model.optimizer)
    dense = model_state_on_gpu(others, layout, bytes_per_param, offload, stage_factor)
    sharding = layout.sharding
    expert_data_parallel = layout.expert_data_parallel
    shard_group = (math.gcd(layout.shard_group, expert_data_parallel)
                   if sharding == "fsdp-hybrid" and layout.shard_group else None)
    experts = model_state_per_gpu_bytes(
        parameters=routed, trainable_parameters=routed * trainable_share, bytes_per_param=bytes_per_param,
        sharding=sharding, data_parallel=expert_data_parallel, tensor_parallel=layout.expert_shards,
        pipeline_parallel=layout.pipeline, shard_group=shard_group,
        offload_optimizer=offload in ("optimizer", "optimizer+parameters") and sharding != "ddp",
        offload_parameters=offload == "optimizer+parameters" and sharding in PARAMETER_SHARDED)
    return ModelStatePerGpu(
        weights_bytes=dense.weights_bytes + experts.weights_bytes,
        gradients_bytes=dense.gradients_bytes + experts.gradients_bytes,
        optimizer_bytes=dense.optimizer_bytes + experts.optimizer_bytes,
        host_offload_bytes=dense.host_offload_bytes + experts.host_offload_bytes,
        host_gradients_bytes=dense.host_gradients_bytes + experts.host_gradients_bytes)

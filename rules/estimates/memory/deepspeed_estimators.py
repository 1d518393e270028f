"""DeepSpeed's own model-state memory estimators, reproduced: per-GPU and per-node host bytes for ZeRO-2 and ZeRO-3.

DeepSpeed ships two public estimators, ``estimate_zero2_model_states_mem_needs`` in
``deepspeed/runtime/zero/stage_1_and_2.py`` and ``estimate_zero3_model_states_mem_needs`` in
``deepspeed/runtime/zero/stage3.py``; ``docs/code-docs/source/memory.rst`` explains their multipliers and prints
their tables ("per CPU" is one node's host RAM, "per GPU" one GPU's memory). These functions return the same
integers for the same inputs, so the ``deepspeed`` model-state convention can be held against them to the byte.
The float expressions are evaluated in DeepSpeed's order (``total_params * 18 * gpus_factor * factor`` with
gpus_factor = 1 / num_nodes) so that rounding matches too.

Their multipliers (memory.rst "Discussion"): 2 bytes per 16-bit parameter; 18 = 2 (16-bit gradients) + 4 (fp32
gradients) + 4 (fp32 master) + 8 (Adam momentum and variance) on the GPU under ZeRO-2 (stage_1_and_2.py comment);
under ZeRO-3 18 = 2 (16-bit parameters) + 16 (fp32 parameters, gradients, momentum, variance) and 16 without the
16-bit parameters; 4 × the largest layer's parameters gathered (16-bit parameters and gradients); and 4 bytes
per parameter of the fp32 model each process builds on the CPU before it is moved or partitioned
(``4 * num_gpus_per_node``; ZeRO-2 with offload multiplies by all GPUs, ``4 * total_gpus``, as the code has it).
The ZeRO-2 GPU figure without offload is the one since DeepSpeed PR #5099 (commit f4cb866, June 2024:
2Ψ + 18Ψ/N, was 4Ψ + 16Ψ/N); memory.rst's printed ZeRO-2 table still shows the earlier figure.

The estimators' hardware arguments ``num_gpus_per_node`` and ``num_nodes`` are a NodeSpec's ``gpus_per_node``
and ``nodes`` (rules/estimates/model/hardware.py; only the counts are read).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rules.estimates._args import require_bool, require_non_negative, require_positive
from rules.estimates.model.hardware import GpuSpec, NodeSpec

# Bytes per parameter the estimators use (memory.rst, "Discussion").
PARAM_16BIT_BYTES: Final = 2  # a 16-bit (fp16/bf16) parameter
FP32_MODEL_BYTES: Final = 4  # one fp32 copy of the model, as PyTorch builds it by default
ZERO2_SHARDED_GPU_BYTES: Final = 18  # 16-bit + fp32 gradients, fp32 master, momentum, variance (ZeRO-2, GPU)
ZERO3_SHARDED_GPU_BYTES: Final = 18  # 16-bit parameters + fp32 parameters, gradients, momentum, variance
FP32_STATE_BYTES: Final = 16  # fp32 parameters, gradients, momentum, variance (the host side of offload)
ZERO3_OFFLOAD_ALL_BYTES: Final = 18  # the same plus the 16-bit parameters (offload_param)
GATHERED_LAYER_BYTES: Final = 4  # 16-bit parameters and gradients of the largest layer


@dataclass(frozen=True)
class DeepSpeedOptions:
    """The estimators' options, with DeepSpeed's defaults (``cpu_offload_params`` and ``zero_init``: ZeRO-3 only)."""

    cpu_offload: bool = True
    cpu_offload_params: bool = True
    zero_init: bool = True
    additional_buffer_factor: float = 1.5


@dataclass(frozen=True)
class ModelStatesMemNeeds:
    """An estimator's answer: host bytes of one node ("per CPU") and bytes of one GPU, as DeepSpeed returns them."""

    cpu_bytes: int
    gpu_bytes: int
    largest_layer_bytes: int = 0  # ZeRO-3's largest_layer_memory (part of gpu_bytes); 0 for ZeRO-2


def largest_layer_memory(largest_layer_params: float) -> float:
    """Returns ZeRO-3's gathered bytes: 4 × the largest layer's parameters (stage3.py, memory.rst).

    "2 bytes fp16 params are gathered and 2 bytes fp16 grads are computed (total 4x)".
    """
    require_non_negative("largest_layer_params", largest_layer_params)
    return GATHERED_LAYER_BYTES * largest_layer_params


def deepspeed_node(num_gpus_per_node: int = 1, num_nodes: int = 1) -> NodeSpec:
    """Returns the estimators' hardware as a NodeSpec: DeepSpeed's ``num_gpus_per_node`` and ``num_nodes`` (both
    default to 1 in DeepSpeed); the GPU's figures do not enter these estimators."""
    return NodeSpec(GpuSpec(), gpus_per_node=num_gpus_per_node, nodes=num_nodes)


def _check(total_params: float, hardware: NodeSpec, options: DeepSpeedOptions) -> None:
    require_positive("total_params", total_params)
    for name in ("cpu_offload", "cpu_offload_params", "zero_init"):
        require_bool(name, getattr(options, name))
    require_positive("additional_buffer_factor", options.additional_buffer_factor)


def zero2_model_states_mem_needs(total_params: float, hardware: NodeSpec,
                                 options: DeepSpeedOptions) -> ModelStatesMemNeeds:
    """Returns DeepSpeed's ZeRO-2 estimate (stage_1_and_2.py, estimate_zero2_model_states_mem_needs).

    With ``cpu_offload`` the GPU keeps the 16-bit parameters (2Ψ) and each node's host
    Ψ × max(4 × total GPUs, 16) × factor; without it the GPU holds 2Ψ + ⌊18Ψ / total GPUs⌋ and the host only
    the fp32 model each process builds at start-up, Ψ × 4 × GPUs per node × factor. ``cpu_offload_params``
    and ``zero_init`` do not apply to ZeRO-2. Both results are truncated to whole bytes, as DeepSpeed does.
    """
    _check(total_params, hardware, options)
    factor, total_gpus = options.additional_buffer_factor, hardware.gpus
    if options.cpu_offload:
        gpu = PARAM_16BIT_BYTES * total_params
        cpu = total_params * max(FP32_MODEL_BYTES * total_gpus, FP32_STATE_BYTES) * factor
    else:
        gpu = PARAM_16BIT_BYTES * total_params + int(ZERO2_SHARDED_GPU_BYTES * total_params / total_gpus)
        cpu = total_params * FP32_MODEL_BYTES * hardware.gpus_per_node * factor
    return ModelStatesMemNeeds(cpu_bytes=int(cpu), gpu_bytes=int(gpu))


def zero3_model_states_mem_needs(total_params: float, largest_layer_params: float, hardware: NodeSpec,
                                 options: DeepSpeedOptions) -> ModelStatesMemNeeds:
    """Returns DeepSpeed's ZeRO-3 estimate (stage3.py, estimate_zero3_model_states_mem_needs).

    L = 4 × largest_layer_params on every GPU, plus, by offload:
    - parameters and optimizer offloaded: nothing more on the GPU; host Ψ × 18 / nodes × factor
      (with ``zero_init``), else Ψ × max(4 × GPUs per node, 18 / nodes) × factor;
    - optimizer offloaded only: ⌊2Ψ / total GPUs⌋ on the GPU; host Ψ × 16 / nodes × factor, else
      Ψ × max(4 × GPUs per node, 16 / nodes) × factor;
    - nothing offloaded: ⌊18Ψ / total GPUs⌋ on the GPU; host largest_layer_params × 4 × GPUs per node × factor
      with ``zero_init`` (the model is built layer by layer, partitioned), else Ψ × 4 × GPUs per node × factor.
    ``cpu_offload_params`` counts only with ``cpu_offload``, as in DeepSpeed. Results are truncated to bytes.
    """
    _check(total_params, hardware, options)
    require_non_negative("largest_layer_params", largest_layer_params)
    factor, per_node = options.additional_buffer_factor, hardware.gpus_per_node
    node_share = 1 / hardware.nodes  # DeepSpeed's gpus_factor
    gathered = largest_layer_memory(largest_layer_params)
    if not options.cpu_offload:
        gpu = gathered + int(ZERO3_SHARDED_GPU_BYTES * total_params / hardware.gpus)
        built = largest_layer_params if options.zero_init else total_params
        cpu = built * FP32_MODEL_BYTES * per_node * factor
        return ModelStatesMemNeeds(cpu_bytes=int(cpu), gpu_bytes=int(gpu), largest_layer_bytes=int(gathered))
    if options.cpu_offload_params:
        host_bytes, gpu = ZERO3_OFFLOAD_ALL_BYTES, gathered
    else:
        host_bytes = FP32_STATE_BYTES
        gpu = gathered + int(PARAM_16BIT_BYTES * total_params / hardware.gpus)
    if options.zero_init:
        cpu = total_params * host_bytes * node_share * factor
    else:
        cpu = total_params * max(FP32_MODEL_BYTES * per_node, host_bytes * node_share) * factor
    return ModelStatesMemNeeds(cpu_bytes=int(cpu), gpu_bytes=int(gpu), largest_layer_bytes=int(gathered))

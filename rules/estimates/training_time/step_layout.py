"""What the step-time model (rules/estimates/training_time/step_time.py) requires of a layout, the slice of a layer
one GPU runs, and one data-parallel group's collectives per step.

The checks are Megatron-LM's (``megatron/training/arguments.py``) where the model cannot time what it refuses;
collective volumes are ZeRO's (Rajbhandari et al. 2020, arXiv 1910.02054, §7.2) as
``rules.estimates.communication.collectives`` counts them.
"""

from __future__ import annotations

import math
from typing import Final

from rules.errors import InconsistentInput
from rules.estimates._args import require_bool, require_choice, require_positive_int
from rules.estimates.communication.collectives import (
    PassTimes,
    communication_bytes_per_step,
    communication_time_by_pass,
)
from rules.estimates.model.layout import Layout
from rules.estimates.training_time.fp8_casts import FP8_RECIPES
from rules.estimates.training_time.memory_bound import KERNEL_STYLES
from rules.estimates.training_time.step_time_figures import Rates
from rules.estimates.training_time.transformer_work import RECOMPUTE_MODES, LayerSlice

PRECISIONS: Final = ("bf16-mixed", "fp16-mixed", "fp8-mixed")
SHARDINGS: Final = ("ddp", "zero1", "zero2", "zero3", "fsdp-full", "fsdp-hybrid")
GRADIENT_BYTES: Final = 2  # bf16 gradients on the wire (ZeRO paper convention, rules.estimates.memory.step_memory)


def require_step_layout(layout: Layout) -> None:
    """Raises InconsistentInput unless ``layout`` can be stepped: positive degrees and batch, known recompute,
    sharding, precision, kernels and fp8 recipe, a global batch that splits into whole micro-batches per
    data-parallel rank, virtual stages only with a pipeline (interleaving splits pipeline stages), and of a mixture of
    experts expert_tensor 1 (not modelled beyond) and sequence parallelism where expert and tensor parallelism meet."""
    for name in ("micro_batch", "global_batch", "tensor", "pipeline", "virtual_stages", "context", "data_parallel"):
        require_positive_int(name, getattr(layout, name))
    require_choice("recompute", layout.recompute, RECOMPUTE_MODES)
    require_choice("sharding", layout.sharding, SHARDINGS)
    require_choice("precision", layout.precision, PRECISIONS)
    require_choice("kernels", layout.kernels, KERNEL_STYLES)
    require_choice("fp8_recipe", layout.fp8_recipe, FP8_RECIPES)
    require_bool("sequence_parallel", layout.sequence_parallel)
    require_bool("flash_attention", layout.flash_attention)
    if layout.global_batch % (layout.micro_batch * layout.data_parallel):  # type: ignore[operator]
        raise InconsistentInput(f"global_batch ({layout.global_batch}) must be a multiple of micro_batch × data "
                                f"({layout.micro_batch} × {layout.data_parallel})")
    if layout.virtual_stages > 1 and layout.pipeline == 1:
        raise InconsistentInput("virtual_stages > 1 needs pipeline > 1 (interleaving splits pipeline stages)")
    if layout.expert_tensor > 1:
        raise InconsistentInput(f"expert_tensor ({layout.expert_tensor}) > 1 is not modelled: the step-time model "
                                "times each routed expert whole on one GPU")
    if layout.expert > 1 and layout.tensor > 1 and not layout.sequence_parallel:
        raise InconsistentInput("expert parallelism with tensor parallelism needs sequence_parallel (Megatron-LM "
                                "megatron/training/arguments.py)")


def layer_slice(layout: Layout, sequence_length: int) -> LayerSlice:
    """Returns one micro-batch's share of a transformer layer on one GPU of ``layout``."""
    return LayerSlice(sequence_length, layout.micro_batch, layout.tensor, layout.context,  # type: ignore[arg-type]
                      layout.sequence_parallel and layout.tensor > 1, layout.flash_attention,
                      layout.tensor_comm_overlap and layout.tensor > 1, layout.kernels, layout.fp8_recipe)


def dp_group_times(rates: Rates, sharding: str, parameters: float, trainable: float, ranks: int, stride: int,
                   micro_batches: int) -> PassTimes:
    """Returns the seconds per step, by pass, of one data-parallel group's collectives over ``ranks`` ranks spaced
    ``stride`` apart (``collectives.communication_bytes_per_step`` of its ``parameters``): inside an NVLink domain at
    its busbw, across domains at the NICs of the group's members per domain (fsdp-hybrid: whole shard groups)."""
    members = max(1, min(ranks, rates.domain_gpus // stride))  # data-parallel ranks per NVLink domain
    if sharding == "fsdp-hybrid" and ranks % members:
        members = math.gcd(ranks, members)
    step = communication_bytes_per_step(
        sharding, parameters=parameters, data_parallel_ranks=ranks, ranks_per_node=members,
        bytes_per_element=GRADIENT_BYTES, accumulation_steps=micro_batches, trainable_parameters=trainable)
    cluster = min(rates.domain_busbw_gbs, rates.nic_busbw_gbs * members)
    return communication_time_by_pass(step, rates.domain_busbw_gbs, cluster)

"""Facts about a served mixture of experts: what its tokens run through, the weights a step touches, the all-to-all.

Reads the served model's architecture (``inference.model.architecture``, filled by name from the model catalogue),
the expert split (``inference.parallelism``), the serving node group's NVLink and the catalogue's all-to-all
bandwidth fractions (``step_time.all_to_all``, as the training step model reads them) and the policy's routed load
factor (``memory.moe.dropless_load_factor``: serving engines drop no tokens), and calls
rules/estimates/serving/experts.py. Nothing is computed or decided here.
"""

from __future__ import annotations

from typing import Any

from rules.checks.base import Context
from rules.checks.facts.model import COUNTED_DIMENSIONS, shape_of
from rules.checks.facts.serving import ServingMemory
from rules.estimates.model.hardware import GpuSpec
from rules.estimates.serving import experts as serving_experts
from rules.estimates.serving.experts import AllToAllLinks, ServedExperts
from rules.estimates.training_time.step_time_figures import all_to_all_gbs
from rules.units import bytes_to_gib, s_to_ms


def served_experts(ctx: Context, memory: ServingMemory) -> ServedExperts | None:
    """Returns the served mixture of experts (None: a dense model, or an architecture not stated in full, its
    counted dimensions noted missing). Raises InconsistentInput for an expert split the model cannot serve."""
    serving = ctx.job.serving
    stated = serving.model.architecture
    if stated.experts.count.value is None or memory.replica is None:
        return None
    missing = [name for name in COUNTED_DIMENSIONS if ctx.needed(getattr(stated, name)) is None]
    shape = shape_of(ctx, stated)
    if missing or shape is None or shape.experts is None:
        return None
    expert = int(ctx.value(serving.parallelism.expert))
    tensor_parallel = memory.replica.tensor_parallel
    serving_experts.serving_split(shape.experts.count, expert, int(ctx.value(serving.parallelism.expert_tensor)),
                                  tensor_parallel, memory.hardware.domain_gpus)
    links = None
    if expert > 1:
        group = memory.group
        fractions = ctx.inputs.catalogue.document["step_time"]["all_to_all"]
        gpu = GpuSpec(model=memory.hardware.gpu.model, nvlink_gbs=ctx.value(group.gpu.nvlink_gbs) or 0.0)
        domain_gbs, nic_gbs = all_to_all_gbs(gpu, None, fractions["nvlink_fraction"], fractions["nic_fraction"])
        links = AllToAllLinks(domain_gpus=memory.hardware.domain_gpus, domain_gbs=domain_gbs, nic_gbs=nic_gbs,
                              load_factor=ctx.setting("memory.moe.dropless_load_factor"))
    return serving_experts.served_experts(shape, memory.replica.weight_bytes, expert, links)


def experts_evidence(experts: ServedExperts, memory: ServingMemory, batch: int) -> dict[str, Any]:
    """Returns the inference-capacity evidence of a mixture of experts at ``batch`` (GiB per GPU, ms per step)."""
    replica = memory.replica
    assert replica is not None  # served_experts returned experts
    decode = serving_experts.expert_decode(experts, replica.weight_bytes, replica.tensor_parallel, batch)
    return {"experts": experts.count, "active_experts": experts.active, "expert_parallel": experts.expert_parallel,
            "active_parameters": experts.active_parameters, "flops_per_token": decode.flops_per_token,
            "experts_batch": batch, "experts_hit_per_layer": decode.experts_hit,
            "weights_read_gib_per_gpu": bytes_to_gib(decode.weight_bytes_read_per_gpu),
            "all_to_all_ms_per_step": s_to_ms(decode.all_to_all_s)}

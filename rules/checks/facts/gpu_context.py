"""The CUDA context on the training GPU: from the catalogue's figures for the quoted model, else the policy's."""

from __future__ import annotations

from dataclasses import dataclass

from rules.checks.base import Context
from rules.estimates.memory.gpu_context import cuda_context
from rules.estimates.model.hardware import GpuSpec
from rules.job.cluster import QuotedNodeGroup

# The catalogue fields that size the GPU-dependent part of the context (schemas/catalogue.schema.json, 13).
CONTEXT_FIELDS = ("sm_count", "max_threads_per_sm", "blas_workspace_mib")


@dataclass(frozen=True)
class ContextFigure:
    """The CUDA context per GPU the memory checks count, and which source gave it."""

    gib: float
    source: str


def training_cuda_context(ctx: Context, group: QuotedNodeGroup | None) -> ContextFigure:
    """Returns the CUDA context per GPU of the node group ``group`` (None when not known).

    For a catalogued GPU with the fields of convention 13, the policy's driver share (memory.cuda_driver_gib)
    plus its local memory and cuBLAS workspace (rules/estimates/memory/gpu_context.py); otherwise the policy's
    whole-context figure memory.cuda_context_gib.
    """
    model = ctx.value(group.gpu.model) if group is not None else None
    spec = ctx.inputs.catalogue.gpu(model) if model else None
    if spec is None or any(name not in spec for name in CONTEXT_FIELDS):
        fallback = ctx.setting("memory.cuda_context_gib")
        if model is None:
            return ContextFigure(fallback, "policy memory.cuda_context_gib (GPU model not stated)")
        why = "not in the catalogue" if spec is None else "has no published SM count in the catalogue"
        return ContextFigure(fallback, f"policy memory.cuda_context_gib (GPU model {model} {why})")
    driver_gib = ctx.setting("memory.cuda_driver_gib")
    gpu = GpuSpec(model, sm_count=spec["sm_count"], max_threads_per_sm=spec["max_threads_per_sm"],
                  blas_workspace_mib=spec["blas_workspace_mib"])
    figure = cuda_context(gpu, driver_gib)
    return ContextFigure(figure.total_gib, (
        f"catalogue {model}: {spec['sm_count']} SMs × {spec['max_threads_per_sm']} threads × 1 KiB of local "
        f"memory + {spec['blas_workspace_mib']:g} MiB cuBLAS workspace + policy memory.cuda_driver_gib {driver_gib:g}"))

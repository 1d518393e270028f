"""What the step-time model returns: a step's time by cause, the utilisation it implies, and one micro-batch's stage.

Result types only; ``rules.estimates.training_time.step_time`` models them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class StepTimeBreakdown:
    """Seconds of one optimizer step by cause; they add up to the step time."""

    compute_s: float  # GEMMs and attention matmuls of the steady state (m micro-batches on the slowest stage)
    memory_bound_s: float  # layernorm, dropout, residual, softmax, activation, loss, fp8 casts, the kernel launches
    tp_comm_s: float  # tensor-parallel all-reduces (or reduce-scatter + all-gather) not hidden behind the GEMMs
    cp_comm_exposed_s: float  # K/V ring exchange not hidden behind attention
    pp_bubble_s: float  # (p − 1)/v stage times of pipeline fill and drain
    p2p_s: float  # activations and gradients sent between pipeline stages
    dp_comm_exposed_s: float  # gradient/parameter collectives not hidden, plus the embedding sync
    optimizer_s: float
    ep_comm_s: float = 0.0  # a mixture of experts' dispatch and combine all-to-alls (none hidden)

    @property
    def total_s(self) -> float:
        return (self.compute_s + self.memory_bound_s + self.tp_comm_s + self.cp_comm_exposed_s
                + self.pp_bubble_s + self.p2p_s + self.dp_comm_exposed_s + self.optimizer_s + self.ep_comm_s)


@dataclass(frozen=True)
class StepTime:
    """A modelled optimizer step: its time, where it goes, and the utilisation it implies."""

    step_s: float
    breakdown: StepTimeBreakdown
    tokens_per_s_per_gpu: float
    mfu: float  # model FLOPs (6N + 12·L·s·h per token; of experts, N active) ÷ (GPUs × step × peak)
    mfu_peak_tflops: float  # the dense peak MFU divides by
    mfu_precision: str  # "bf16" or "fp8": which peak that is
    hfu: float  # hardware FLOPs (recompute counted) ÷ the same
    dp_comm_s: float  # data-parallel collectives before overlap
    gemm_tflops: float  # the rate a layer's GEMMs run at on average, at the layout's precision
    tokens_per_s_per_gpu_range: tuple[float, float]  # the rate × (1 + the calibration residuals' lowest, highest)
    kernels: str  # who wrote the memory-bound kernels: fused, compiled or eager
    fp8_recipe: str | None  # the scaling recipe of fp8-mixed GEMM inputs; None for 16-bit GEMMs


class StageTime(NamedTuple):
    """One micro-batch's forward + backward on the slowest pipeline stage, by cause.

    Immutable, as a named tuple: the layout search models about 3,400 of them (a layer's and a stage's) for
    each search, and a named tuple is built in under half the time of a frozen dataclass."""

    compute_s: float
    memory_s: float
    tp_s: float
    cp_exposed_s: float
    ep_s: float = 0.0  # expert-parallel all-to-alls (a mixture of experts)

    @property
    def total_s(self) -> float:
        return self.compute_s + self.memory_s + self.tp_s + self.cp_exposed_s + self.ep_s

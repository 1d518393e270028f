"""Measured kernel rates the per-operator step model runs on: GEMMs by shape, FlashAttention by sequence and head size.

Each figure is a measurement of hardware, never of a training run (rules/data/catalogue.json ``step_time``):

- ``GemmSweep``: the OpenXLA default GEMM performance table (``xla/service/gpu/model/default_matmul_perf_table.txtpb``),
  bf16 TFLOP/s of 375 shapes per device, b ∈ {1, 2, 4} and m, n, k ∈ {256, …, 4096}. Between measured shapes the
  rate is interpolated linearly in log₂ m, log₂ n, log₂ k (the sweep's points are powers of two); a GEMM over more
  rows than the largest m (a micro-batch of 4,096 tokens or more) takes the batched entries, b · 4096 rows, up to
  b = 4; beyond the sweep the rate stays at its edge. A GPU follows its architecture's sweep as a profile, the
  sweep's rate at that shape ÷ the sweep's best, times the GPU's own best measured matmul (mamf-finder), so that a
  GPU without a sweep of its own (A100, L40S) still gets its own ceiling.
- ``AttentionRates``: FlashAttention-2 forward + backward, causal, per head dimension (64, 128) and sequence length
  (Dao 2023, arXiv 2307.08691, Figs. 4 and 7; the repository's benchmark charts), interpolated linearly in log₂ of
  both and clamped to the measured range; a GPU without its own measurement takes its architecture's measured GPU
  scaled by the two GPUs' best matmul rates.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from rules.errors import InconsistentInput
from rules.estimates.model.shapes import ModelShape
from rules.estimates.training_time.transformer_work import LayerSlice

_BATCHES = (1, 2, 4)  # the sweep's batch counts: b × m rows


def _bracket(value: float, points: Sequence[float]) -> tuple[int, float]:
    """Returns (i, w): ``value`` lies between points[i] and points[i + 1] at weight w of the way in log₂, clamped
    to the ends (w = 0 at the first point, i = len − 2 and w = 1 at the last)."""
    if value <= points[0]:
        return 0, 0.0
    if value >= points[-1]:
        return len(points) - 2, 1.0
    i = bisect.bisect_right(points, value) - 1
    return i, math.log2(value / points[i]) / math.log2(points[i + 1] / points[i])


@dataclass(frozen=True, eq=False)
class GemmSweep:
    """One device's measured bf16 GEMM rates by shape (TFLOP/s), keyed (b, m, n, k)."""

    device: str
    tflops: Mapping[tuple[int, int, int, int], float]
    sizes: tuple[int, ...] = field(init=False)
    best_tflops: float = field(init=False)

    def __post_init__(self) -> None:
        sizes = sorted({m for _, m, _, _ in self.tflops})
        if len(sizes) < 2:
            raise InconsistentInput(f"the GEMM sweep of {self.device} needs at least two sizes")
        object.__setattr__(self, "sizes", tuple(sizes))
        object.__setattr__(self, "best_tflops", max(self.tflops.values()))
        object.__setattr__(self, "_memo", {})

    def _at(self, b: int, m: float, n: float, k: float) -> float:
        """Returns the rate at (b, m, n, k), trilinear in log₂ of m, n and k (log of the rates)."""
        corners = [_bracket(x, self.sizes) for x in (m, n, k)]
        total = 0.0
        for di in (0, 1):
            for dj in (0, 1):
                for dk in (0, 1):
                    weight = 1.0
                    key = [b]
                    for (i, w), d in zip(corners, (di, dj, dk), strict=True):
                        weight *= w if d else 1 - w
                        key.append(self.sizes[i + d])
                    if weight:
                        total += weight * math.log(self.tflops[tuple(key)])  # type: ignore[index]
        return math.exp(total)

    def efficiency(self, m: float, n: float, k: float) -> float:
        """Returns the sweep's rate for an m × n × k GEMM ÷ its best rate, in (0, 1] (memoised: a layout search asks
        the same few shapes thousands of times)."""
        memo: dict[tuple[float, float, float], float] = self._memo  # type: ignore[attr-defined]
        found = memo.get((m, n, k))
        if found is None:
            found = memo[(m, n, k)] = self._efficiency(m, n, k)
        return found

    def seconds(self, m: float, n: float, k: float, best_flops_s: float) -> float:
        """Returns an m × n × k GEMM's seconds at ``best_flops_s`` (the GPU's best-shape rate) × its efficiency here."""
        return 2 * m * n * k / (best_flops_s * self.efficiency(m, n, k))

    def _efficiency(self, m: float, n: float, k: float) -> float:
        largest = self.sizes[-1]
        if m <= largest:
            return self._at(1, m, n, k) / self.best_tflops
        i, w = _bracket(m / largest, _BATCHES)
        low, high = self._at(_BATCHES[i], largest, n, k), self._at(_BATCHES[i + 1], largest, n, k)
        return math.exp((1 - w) * math.log(low) + w * math.log(high)) / self.best_tflops


@dataclass(frozen=True, eq=False)
class AttentionRates:
    """A GPU's measured FlashAttention-2 forward + backward rates (causal), TFLOP/s by head dimension and sequence."""

    gpu: str
    seq_lengths: tuple[int, ...]
    tflops: Mapping[int, tuple[float, ...]]  # head dimension -> one rate per sequence length

    def tflops_at(self, head_dim: float, sequence_length: float) -> float:
        """Returns the rate at ``head_dim`` and ``sequence_length``: log₂-linear in both, clamped to the table."""
        dims = sorted(self.tflops)
        rates = []
        for dim in dims:
            i, w = _bracket(sequence_length, self.seq_lengths)
            row = self.tflops[dim]
            rates.append(row[i] + w * (row[i + 1] - row[i]))
        if len(dims) == 1:
            return rates[0]
        i, w = _bracket(head_dim, dims)
        return rates[i] + w * (rates[i + 1] - rates[i])


def attention_core_s(shape: ModelShape, part: LayerSlice, flops: float, rates: AttentionRates, scale_flops_s: float,
                     sweep: GemmSweep, sixteen_bit_flops_s: float) -> float:
    """Returns the attention core's seconds for ``flops`` executed FLOPs (``LayerWork.attention_flops``).

    FlashAttention: at its measured forward + backward rate for the layer's head dimension and sequence length × the
    GPU's scale (``scale_flops_s``: FLOP/s per measured TFLOP/s), the FLOPs counted as its benchmark counts them, as
    ``layer_work`` does. Without it: the score and context GEMMs of one head, (s/c × s × d) and (s/c × d × s), at
    their shapes and the 16-bit best rate; the backward and recomputed passes at the forward's rate."""
    s, head = part.sequence_length, shape.hidden / shape.heads
    if part.flash_attention:
        return flops / (rates.tflops_at(head, s) * scale_flops_s)
    rows = s / part.context
    pair_s = sweep.seconds(rows, s, head, sixteen_bit_flops_s) + sweep.seconds(rows, head, s, sixteen_bit_flops_s)
    return flops * pair_s / (4 * rows * s * head)


@cache
def _sweep(device: str, rows: tuple[tuple[int, int, int, int, float], ...]) -> GemmSweep:
    return GemmSweep(device, {(b, m, n, k): tflops for b, m, n, k, tflops in rows})


def gemm_sweep_from_data(step_time: Mapping[str, Any], architecture: str) -> GemmSweep:
    """Returns the GEMM sweep the catalogue's ``step_time`` section gives ``architecture`` (one object per sweep)."""
    key = step_time["gemm_sweep_of_architecture"][architecture]
    sweep = step_time["gemm_sweeps"][key]
    return _sweep(sweep["device"], tuple(tuple(row) for row in sweep["bf16_tflops"]))


def attention_rates_from_data(step_time: Mapping[str, Any], architecture: str) -> AttentionRates:
    """Returns the FlashAttention rates measured on the GPU the catalogue names for ``architecture``."""
    section = step_time["attention_rates"]
    gpu = step_time["attention_rates_of_architecture"][architecture]
    return AttentionRates(gpu, tuple(section["seq_lengths"]),
                          {int(dim): tuple(row) for dim, row in section[gpu].items()})

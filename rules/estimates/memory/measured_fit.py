"""The largest micro-batch that fits, once a measured peak of GPU memory has had its say.

An estimate of the largest fitting micro-batch (:func:`rules.estimates.memory.step_memory.largest_fitting_micro_batch`)
corrected by one measurement: PyTorch's peak reserved (``torch.cuda.max_memory_reserved``) or allocated memory
at one micro-batch. Source: Korthikanti et al. 2022 (arXiv 2205.05198) Table 2, activation memory grows with
the micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.estimates._args import require_non_negative_int, require_positive_int


@dataclass(frozen=True)
class MeasuredPeak:
    """A measured peak memory per GPU at one micro-batch (PyTorch's peak reserved, else peak allocated)."""

    micro_batch: int
    peak_gib: float


@dataclass(frozen=True)
class FittingMicroBatch:
    """The largest micro-batch whose step fits usable memory, once a measurement has had its say."""

    largest: int  # 0 when not even micro-batch 1 fits
    measured_fits: bool | None  # whether the measured micro-batch fitted usable memory; None when none was measured


def largest_fitting_given_measurement(estimated_largest: int, usable_gib: float,
                                      measured: MeasuredPeak | None) -> FittingMicroBatch:
    """Returns the estimated largest fitting micro-batch corrected by a measured peak, where there is one.

    A measured peak within usable memory shows that its micro-batch fits, so the largest is at least that
    one; a peak above it shows that it does not, so the largest is below it. Activation memory grows with
    the micro-batch (Korthikanti et al. 2022, arXiv 2205.05198, Table 2), so the fitting micro-batches are
    1..k and one measurement moves k past, or back below, the measured micro-batch. The peak to compare is
    what the caching allocator reserved (PyTorch ``torch.cuda.max_memory_reserved``), as the acceptance
    plan's "Measure peak accelerator memory" asks.
    """
    require_non_negative_int("estimated_largest", estimated_largest)
    if measured is None:
        return FittingMicroBatch(estimated_largest, None)
    require_positive_int("measured micro_batch", measured.micro_batch)
    if measured.peak_gib <= usable_gib:
        return FittingMicroBatch(max(estimated_largest, measured.micro_batch), True)
    return FittingMicroBatch(min(estimated_largest, measured.micro_batch - 1), False)

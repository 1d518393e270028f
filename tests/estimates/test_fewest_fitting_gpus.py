"""The fewest GPUs on which one step fits, where the step's memory is not monotone in the GPU count.

A second replica adds NCCL communicators and fsdp-hybrid's shard group follows the count's divisors, so the
search bisects each class of counts sharing a structure (rules/estimates/search/fitting_counts.py). Held here against
a scan of every count: on drawn jobs whose GPU memory is set within ±0.2 % of the step's need at a drawn count
(where a communicator's buffers decide), the periodicity the classes rest on, and the generic bisection.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from rules.errors import InconsistentInput
from rules.estimates.memory import step_memory as memory_module
from rules.estimates.memory.model_state import effective_sharding
from rules.estimates.memory.step_memory import StepMemoryModel, memory_min_gpus, no_fit_reason, training_memory
from rules.estimates.model.layout import Layout, resized, training_layout
from rules.estimates.search.bisection import fewest_fitting, fewest_fitting_by_class
from rules.estimates.search.fitting_counts import structure_at, structure_period
from rules.units import GIB
from tests.estimates.test_memory_model_identity import _case, _scanned_memory_min_gpus

SCANNED_GPUS = 512  # the searches stop here, so that a scan asks every count
CASES = 600


def _layout(rng: random.Random, sharding: str, tensor: int, pipeline: int, context: int) -> Layout | None:
    """Returns a drawn layout of those degrees on 1-16 GPU nodes, fsdp-hybrid with a drawn stated shard group."""
    gpus_per_node = rng.choice([1, 2, 4, 8, 16])
    shard_group = rng.choice([None, 1, 2, 3, 4, 6, 16, 24]) if sharding == "fsdp-hybrid" else None
    gpus = math.lcm(gpus_per_node, tensor * pipeline * context) * rng.choice([1, 2, 3])
    try:
        return training_layout(gpus, gpus_per_node, 1, tensor, pipeline, sharding, shard_group, context)
    except InconsistentInput:
        return None


def _near_threshold_case(rng: random.Random):
    """Returns a drawn job and layout with the GPU memory within ±0.2 % of the step's need at 1-8 units."""
    drawn = _case(rng)
    if drawn is None:
        return None
    job, layout, gpu_memory_gib, settings = drawn
    layout = _layout(rng, layout.sharding, layout.tensor, layout.pipeline, layout.context)
    if layout is None:
        return None
    unit = layout.whole_unit_gpus
    try:
        step = training_memory(job, resized(layout, unit * rng.randint(1, min(8, SCANNED_GPUS // unit))),
                               gpu_memory_gib, settings)
    except InconsistentInput:
        return None
    if step.activations_bytes is None:
        return None
    gpu_memory_gib = step.total_bytes / (1 - settings.headroom_fraction) / GIB * rng.uniform(0.998, 1.002)
    return job, layout, gpu_memory_gib, settings


def test_the_search_is_the_scan_of_every_count_where_a_communicator_decides(monkeypatch):
    # Given the searches stopped at 512 GPUs and jobs whose step just fits, or just does not, at a drawn count,
    monkeypatch.setattr(memory_module, "MAX_SEARCH_GPUS", SCANNED_GPUS)
    rng = random.Random(11)
    compared = plain_wrong = 0
    for _ in range(CASES):
        drawn = _near_threshold_case(rng)
        if drawn is None:
            continue
        job, layout, gpu_memory_gib, settings = drawn
        scanned = _scanned_memory_min_gpus(job, layout, gpu_memory_gib, settings, SCANNED_GPUS)
        # then the search answers the fewest fitting count of all, and a reason exactly when none fits,
        assert memory_min_gpus(job, layout, gpu_memory_gib, settings) == scanned, (layout, job, settings)
        assert (no_fit_reason(job, layout, gpu_memory_gib, settings) is None) == (scanned is not None)
        compared += 1
        plain_wrong += _plain_bisection(job, layout, gpu_memory_gib, settings) != scanned
    # where the plain bisection from the largest count (the search as it stood) was wrong in some of them.
    assert compared > CASES / 3
    assert plain_wrong > compared / 20


def _plain_bisection(job, layout, gpu_memory_gib, settings) -> int | None:
    """The search as it stood: bisection from (0, the largest count], None unless the largest count fits."""
    unit = layout.whole_unit_gpus
    model = StepMemoryModel(job, gpu_memory_gib, settings)

    def fits(multiple: int) -> bool:
        try:
            return bool(model.estimate(resized(layout, multiple * unit)).fits)
        except InconsistentInput:
            return False

    multiple = fewest_fitting(fits, max(1, SCANNED_GPUS // unit))
    return None if multiple is None else multiple * unit


def _periodic_structures(layout: Layout, sharding: str, high: int) -> int:
    """Asserts the structure on each count beyond the prefix is that one period on; returns the counts compared."""
    prefix, period = structure_period(layout, sharding, high)
    multiples = range(prefix + 1, min(prefix + 3 * period + 5, high - period) + 1)
    for multiple in multiples:
        assert structure_at(layout, sharding, multiple) == structure_at(layout, sharding, multiple + period), (
            layout, multiple, prefix, period)
    return len(multiples)


def test_the_step_structure_repeats_with_its_period_beyond_the_prefix():
    rng = random.Random(5)
    checked = 0
    for _ in range(400):
        sharding = rng.choice(["ddp", "zero1", "zero3", "fsdp-full", "fsdp-hybrid", "fsdp-hybrid"])
        degrees = rng.choice([(1, 1, 1), (8, 1, 1), (2, 4, 1), (4, 2, 2), (1, 1, 8), (1, 8, 1), (2, 1, 3)])
        layout = _layout(rng, sharding, *degrees)
        if layout is not None:
            # Given the structure on counts beyond the prefix, then it is the same one period on.
            sized = effective_sharding(sharding, rng.choice(["megatron", "megatron-distributed-optimizer"]))
            checked += _periodic_structures(layout, sized, 4_096)
    assert checked > 1_000


def _drawn_classes(rng: random.Random) -> tuple[int, int, int, Callable[[int], int], Callable[[int], bool]]:
    """Returns high, prefix, period, a key periodic beyond the prefix and a predicate with a threshold per key."""
    high, prefix, period = rng.randint(1, 300), rng.randint(0, 12), rng.randint(1, 12)
    keys = [rng.randint(0, 3) for _ in range(prefix + period)]
    thresholds = [rng.randint(1, 400) for _ in range(4)]

    def key(n: int) -> int:
        return keys[n - 1] if n <= prefix else keys[prefix + (n - prefix - 1) % period]

    return high, prefix, period, key, lambda n: n >= thresholds[key(n)]


def test_the_bisection_by_class_is_the_least_fitting_count_of_all():
    rng = random.Random(3)
    for _ in range(2_000):
        # Given counts whose classes repeat with a period beyond a prefix, each fitting from its own threshold,
        high, prefix, period, key, fits = _drawn_classes(rng)
        # then the search answers the least count of all that fits, None when none does.
        expected = next((n for n in range(1, high + 1) if fits(n)), None)
        assert fewest_fitting_by_class(fits, high, key, prefix, period) == expected, (high, prefix, period)

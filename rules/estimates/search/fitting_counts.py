"""The GPU counts over which one training step's memory is monotone, for the search of the fewest that fit.

The search (:func:`rules.estimates.memory.step_memory.memory_min_gpus`) tries n = k × u GPUs, u = ``whole_unit_gpus``
(whole nodes and whole replicas), k = 1..MAX_SEARCH_GPUS // u. With the tensor t, pipeline p and context c
degrees fixed, the data × context ranks are R = k × r, r = u / (t × p) (rules/estimates/model/layout.py), and the
step's bytes on a GPU depend on k only through

- the ranks sharding the model state and FSDP's buckets: R under ZeRO and FSDP full shard (none under
  ddp), which more GPUs shard further; under fsdp-hybrid the shard group s(k) alone: ``layout.resized``
  keeps a stated group S where S divides R (where a = S / gcd(S, r) divides k), else
  ``layout.hybrid_shard_group`` takes gcd(R, G), G = max(1, gpus_per_node // t), which follows R's divisors
  (8, 4, 1 for R = 8, 12, 9 and G = 8);
- the activations, through the micro-batches each data-parallel rank runs per step, which do not grow;
- the NCCL buffers: one per communicator, one communicator per process group of more than one rank
  (:func:`rules.estimates.memory.comm_buffers.process_groups`: the gradient group R, or fsdp-hybrid's s and R / s;
  t, p, c; and the world of n GPUs unless one of those spans it). Their number is not monotone: from one
  replica to two (k = 1 → 2 where the first unit is one replica) the gradient group outgrows the context
  group and the world group may appear (up to 2 more); under fsdp-hybrid the replicate group appears once R
  exceeds s, and s itself moves.

So on the counts that share the pair (fsdp-hybrid's shard group, communicators), the step's *structure*
(:func:`step_structure`), the step's bytes do not grow with k, and whether it fits is false then true. That
pair is periodic beyond a short prefix (:func:`structure_period`): without fsdp-hybrid it is the same for
every k ≥ 2 (R ≥ 2 forms the gradient group, and the world group is needed exactly when t × p > 1, whatever
R); under fsdp-hybrid s(k) has period lcm(a, G) (G alone with no stated group, or one no count reaches), and
for k ≥ 2 with R > s, the communicators are [s > 1] + 1 + [t > 1] + [p > 1] + [c > 1] + [t × p > 1 or
s > 1]: a function of s(k) alone. R ≤ s needs k × r ≤ max(S, G). :func:`fewest_fitting_gpus` bisects each
class of counts sharing a structure (rules/estimates/search/bisection.py ``fewest_fitting_by_class``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rules.estimates.memory.comm_buffers import process_groups
from rules.estimates.model.layout import Layout, resized, with_sharding
from rules.estimates.search.bisection import fewest_fitting_by_class

HYBRID = "fsdp-hybrid"


def step_structure(layout: Layout) -> tuple[int | None, int]:
    """Returns what of the step on ``layout`` is not monotone in its GPU count: fsdp-hybrid's shard group
    (None under the other shardings) and the NCCL communicators a rank joins."""
    return (layout.shard_group if layout.sharding == HYBRID else None), len(process_groups(layout))


def structure_at(layout: Layout, sharding: str, multiple: int) -> tuple[int | None, int]:
    """Returns :func:`step_structure` on ``multiple`` × ``layout.whole_unit_gpus`` GPUs resized from ``layout``
    under ``sharding``: what :func:`fewest_fitting_gpus` classes that count by."""
    return step_structure(with_sharding(resized(layout, multiple * layout.whole_unit_gpus), sharding))


def structure_period(layout: Layout, sharding: str, high: int) -> tuple[int, int]:
    """Returns (prefix, period) in multiples of ``layout.whole_unit_gpus``: for k > prefix, the structure on
    k multiples is that on k + period (module docstring), on counts resized from ``layout`` under ``sharding``.

    Without fsdp-hybrid: (1, 1). Under it: prefix max(1, max(S, G) // r), period lcm(a, G), S's part dropped
    when no count up to ``high`` multiples is a multiple of a (S = the layout's stated shard group).
    """
    if sharding != HYBRID:
        return 1, 1
    unit = layout.whole_unit_gpus
    ranks_per_unit = unit // layout.model_parallel  # r: data × context ranks per multiple
    node_ranks = max(1, layout.gpus_per_node // layout.tensor)  # G
    period, largest_group = node_ranks, node_ranks
    stated = layout.shard_group
    if stated:
        step = stated // math.gcd(stated, ranks_per_unit)  # a: the multiples on which the stated group is kept
        if step <= high:
            period, largest_group = math.lcm(step, node_ranks), max(stated, node_ranks)
    return max(1, largest_group // ranks_per_unit), period


def fewest_fitting_gpus(layout: Layout, sharding: str, fits: Callable[[int], bool], max_gpus: int) -> int | None:
    """Returns the fewest GPUs n = k × whole_unit_gpus ≤ ``max_gpus`` with ``fits(n)``; None when none fits.

    ``fits`` is asked of counts resized from ``layout`` (:func:`rules.estimates.model.layout.resized`) under
    ``sharding``; it must not grow false as k grows among counts of one structure (module docstring). Every
    count up to ``max_gpus`` belongs to one class, each class is bisected, and the least answer is the fewest.
    """
    unit = layout.whole_unit_gpus
    high = max(1, max_gpus // unit)
    prefix, period = structure_period(layout, sharding, high)
    multiple = fewest_fitting_by_class(lambda k: fits(k * unit), high, lambda k: structure_at(layout, sharding, k),
                                       prefix, period)
    return None if multiple is None else multiple * unit

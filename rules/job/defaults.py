"""The policy's cited defaults applied to a training workload: the one place a member a first quote leaves out is
filled from the policy in use (its ``defaults`` section, rules/policy.py ``CitedDefault``).

A default fills a member only where the submission leaves it out (absent, or null): a stated value, bare or sourced,
is never replaced, and a measurement that replaces a stated value (a passed restore test's restore_min) replaces the
default the same way, in the check that reads both. Each fill keeps the policy's citation as its reference, so that
the record lists it (``default_fills``) and every check that reads it lists it among its assumptions. A submission
without a training workload gets none (no training section is made up for a serving-only quote).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from rules.job.pointers import TRAINING
from rules.policy import CitedDefault

# Where the model whose vocabulary picks bytes_per_token's token id dtype keeps it, below the training workload.
_VOCAB = ("model", "architecture", "vocab")


class Filled(NamedTuple):
    """A member a default filled: its JSON Pointer, the value, and the reference the record gives it."""

    pointer: str
    value: float
    ref: str


def fill_training(training: Any, defaults: Iterable[CitedDefault]) -> list[Filled]:
    """Returns the members of the resolved training workload ``training`` that ``defaults`` filled, in the policy's
    order, after filling them in place (the sections they sit in made where absent)."""
    if not isinstance(training, dict):
        return []
    vocab = _member(training, _VOCAB)
    filled = []
    for default in defaults:
        *sections, name = default.member
        container = _section(training, sections)
        if container is None or container.get(name) is not None:
            continue
        value, ref = _value(default, vocab)
        container[name] = value
        filled.append(Filled(f"{TRAINING}/{'/'.join(default.member)}", value, ref))
    return filled


def _value(default: CitedDefault, vocab: Any) -> tuple[float, str]:
    """Returns the value ``default`` gives a model of vocabulary ``vocab`` and the reference that says why.

    bytes_per_token's narrower value applies below its vocabulary size, as Megatron-LM's
    ``DType.optimal_dtype(cardinality)`` picks uint16 for ``cardinality is not None and cardinality < 65500``
    (megatron/core/datasets/indexed_dataset.py): a model of unknown vocabulary gets the wider value.
    """
    where = f"policy {default.setting}: {default.source}"
    if default.narrow is None:
        return default.value, where
    below, narrow_value = default.narrow
    known = isinstance(vocab, int | float) and not isinstance(vocab, bool)
    if known and vocab < below:
        return narrow_value, f"{where} [vocabulary {vocab:,.0f} < {below:,}: {narrow_value:g}]"
    words = f"vocabulary {vocab:,.0f} ≥ {below:,}" if known else "vocabulary not known"
    return default.value, f"{where} [{words}: {default.value:g}]"


def _section(training: dict[str, Any], sections: list[str]) -> dict[str, Any] | None:
    """Returns the object at ``sections`` below ``training``, made where absent; None where a member is not an
    object."""
    container = training
    for section in sections:
        if container.get(section) is None:
            container[section] = {}
        container = container[section]
        if not isinstance(container, dict):
            return None
    return container


def _member(node: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node

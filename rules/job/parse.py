"""The submission parsed once into the typed job (rules/job/spec.py): every value with its pointer and source.

The one walk of the submission's members and the one place where the documented defaults of
schemas/submission.schema.json are applied (each declared beside its field in spec.py). A value filled in
by a default has source ``default`` (rules/job/given.py), so a check that reads it names no input; a value
the catalogue filled in (rules/job/inputs.py) keeps the catalogue's source and datasheet reference.
"""

from __future__ import annotations

from dataclasses import fields
from functools import cache
from typing import Any

from rules.job.cluster import Cluster
from rules.job.given import SPEC_DEFAULT, Given, absent
from rules.job.inputs import Inputs, Quantity, escape
from rules.job.measured import Measurements
from rules.job.pointers import INFERENCE, MEASUREMENTS, QUOTE, TRAINING
from rules.job.spec import Job
from rules.job.workload import Serving, Training


def parse_job(inputs: Inputs) -> Job:
    """Returns the job of the validated submission ``inputs`` holds (resolved numbers, catalogue fills in)."""
    return Job(training=_section(Training, inputs.get(TRAINING), TRAINING, inputs),
               serving=_section(Serving, inputs.get(INFERENCE), INFERENCE, inputs),
               cluster=_section(Cluster, inputs.get(QUOTE), QUOTE, inputs),
               measurements=_section(Measurements, inputs.get(MEASUREMENTS), MEASUREMENTS, inputs),
               trains=inputs.get(TRAINING) is not None, serves=inputs.get(INFERENCE) is not None)


# How a declared field is read (``_declared``): a leaf, a nested section, an array of sections, an object of leaves,
# an array of texts or numbers.
_LEAF, _SECTION, _EACH, _KEYED, _SCALARS = range(5)


@cache
def _declared(cls: type) -> tuple[tuple[str, str, int, Any], ...]:
    """Returns (field, member, how it is read, its default or its section class) of every declared field of ``cls``."""
    declared = []
    for f in fields(cls):
        if "at" in f.metadata:
            meta = f.metadata
            kind, extra = ((_SECTION, meta["section"]) if meta["section"] is not None
                           else (_EACH, meta["each"]) if meta["each"] is not None
                           else (_KEYED, None) if meta["keyed"] else (_SCALARS, None) if meta["scalars"]
                           else (_LEAF, meta["default"]))
            declared.append((f.name, meta["at"], kind, extra))
    return tuple(declared)


def _section(cls: type, container: Any, pointer: str, inputs: Inputs) -> Any:
    """Returns the section ``cls`` of ``container``, the submission's member at ``pointer``; the shared one with every
    value absent (or defaulted) where the submission has no object there."""
    if not isinstance(container, dict):
        return _absent_section(cls, pointer)
    return _built(cls, pointer, container, inputs)


@cache
def _absent_section(cls: type, pointer: str) -> Any:
    """Returns the section ``cls`` at ``pointer`` of a submission that has no object there (immutable, so shared):
    a serving-only submission's training section, a node group without a cpu object."""
    return _built(cls, pointer, {}, None)


def _built(cls: type, pointer: str, container: dict[str, Any], inputs: Inputs | None) -> Any:
    """Returns the section ``cls`` read from ``container``, the object at ``pointer`` (``inputs`` None: an absent
    object, whose nested sections are absent too)."""
    values: dict[str, Any] = {}
    quantities = inputs.quantities if inputs is not None else {}
    for name, member, kind, extra in _declared(cls):
        where = f"{pointer}/{member}"
        if kind == _LEAF:  # most fields: the leaf rule of ``_leaf``, written out here for the hundred of a submission
            value = container.get(member)
            if value is None or isinstance(value, dict | list):
                filled = extra(values) if callable(extra) else extra
                values[name] = absent(where) if filled is None else Given(filled, where, SPEC_DEFAULT)
            else:
                quantity = quantities.get(where)
                values[name] = Given(value, where, quantity.source if quantity is not None else None)
        elif kind == _SECTION:
            values[name] = (_section(extra, container.get(member), where, inputs) if inputs is not None
                            else _absent_section(extra, where))
        elif kind == _EACH:
            items = container.get(member)
            values[name] = tuple(_section(extra, item, f"{where}/{index}", inputs)  # type: ignore[arg-type]
                                 for index, item in enumerate(items if isinstance(items, list) else ()))
        elif kind == _KEYED:
            members = container.get(member)
            values[name] = tuple((key, _leaf(item, f"{where}/{escape(key)}", None, {}, quantities))
                                 for key, item in (members.items() if isinstance(members, dict) else ()))
        else:
            items = container.get(member)
            values[name] = Given(tuple(items), where) if isinstance(items, list) else absent(where)
    return cls(**values, pointer=pointer)


def _leaf(value: Any, pointer: str, default: Any, section: dict[str, Any],
          quantities: dict[str, Quantity]) -> Given[Any]:
    if value is None or isinstance(value, dict | list):
        filled = default(section) if callable(default) else default
        return absent(pointer) if filled is None else Given(filled, pointer, SPEC_DEFAULT)
    quantity = quantities.get(pointer)
    # Text and flags carry no source of their own in the submission format: their source is None.
    return Given(value, pointer, quantity.source if quantity is not None else None)

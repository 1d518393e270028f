"""The quote form of the "Submit a quote" page: one node group of a catalogued server, one kind of rack with its PDUs,
storage, and a training workload of a catalogued model, turned into the submission document the API takes.

Each field names the JSON Pointer its value goes to, so the document is built from the form alone
(``submission_of``, no Flask), and a problem the submission schema reports at a pointer is shown beside the field
that pointer belongs to (``placed``). The form checks nothing the schema checks: a blank field is left out, a
number is written as a JSON number, and text where a number belongs is passed on as text, so the schema's own
message ("expected an integer, found text 'two'") names the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from rules.catalogue import Catalogue
from rules.job.pointers import field_pointer
from schemas.problem import Problem

# The node group and the rack kind the form describes (a second group or rack kind is written in the JSON editor).
GROUP_NAME = "gpu"
DEFAULT_RACK_NAME = "rack"
SCHEMA_VERSION = "1"
NOT_STATED = ("", "not stated")
# Digit grouping a number may be typed with: 1,000,000 or 1 000 000 or 1_000_000.
_GROUPING = re.compile(r"[,_\s\u00a0\u202f]")
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Integral numbers beyond this stay floats (JSON readers keep integers exact only up to 2^53 - 1).
_EXACT_INTEGER = 2**53 - 1


@dataclass(frozen=True)
class Field:
    """One field of the form: its name (also its HTML id), label, where its value goes in the submission, and how it
    is read: ``text`` as typed, ``number`` as a JSON number, ``choice`` one of ``choices`` (value, label), ``yes-no``
    a JSON boolean."""

    name: str
    label: str
    pointer: str
    kind: str = "text"
    hint: str = ""
    required: bool = False
    choices: tuple[tuple[str, str], ...] = ()
    groups: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()  # choices under headings (optgroups)
    inputmode: str = ""

    @property
    def offered(self) -> tuple[str, ...]:
        """Returns the values of the choices, those under headings included."""
        return (*(value for value, _ in self.choices), *(value for _, group in self.groups for value, _ in group))


@dataclass(frozen=True)
class Section:
    """A fieldset of the form."""

    legend: str
    fields: tuple[Field, ...]
    hint: str = ""


def _choices(*values: str) -> tuple[tuple[str, str], ...]:
    return (NOT_STATED, *((value, value) for value in values))


def _number(name: str, label: str, pointer: str, hint: str = "", *, required: bool = False,
            whole: bool = False) -> Field:
    return Field(name, label, pointer, "number", hint, required, inputmode="numeric" if whole else "decimal")


YES_NO = (NOT_STATED, ("yes", "yes"), ("no", "no"))
_GROUP = field_pointer("cluster.node_groups.0")
_RACK = field_pointer("cluster.racks.0")


def at(path: str) -> str:
    """Returns the JSON Pointer of the job's field at dotted ``path`` (rules/job/pointers.py names them all)."""
    return field_pointer(path)


def sections(catalogue: Catalogue) -> tuple[Section, ...]:
    """Returns the form's fieldsets, with the catalogue's servers and models as the choices."""
    return (
        Section("The quote", (
            Field("vendor", "Vendor", at("cluster.vendor"), required=True),
            Field("quote_id", "Quote id", at("cluster.quote_id"), hint="the vendor's reference, e.g. Q-2026-118"),
            Field("currency", "Currency", at("cluster.currency"), hint="ISO 4217 code in capitals, e.g. USD or EUR"),
        )),
        Section("Servers", (
            Field("server_model", "Server model", at("cluster.node_groups.0.server_model"), "choice", required=True,
                  hint="from the catalogue, which fills in its GPUs, CPUs, memory, NICs and power",
                  choices=(("", "choose a server model"), *server_choices(catalogue))),
            _number("node_count", "Number of servers (nodes)", at("cluster.node_groups.0.count"), required=True,
                    whole=True),
            _number("unit_price", "Unit price per server", at("cluster.node_groups.0.unit_price"),
                    "in the quote's currency"),
        ), "One group of identical servers. Servers the catalogue lacks, or several groups: use the JSON editor."),
        Section("Racks", (
            Field("rack_name", "Rack name", at("cluster.racks.0.name"), hint=f"a label (default: {DEFAULT_RACK_NAME})"),
            _number("rack_count", "Number of racks", at("cluster.racks.0.count"), whole=True),
            _number("nodes_per_rack", "Servers per rack", at("cluster.racks.0.node_groups") + f"/{GROUP_NAME}",
                    "required when racks are given", whole=True),
            _number("rack_power_kw", "Power budget per rack (kW)", at("cluster.racks.0.power_budget_kw"),
                    "power the facility provides to one rack, in kilowatts (10.2 kW = 10200 W)"),
            Field("rack_cooling", "Cooling", at("cluster.racks.0.cooling"), "choice",
                  choices=_choices("air", "rear-door", "liquid", "hybrid")),
            _number("rack_cooling_kw", "Cooling capacity per rack (kW)", at("cluster.racks.0.cooling_capacity_kw"),
                    "heat one rack may reject, in kilowatts"),
            Field("rack_redundancy", "Power redundancy", at("cluster.racks.0.redundancy"), "choice",
                  choices=_choices("N", "N+1", "2N")),
            _number("pdu_count", "PDUs per rack", at("cluster.racks.0.pdus.0.count"), whole=True),
            _number("pdu_rating_kw", "PDU rating (kW each)", at("cluster.racks.0.pdus.0.rating_kw"), "in kilowatts"),
        ), "Leave empty if the quote has no racks."),
        Section("Storage", (
            Field("storage_kind", "Storage kind", at("cluster.storage.kind"), "choice",
                  choices=_choices("parallel-fs", "nfs", "object", "local-nvme")),
            _number("storage_capacity_tb", "Capacity (TB)", at("cluster.storage.capacity_tb"), "terabytes"),
            _number("storage_read_gbs", "Aggregate read (GB/s)", at("cluster.storage.read_gbs"),
                    "gigabytes per second, all clients together"),
            _number("storage_write_gbs", "Aggregate write (GB/s)", at("cluster.storage.write_gbs"),
                    "gigabytes per second, all clients together"),
        )),
        Section("Training workload", (
            Field("model_name", "Model", at("training.model.name"), "choice", required=True,
                  hint="from the model catalogue, which fills in its parameters and architecture",
                  choices=(("", "choose a model"),), groups=model_groups(catalogue)),
            Field("objective", "Objective", at("training.objective"), "choice",
                  choices=_choices("pretraining", "full-fine-tune", "adapter", "continued-pretraining")),
            _number("dataset_tokens", "Dataset tokens", at("training.dataset_tokens"),
                    "tokens per epoch, e.g. 1000000000000 or 1e12"),
            _number("epochs", "Epochs", at("training.epochs"), "passes over the dataset (default 1)"),
            _number("completion_window_days", "Completion window (days)", at("training.completion_window_days"),
                    "days by which training must finish"),
            Field("precision", "Precision", at("training.precision"), "choice",
                  choices=_choices("bf16-mixed", "fp16-mixed", "fp8-mixed", "fp32", "bf16-pure")),
            Field("optimizer", "Optimizer", at("training.optimizer"), "choice",
                  choices=_choices("adamw", "adam", "adamw-8bit", "sgd-momentum", "sgd", "adafactor")),
            _number("sequence_length", "Sequence length (tokens)", at("training.sequence_length"), whole=True),
            _number("micro_batch", "Micro-batch (sequences per GPU)", at("training.micro_batch"), whole=True),
            _number("global_batch", "Global batch (sequences per step)", at("training.global_batch"), whole=True),
            _number("gpus", "GPUs the job uses", at("training.gpus"), "default: every GPU quoted", whole=True),
            Field("sharding", "Sharding", at("training.parallelism.sharding"), "choice",
                  choices=_choices("ddp", "zero1", "zero2", "zero3", "fsdp-full", "fsdp-hybrid")),
            _number("tensor_parallel", "Tensor-parallel degree", at("training.parallelism.tensor"), whole=True),
            _number("pipeline_parallel", "Pipeline-parallel degree", at("training.parallelism.pipeline"), whole=True),
            Field("offload", "CPU offload", at("training.parallelism.offload"), "choice",
                  choices=_choices("none", "optimizer", "optimizer+parameters")),
            Field("activation_checkpointing", "Activation checkpointing", at("training.activation_checkpointing"),
                  "choice", choices=_choices("none", "selective", "full")),
            Field("flash_attention", "Flash attention", at("training.flash_attention"), "yes-no", choices=YES_NO),
            _number("checkpoint_interval_min", "Checkpoint interval (minutes)", at("training.checkpoint.interval_min")),
            _number("checkpoint_max_save_s", "Longest acceptable checkpoint save (seconds)",
                    at("training.checkpoint.max_save_s")),
            Field("checkpoint_gradients", "Checkpoints include gradients", at("training.checkpoint.include_gradients"),
                  "yes-no", choices=YES_NO),
        ), "A serving workload, measurements, the fabric and NICs: use the JSON editor (Show the JSON first to "
           "start from what the form makes)."),
    )


def server_choices(catalogue: Catalogue) -> tuple[tuple[str, str], ...]:
    """Returns (catalogue id, label) of every catalogued server: ``HGX-H200-8GPU (HGX-H200): 8 × H200-SXM-141GB``."""
    servers = catalogue.document["servers"]
    choices = []
    for server_id in catalogue.server_models():
        entry = servers[server_id]
        aliases = [alias for alias in entry.get("aliases", ()) if " " not in alias]
        named = f"{server_id} ({', '.join(aliases)})" if aliases else server_id
        choices.append((server_id, f"{named}: {entry['gpu_count']} × {entry['gpu_model']}"))
    return tuple(choices)


def model_groups(catalogue: Catalogue) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """Returns the catalogued models by family, in the catalogue's order: (family, ((name, label), …))."""
    families: dict[str, list[tuple[str, str]]] = {}
    for name, entry in catalogue.document.get("models", {}).items():
        billions = entry["parameters"] / 1e9
        families.setdefault(entry.get("family", "other"), []).append((name, f"{name} ({billions:,.1f} B parameters)"))
    return tuple((family, tuple(models)) for family, models in families.items())


def fields_of(form: tuple[Section, ...]) -> tuple[Field, ...]:
    """Returns the fields of ``form`` in order."""
    return tuple(field for section in form for field in section.fields)


def values_of(form: tuple[Section, ...], posted: Mapping[str, str]) -> dict[str, str]:
    """Returns what was typed into each field of ``form`` (blank for a field not sent), as sent."""
    return {field.name: posted.get(field.name, "") or "" for field in fields_of(form)}


def submission_of(form: tuple[Section, ...], values: Mapping[str, str]) -> dict[str, Any]:
    """Returns the submission document the filled-in ``form`` describes: each non-blank value at its field's pointer,
    with the schema version, the node group's name and, when any rack field is filled in, a rack name."""
    document: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    # The names go first in their objects (the rack name field replaces the default one when filled in).
    names = {_GROUP: GROUP_NAME, _RACK: DEFAULT_RACK_NAME}
    for field in fields_of(form):
        typed = values.get(field.name, "").strip()
        if not typed:
            continue
        for within in [within for within in names if field.pointer.startswith(within + "/")]:
            _put(document, f"{within}/name", names.pop(within))
        _put(document, field.pointer, read_value(field, typed))
    if _GROUP in names:  # a quote has a node group, filled in or not (the schema names what it lacks)
        _put(document, at("cluster.node_groups.0.name"), GROUP_NAME)
    return document


def read_value(field: Field, typed: str) -> Any:
    """Returns the JSON value of ``typed`` in ``field``: a number for a number field (the text itself when it is not
    one, for the schema to refuse), a boolean for yes and no, else the text."""
    if field.kind == "number":
        return read_number(typed)
    if field.kind == "yes-no" and typed in ("yes", "no"):
        return typed == "yes"
    return typed


def read_number(typed: str) -> int | float | str:
    """Returns the number ``typed`` is (``1,000``, ``1e12`` and ``8.0`` are whole numbers), or ``typed`` itself when
    it is none (``two``, ``inf``)."""
    bare = _GROUPING.sub("", typed)
    if _INTEGER.fullmatch(bare):
        return int(bare)
    try:
        number = float(bare)
    except ValueError:
        return typed
    if not math.isfinite(number):
        return typed
    return int(number) if number.is_integer() and abs(number) <= _EXACT_INTEGER else number


def missing_server_model(values: Mapping[str, str]) -> list[Problem]:
    """Returns the problem of a blank server model: the schema takes a node group without one, but the form is for
    the catalogue's servers."""
    if values.get("server_model", "").strip():
        return []
    return [Problem(at("cluster.node_groups.0.server_model"), "choose a server model from the catalogue (a server "
                                                              "the catalogue lacks is described in the JSON editor)")]


def field_at(form: tuple[Section, ...], pointer: str) -> Field | None:
    """Returns the field a problem at ``pointer`` belongs to: the field at the pointer, else the field the pointer lies
    within, else the first field within the pointer (a required member missing, e.g. ``/quote/racks/0/node_groups``
    is the servers per rack); None for a pointer of no field (``/quote/fabric``, the document itself)."""
    fields = fields_of(form)
    return (next((f for f in fields if f.pointer == pointer), None)
            or next((f for f in fields if pointer.startswith(f.pointer + "/")), None)
            or next((f for f in fields if pointer and f.pointer.startswith(pointer + "/")), None))


def placed(form: tuple[Section, ...], problems: list[Problem]) -> dict[str, list[str]]:
    """Returns the messages of ``problems`` by the name of the field each belongs to (``field_at``); the problems of
    no field are left out."""
    by_field: dict[str, list[str]] = {}
    for problem in problems:
        field = field_at(form, problem.pointer)
        if field is not None:
            by_field.setdefault(field.name, []).append(problem.message)
    return by_field


def _put(document: dict[str, Any], pointer: str, value: Any) -> None:
    """Sets ``value`` at ``pointer`` in ``document``, making the objects and arrays on the way (a token of digits is
    an array index)."""
    tokens = pointer.split("/")[1:]
    here: Any = document
    for token, following in pairwise(tokens):
        make = list if following.isdigit() else dict
        if isinstance(here, list):
            while len(here) <= int(token):
                here.append(make())
            here = here[int(token)]
        else:
            here = here.setdefault(token, make())
    if isinstance(here, list):
        while len(here) <= int(tokens[-1]):
            here.append(None)
        here[int(tokens[-1])] = value
    else:
        here[tokens[-1]] = value

"""A validated submission with the provenance of every number, filled from the catalogue.

Every number in a submission is either bare (an assumption) or ``{value, source, ref}``. ``Inputs``
resolves both forms to plain numbers in ``document`` and keeps a ``Quantity`` per JSON Pointer, so each
check can say which of the inputs it rested on are still assumptions. Values a quote leaves out but the
catalogue knows (from the GPU or server model) are filled in with source ``vendor_limit`` and the
datasheet reference; so are the parameters and architecture of a model given by name alone (rules/job/models.py),
with the model's config file as the reference. A ``server_model`` given by an alias or another spelling of a catalogued
server (``HGX-H200`` for ``HGX-H200-8GPU``) is read as the server's id, and that id is listed among the fills. This is
the one place the catalogue fills a submission. Then, given the policy in use, what the training workload still leaves
out and the policy gives a cited default for is filled with source ``default`` and the citation (rules/job/defaults.py),
listed apart (``default_fills``): an assumption every check that reads it names.
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

from rules.catalogue import Catalogue, load_catalogue
from rules.job.defaults import fill_training
from rules.job.models import named_models
from rules.policy import Policy
from rules.status import Source

# Fields a GPU model fills in a node group's ``gpu`` object, and fields a server model fills in the group.
GPU_FIELDS = ("memory_gib", "hbm_tbs", "bf16_tflops", "tdp_w", "nvlink_gbs")
SERVER_FIELDS = ("max_power_w", "host_memory_gib", "local_nvme_tb", "rack_units")


_ASSUMPTION = Source.ASSUMPTION
_ASSUMED = (Source.ASSUMPTION, Source.DEFAULT)  # the sources of the inputs a check lists among its assumptions
_IMMUTABLE = frozenset({str, int, float, bool})  # catalogue values a fill need not copy
_ABSENT = object()  # no value at a pointer
_UNSEEN = object()  # a pointer not looked up yet


class Quantity(NamedTuple):
    """A number with its provenance: where it sits in the submission and what vouches for it.

    Immutable; a named tuple, as the job's values are (rules/job/given.py), because a submission holds hundreds.
    """

    pointer: str
    value: float | int
    source: str
    ref: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pointer": self.pointer, "value": self.value, "source": self.source}
        if self.ref:
            out["ref"] = self.ref
        return out


def escape(token: str) -> str:
    """Returns ``token`` escaped for use in a JSON Pointer (RFC 6901 §3)."""
    if "~" not in token and "/" not in token:
        return token
    return token.replace("~", "~0").replace("/", "~1")


def _copied(value: Any) -> Any:
    """Returns a deep copy of catalogue data: its JSON objects, arrays and leaves without copy.deepcopy's memo."""
    kind = type(value)
    if kind in _IMMUTABLE or value is None:
        return value
    if kind is dict:
        return {key: _copied(item) for key, item in value.items()}
    if kind is list:
        return [_copied(item) for item in value]
    return copy.deepcopy(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _unescape(token: str) -> str:
    """Returns a JSON Pointer reference token unescaped (RFC 6901 §4)."""
    return token.replace("~1", "/").replace("~0", "~")


def _split(pointer: str) -> list[str]:
    """Returns the reference tokens of ``pointer``, unescaped, its leading slashes dropped: the walk of a pointer
    that ``Inputs._look_up`` does not take from its parent (one that does not start with exactly one "/")."""
    if not pointer:
        return []
    return [_unescape(part) for part in pointer.lstrip("/").split("/")]


def member_at(document: Any, pointer: str, default: Any = None) -> Any:
    """Returns the member of ``document`` at JSON Pointer ``pointer`` (RFC 6901), or ``default`` where none is."""
    node = document
    for part in _split(pointer):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return default
    return node


class Inputs:
    """The resolved submission (plain numbers) plus one Quantity per numeric input, catalogue fills included."""

    def __init__(self, submission: dict[str, Any], catalogue: Catalogue | None = None,
                 policy: Policy | None = None) -> None:
        self.catalogue = catalogue or load_catalogue()
        self.quantities: dict[str, Quantity] = {}
        self.fills: list[Quantity] = []
        self.default_fills: list[Quantity] = []  # the policy's cited defaults filled in (none without a policy)
        # _resolve builds new containers throughout (the leaves are immutable), so the submission is not touched.
        self.document = self._resolve(submission, "")
        self._fill_from_catalogue()
        if policy is not None:  # after the catalogue's fills: a model given by name has its vocabulary by now
            self._fill_defaults(policy)
        # pointer → value (or _ABSENT), once the catalogue fills are in. Every number's is known already (the
        # document holds its Quantity's value at its pointer, and no fill replaces a value), so the checks' reads
        # of numbers, most of what they read, need no look-up.
        self._found: dict[str, Any] = {pointer: quantity.value for pointer, quantity in self.quantities.items()}
        self._assumed: dict[str, dict[str, Any]] | None = None  # pointer → as_dict() of each assumption

    def assumed(self) -> dict[str, dict[str, Any]]:
        """Returns pointer → ``as_dict()`` of every input that is an assumption (source ``assumption``, which a bare
        number gets, or ``default``, the policy's cited default with its citation), classified once (the dicts are
        shared: copy one before changing it)."""
        if self._assumed is None:
            # as_dict() of each, the usual one (no ref) built in place: a large quote holds thousands of them.
            self._assumed = {p: {"pointer": q.pointer, "value": q.value, "source": q.source} if not q.ref
                             else q.as_dict() for p, q in self.quantities.items() if q.source in _ASSUMED}
        return self._assumed

    def _resolve(self, node: Any, pointer: str) -> Any:
        if type(node) is dict and not ("value" in node and _is_number(node["value"])):
            # The usual object: its text, flag and null members copied as they are and its bare numbers noted as
            # assumptions, without a call each.
            resolved = {}
            for key, item in node.items():
                kind = type(item)
                if kind is str or kind is bool or item is None:
                    resolved[key] = item
                else:
                    # A member name holds "~" or "/" rarely: escaped only then, without a call for the others.
                    where = f"{pointer}/{key if '~' not in key and '/' not in key else escape(key)}"
                    if kind is int or kind is float:
                        self.quantities[where] = Quantity(where, item, _ASSUMPTION)
                        resolved[key] = item
                    else:
                        resolved[key] = self._resolve(item, where)
            return resolved
        if isinstance(node, dict):
            if "value" in node and _is_number(node["value"]):
                self.quantities[pointer] = Quantity(pointer, node["value"], node.get("source", Source.ASSUMPTION),
                                                    node.get("ref"))
                return node["value"]
            return {k: self._resolve(v, f"{pointer}/{escape(k)}") for k, v in node.items()}
        if isinstance(node, list):
            return [self._resolve(v, f"{pointer}/{i}") for i, v in enumerate(node)]
        if _is_number(node):
            self.quantities[pointer] = Quantity(pointer, node, _ASSUMPTION)
        return node

    def _fill(self, container: dict[str, Any], key: str, value: Any, pointer: str, ref: str | None) -> None:
        if key in container or value is None:
            return
        container[key] = _copied(value)
        quantity = Quantity(pointer, value, Source.VENDOR_LIMIT, ref)
        if _is_number(value):
            self.quantities[pointer] = quantity
        self.fills.append(quantity)

    def _fill_defaults(self, policy: Policy) -> None:
        """Fills what the training workload leaves out and ``policy`` gives a cited default for (rules/job/defaults.py),
        with source ``default`` and the citation as its reference."""
        for filled in fill_training(self.document.get("workload", {}).get("training"), policy.cited_defaults):
            quantity = Quantity(filled.pointer, filled.value, Source.DEFAULT, filled.ref)
            self.quantities[filled.pointer] = quantity
            self.default_fills.append(quantity)

    def _fill_from_catalogue(self) -> None:
        self._fill_models()
        for index, group in enumerate(self.document.get("quote", {}).get("node_groups", [])):
            base = f"/quote/node_groups/{index}"
            server = self._server(group, base)
            if server:
                refs = server.get("refs", {})
                gpu = group.setdefault("gpu", {})
                self._fill(gpu, "model", server.get("gpu_model"), f"{base}/gpu/model", refs.get("gpu_model"))
                self._fill(gpu, "count", server.get("gpu_count"), f"{base}/gpu/count", refs.get("gpu_count"))
                for key in SERVER_FIELDS:
                    self._fill(group, key, server.get(key), f"{base}/{key}", refs.get(key))
                if "cpu" not in group and server.get("cpu"):
                    self._fill(group, "cpu", server["cpu"], f"{base}/cpu", refs.get("cpu"))
                if "nics" not in group and server.get("nics"):
                    self._fill(group, "nics", server["nics"], f"{base}/nics", refs.get("nics"))
            gpu = group.get("gpu")
            spec = self.catalogue.gpu(gpu.get("model")) if isinstance(gpu, dict) else None
            if spec:
                refs = spec.get("refs", {})
                for key in GPU_FIELDS:
                    self._fill(gpu, key, spec.get(key), f"{base}/gpu/{key}", refs.get(key))

    def _server(self, group: dict[str, Any], base: str) -> dict[str, Any] | None:
        """Returns the catalogued server a node group names, or None; a spelling other than the server's id (an alias,
        other case or separators) is replaced by the id, and the id listed among the fills."""
        named = group.get("server_model")
        server_id = self.catalogue.server_id(named)
        if server_id is None:
            return None
        if named != server_id:
            group["server_model"] = server_id
            self.fills.append(Quantity(f"{base}/server_model", server_id, Source.VENDOR_LIMIT,
                                       f"catalogue server {server_id} (rules/data/catalogue.json), "
                                       f"which the quote names {named!r}"))
        return self.catalogue.document["servers"][server_id]

    def _fill_models(self) -> None:
        """Fills each model given by a catalogued name and no parameters: its parameters and every architecture
        member it leaves out (the members it gives win; those of ``experts`` one by one)."""
        for pointer, model in named_models(self.document):
            entry = self.catalogue.model(model["name"])
            if entry is None:
                continue
            refs = entry["refs"]
            self._fill(model, "parameters", entry["parameters"], f"{pointer}/parameters", refs["parameters"])
            architecture = model.setdefault("architecture", {})
            for member, value in entry["architecture"].items():
                where = f"{pointer}/architecture/{member}"
                if isinstance(value, dict):  # an object of numbers (experts): filled member by member, each cited
                    inner = architecture.setdefault(member, {})
                    for name, number in value.items():
                        self._fill(inner, name, number, f"{where}/{name}", refs["architecture"])
                else:
                    self._fill(architecture, member, value, where, refs["architecture"])

    def get(self, pointer: str, default: Any = None) -> Any:
        """Returns the resolved value at ``pointer`` (numbers plain), or ``default`` when absent."""
        found = self._found.get(pointer, _UNSEEN)
        if found is _UNSEEN:
            found = self._found[pointer] = self._look_up(pointer)
        return default if found is _ABSENT else found

    def _look_up(self, pointer: str) -> Any:
        # A pointer's parent (``/quote/node_groups/0`` of ``/quote/node_groups/0/count``) is looked up once and
        # kept: the checks read many members of few objects, so most pointers are one step from a kept parent.
        # (A pointer that does not start with exactly one "/" is walked below, as it always was.)
        if pointer[:1] == "/" and pointer[1:2] != "/":
            parent, _, token = pointer.rpartition("/")
            node = self._found.get(parent, _UNSEEN) if parent else self.document
            if node is _UNSEEN:
                node = self._found[parent] = self._look_up(parent)
            if "~" in token:
                token = _unescape(token)
            if isinstance(node, dict):
                return node.get(token, _ABSENT)
            if isinstance(node, list) and token.isdigit() and int(token) < len(node):
                return node[int(token)]
            return _ABSENT
        return member_at(self.document, pointer, _ABSENT)

    def quantity(self, pointer: str) -> Quantity | None:
        return self.quantities.get(pointer)

    def reader(self) -> Reader:
        return Reader(self)

    def provenance(self) -> list[dict[str, Any]]:
        """Returns every numeric input with its source, in pointer order (the record's input appendix).

        An assumption's entry is the one ``assumed`` classified (each check's assumptions are copies of it).
        """
        assumed, quantities = self.assumed(), self.quantities
        return [assumed.get(p) or quantities[p].as_dict() for p in sorted(quantities)]


class Reader:
    """A view of Inputs that remembers which pointers one check read, for its evidence and assumptions."""

    def __init__(self, inputs: Inputs) -> None:
        self.inputs = inputs
        self._found = inputs._found  # the values looked up already, read here without a call to Inputs.get
        # The pointers read, in the order read (a dict for its order and its cheap membership): a check's context
        # notes the job's values it reads here directly (rules/checks/base.py).
        self.read: dict[str, None] = {}
        self.missing: list[str] = []

    def num(self, pointer: str, default: float | None = None) -> float | None:
        """Returns the number at ``pointer`` and notes it as read; ``default`` when absent."""
        value = self._found.get(pointer, _UNSEEN)
        if value is _UNSEEN:
            value = self.inputs.get(pointer)
        kind = type(value)
        if kind is int or kind is float or (kind is not bool and isinstance(value, int | float)):
            self.read[pointer] = None
            return value
        return default

    def need(self, pointer: str) -> float | None:
        """Returns the number at ``pointer``; notes it as missing when absent."""
        value = self.num(pointer)
        if value is None and pointer not in self.missing:
            self.missing.append(pointer)
        return value

    def get(self, pointer: str, default: Any = None) -> Any:
        """Returns any value (text, flag, object) at ``pointer`` and notes it as read when present."""
        value = self._found.get(pointer, _UNSEEN)
        if value is _UNSEEN:
            value = self.inputs.get(pointer)
        if value is None or value is _ABSENT:
            return default
        if not isinstance(value, dict | list):  # containers are looked into, not used as inputs
            self.read[pointer] = None
        return value

    def note(self, pointer: str) -> None:
        """Notes one pointer as read (a value of the typed job the check used)."""
        self.read[pointer] = None

    def mark_read(self, pointers: list[str] | dict[str, None]) -> None:
        """Notes as read the pointers another reader of the same inputs read (a memoised fact's inputs), in order."""
        self.read.update(pointers if isinstance(pointers, dict) else dict.fromkeys(pointers))

    @property
    def pointers(self) -> list[str]:
        return list(self.read)

    def assumptions(self) -> list[dict[str, Any]]:
        """Returns the inputs read that are still assumptions (bare numbers, source 'assumption', or the policy's
        cited defaults, source 'default')."""
        return [dict(found) for found in map(self.inputs.assumed().get, self.read) if found is not None]

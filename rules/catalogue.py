"""The catalogue (rules/data/catalogue.json): datasheet values that fill what a quote leaves out, the public
models whose published configuration fills a model the submission names (``models``) and those whose architecture
it cannot express (``refused_models``), and the highest published training MFU a modelled rate is held against
(``published_mfu_envelope``).

GPU and server ids are read as they are spelled on quotes: case and separators do not matter (``HGX H200``,
``hgx-h200``), and a server is found by its id or one of its ``aliases`` (``HGX-H200`` for ``HGX-H200-8GPU``)."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from typing import Any

import schemas

CATALOGUE_RESOURCE = "data/catalogue.json"
# Words of a model name that name a variant with the base model's architecture (an instruction-tuned or chat
# release, a base release, the Hugging Face conversion), dropped before a name is looked up.
VARIANT_WORDS = frozenset({"instruct", "chat", "base", "it", "hf"})
_SEPARATORS = re.compile(r"[\s_-]+")


def hardware_key(name: str) -> str:
    """Returns the look-up key of a GPU or server id: lower case, without separators (``HGX H200``, ``hgx-h200`` and
    ``HGX_H200`` are all ``hgxh200``)."""
    return _SEPARATORS.sub("", name.strip().lower())


def closest_spellings(name: str, spellings: dict[str, str], count: int) -> list[str]:
    """Returns the ids whose look-up keys (``spellings``: key → id) are closest to ``name``, closest first: those whose
    key contains ``name``'s (``H200`` in ``H200-SXM-141GB``), in key order, then difflib's close matches."""
    key = hardware_key(name)
    found = [spellings[spelled] for spelled in sorted(spellings) if key and key in spelled]
    found += [spellings[match] for match in difflib.get_close_matches(key, list(spellings), n=count, cutoff=0.6)]
    return list(dict.fromkeys(found))[:count]


def model_key(name: str) -> str:
    """Returns the look-up key of a model name: lower case, without the publisher's prefix (``meta-llama/``), a
    leading ``meta``, the variant words and the separators (``meta-llama/Meta-Llama-3-8B-Instruct``, ``llama3-8b``
    and ``Llama 3 8B`` are all ``llama38b``; the dot of a version stays: ``Llama-3.1-8B`` is ``llama3.18b``)."""
    words = [word for word in _SEPARATORS.split(name.strip().lower().rpartition("/")[2]) if word]
    if words[:1] == ["meta"]:
        words = words[1:]
    return "".join(word for word in words if word not in VARIANT_WORDS)


@dataclass(frozen=True)
class Catalogue:
    """GPU and server models keyed by id; each numeric field has a citation in ``refs``."""

    document: dict[str, Any]

    @property
    def version(self) -> str:
        return self.document["catalogue_version"]

    def gpu(self, model: str | None) -> dict[str, Any] | None:
        return self.document["gpus"].get(model) if model else None

    def server(self, model: str | None) -> dict[str, Any] | None:
        """Returns the catalogued server ``model`` names (its id or an alias, read by ``hardware_key``), or None."""
        found = self.server_id(model)
        return self.document["servers"][found] if found else None

    def server_id(self, model: str | None) -> str | None:
        """Returns the id of the catalogued server ``model`` names (its id or an alias), or None."""
        return self._server_names.get(hardware_key(model)) if isinstance(model, str) and model.strip() else None

    def mfu_envelope(self) -> dict[str, Any] | None:
        """Returns the table of the highest published training MFU per size class, GPU and precision
        (``published_mfu_envelope``; rules/estimates/training_time/mfu_envelope.py reads it), or None."""
        return self.document.get("published_mfu_envelope")

    def gpu_models(self) -> list[str]:
        return sorted(self.document["gpus"])

    def server_models(self) -> list[str]:
        return sorted(self.document["servers"])

    def model(self, name: str | None) -> dict[str, Any] | None:
        """Returns the catalogued model ``name`` names (its canonical name or an alias, as ``model_key`` reads
        them), or None."""
        found = self._model_names.get(model_key(name)) if isinstance(name, str) and name.strip() else None
        return self.document["models"][found] if found else None

    def refused_model(self, name: str | None) -> tuple[str, dict[str, Any]] | None:
        """Returns (canonical name, entry) of the public model ``name`` names whose architecture the submission cannot
        express (``refused_models``, read as ``model_key`` reads names), or None."""
        found = self._refused_names.get(model_key(name)) if isinstance(name, str) and name.strip() else None
        return (found, self.document["refused_models"][found]) if found else None

    def model_names(self) -> list[str]:
        return sorted(self.document.get("models", {}))

    def closest_models(self, name: str, count: int = 3) -> list[str]:
        """Returns the canonical names of the catalogued models whose names are closest to ``name``, closest first."""
        keys = difflib.get_close_matches(model_key(name), list(self._model_names), n=3 * count, cutoff=0.6)
        return list(dict.fromkeys(self._model_names[key] for key in keys))[:count]

    def closest_gpus(self, name: str, count: int = 3) -> list[str]:
        """Returns the catalogued GPU ids closest to ``name``, closest first: those whose id contains it (``H200`` in
        ``H200-SXM-141GB``, separators and case ignored), then difflib's close matches."""
        return closest_spellings(name, {hardware_key(gpu): gpu for gpu in self.document["gpus"]}, count)

    def closest_servers(self, name: str, count: int = 3) -> list[str]:
        """Returns the catalogued server ids closest to ``name`` by their ids and aliases, closest first, as
        ``closest_gpus`` reads GPU ids (``HGX-H20`` finds ``HGX-H200-8GPU``)."""
        return closest_spellings(name, self._server_names, count)

    @cached_property
    def _server_names(self) -> dict[str, str]:
        """Look-up key → id, of every server's id and aliases. ValueError for a key two servers share."""
        names: dict[str, str] = {}
        for server_id, entry in self.document["servers"].items():
            for spelling in (server_id, *entry.get("aliases", ())):
                key = hardware_key(spelling)
                if names.setdefault(key, server_id) != server_id:
                    raise ValueError(f"server names {server_id!r} and {names[key]!r} share the look-up key {key!r}")
        return names

    @cached_property
    def _model_names(self) -> dict[str, str]:
        """Look-up key → canonical name, of every model's name and aliases. ValueError for a key two models share."""
        return _names_by_key(self.document.get("models", {}))

    @cached_property
    def _refused_names(self) -> dict[str, str]:
        """Look-up key → canonical name, of every refused model's name and aliases. ValueError for a key two models
        share, whether both are refused or one is catalogued."""
        names = _names_by_key(self.document.get("refused_models", {}))
        for key, canonical in names.items():
            if key in self._model_names:
                raise ValueError(f"model names {canonical!r} and {self._model_names[key]!r} share the look-up key "
                                 f"{key!r}")
        return names


def _names_by_key(entries: dict[str, Any]) -> dict[str, str]:
    """Returns look-up key → canonical name of the models ``entries`` holds, by name and alias; ValueError for a key two
    of them share."""
    names: dict[str, str] = {}
    for canonical, entry in entries.items():
        for spelling in (canonical, *entry.get("aliases", ())):
            key = model_key(spelling)
            if names.setdefault(key, canonical) != canonical:
                raise ValueError(f"model names {canonical!r} and {names[key]!r} share the look-up key {key!r}")
    return names


@cache
def load_catalogue() -> Catalogue:
    """Returns the bundled catalogue, validated against schemas/catalogue.schema.json (and its model and server names
    against each other) once per process."""
    text = resources.files("rules").joinpath(CATALOGUE_RESOURCE).read_text(encoding="utf-8")
    document = json.loads(text)
    problems = schemas.validate("catalogue", document)
    if problems:
        raise ValueError("bundled catalogue is invalid: " + "; ".join(f"{p.pointer}: {p.message}" for p in problems))
    catalogue = Catalogue(document)
    catalogue._model_names  # noqa: B018 - built now: refuses two models whose names share a look-up key
    catalogue._refused_names  # noqa: B018 - and a refused model's name that another model's shares
    catalogue._server_names  # noqa: B018 - and two servers whose ids or aliases share one
    return catalogue

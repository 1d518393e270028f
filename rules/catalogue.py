"""The hardware catalogue (rules/data/catalogue.json): datasheet values that fill what a quote leaves out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import schemas

CATALOGUE_RESOURCE = "data/catalogue.json"


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
        return self.document["servers"].get(model) if model else None

    def gpu_models(self) -> list[str]:
        return sorted(self.document["gpus"])

    def server_models(self) -> list[str]:
        return sorted(self.document["servers"])


@cache
def load_catalogue() -> Catalogue:
    """Returns the bundled catalogue, validated against schemas/catalogue.schema.json once per process."""
    text = resources.files("rules").joinpath(CATALOGUE_RESOURCE).read_text(encoding="utf-8")
    document = json.loads(text)
    problems = schemas.validate("catalogue", document)
    if problems:
        raise ValueError("bundled catalogue is invalid: " + "; ".join(f"{p.pointer}: {p.message}" for p in problems))
    return Catalogue(document)

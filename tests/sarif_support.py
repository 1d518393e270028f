"""The OASIS SARIF 2.1.0 schema (tests/data/sarif, with its source) and a validation against it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

SARIF_SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif" / "sarif-schema-2.1.0.json").read_text())


def sarif_problems(log: dict) -> list[str]:
    """Returns every way ``log`` breaks the SARIF 2.1.0 schema (formats checked too)."""
    validator = jsonschema.Draft4Validator(SARIF_SCHEMA, format_checker=jsonschema.FormatChecker())
    return [f"{error.json_path}: {error.message}" for error in validator.iter_errors(log)]

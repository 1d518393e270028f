"""Rewrites the vendored schemas from the packages that distribute them (see SOURCES.md).

    python -m tests.deploy.schemas.refresh --kubernetes-validate DIR --check-jsonschema DIR

DIR is an unpacked wheel (``pip download --no-deps kubernetes-validate==X``, then unzip). The Compose
Specification schema is copied byte for byte. For Kubernetes, the per-kind files of one version are copied
byte for byte, and ``_definitions.json`` keeps only the definitions those kinds reach through ``$ref``, each
without its ``description`` annotations (validation never reads them); every other keyword is kept as it is.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KUBERNETES_VERSION = "v1.30.0"
KUBERNETES_KINDS = ("configmap-v1.json", "deployment-apps-v1.json", "job-batch-v1.json", "secret-v1.json",
                    "service-v1.json")
DEFINITIONS = "_definitions.json"
# Keywords whose value maps names to schemas, and those whose value is one schema or a list of schemas.
SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
SCHEMA_VALUES = ("items", "additionalProperties", "not", "oneOf", "anyOf", "allOf")


def references(schema: Any) -> Iterator[str]:
    """Yields every ``$ref`` in ``schema``, at any depth."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref":
                yield value
            else:
                yield from references(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from references(value)


def without_descriptions(schema: Any) -> Any:
    """Returns ``schema`` without its ``description`` keywords (a property named description is kept)."""
    if isinstance(schema, list):
        return [without_descriptions(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description":
            continue
        if key in SCHEMA_MAPS and isinstance(value, dict):
            value = {name: without_descriptions(item) for name, item in value.items()}
        elif key in SCHEMA_VALUES:
            value = without_descriptions(value)
        kept[key] = value
    return kept


def reachable_definitions(kinds: list[dict[str, Any]], definitions: dict[str, Any]) -> set[str]:
    """Returns the names of the definitions the ``kinds`` schemas reach through ``$ref``, transitively."""
    pending = [ref.rsplit("/", 1)[-1] for kind in kinds for ref in references(kind)]
    reached: set[str] = set()
    while pending:
        name = pending.pop()
        if name not in reached:
            reached.add(name)
            pending.extend(ref.rsplit("/", 1)[-1] for ref in references(definitions[name]))
    return reached


def refresh(kubernetes_validate: Path, check_jsonschema: Path) -> None:
    """Rewrites the files under tests/deploy/schemas/ from the two unpacked wheels."""
    vendor = check_jsonschema / "check_jsonschema" / "builtin_schemas" / "vendor"
    shutil.copyfile(vendor / "compose-spec.json", HERE / "compose-spec.json")
    shutil.copyfile(vendor / "licenses" / "LICENSE.compose-spec", HERE / "LICENSE.compose-spec")

    variant = f"{KUBERNETES_VERSION}-local-strict"
    source = kubernetes_validate / "kubernetes_validate" / "kubernetes-json-schema" / variant
    target = HERE / "kubernetes" / variant
    target.mkdir(parents=True, exist_ok=True)
    for name in KUBERNETES_KINDS:
        shutil.copyfile(source / name, target / name)
    document = json.loads((source / DEFINITIONS).read_text())
    kinds = [json.loads((source / name).read_text()) for name in KUBERNETES_KINDS]
    names = reachable_definitions(kinds, document["$defs"])
    document["$defs"] = {name: without_descriptions(document["$defs"][name]) for name in sorted(names)}
    (target / DEFINITIONS).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    licence = next((kubernetes_validate).glob("kubernetes_validate-*.dist-info/licenses/LICENSE"))
    shutil.copyfile(licence, HERE / "kubernetes" / "LICENSE.kubernetes-validate")
    for path in sorted(HERE.rglob("*.json")):
        print(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.relative_to(HERE)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubernetes-validate", type=Path, required=True, help="unpacked kubernetes-validate wheel")
    parser.add_argument("--check-jsonschema", type=Path, required=True, help="unpacked check-jsonschema wheel")
    arguments = parser.parse_args()
    refresh(arguments.kubernetes_validate, arguments.check_jsonschema)


if __name__ == "__main__":
    main()

"""The count limits of a schema (``maxItems``, ``maxProperties``), checked before the schema is validated in depth.

Validating every item of an array that is over its limit costs as much as the items do: 1,024 node groups
where the submission schema admits 64 took half a second to refuse. ``CountLimits.check`` walks only the
document's arrays and objects along the schema's ``properties``, ``items``, ``additionalProperties`` and
local ``$ref``; it stops at the first array or object over its limit (its members are not looked at), so
its cost is bounded by what the schema admits. Limits under conditional keywords (``if``/``then``,
``anyOf``, …) are left to the full validation, which reports every limit in the same words.
"""

from __future__ import annotations

from typing import Any

from schemas.problem import Problem

# The walk follows the schema, so it goes no deeper than the schema does; a recursive schema stops here.
MAX_DEPTH = 64


def count_message(keyword: str, limit: int, found: int) -> str:
    """Returns the message of a ``maxItems``/``minItems``/``maxProperties``/``minProperties`` problem."""
    word = "at most" if keyword.startswith("max") else "at least"
    unit = "items" if keyword.endswith("Items") else "fields"
    return f"must have {word} {limit} {unit}, found {found}"


def _escape(part: str | int) -> str:
    return str(part).replace("~", "~0").replace("/", "~1")


class CountLimits:
    """The count limits of one schema, with its local ``$ref`` resolved (``#/$defs/...``)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.root = schema

    def check(self, document: Any) -> list[Problem]:
        """Returns a Problem for each array or object of ``document`` beyond its count limit, by pointer.

        The messages and pointers are the ones the full validation (``schemas.validate``) gives for the same limit.
        """
        found: list[Problem] = []
        self.problems(self.root, document, "", found, 0)
        return sorted(set(found), key=lambda p: p.pointer)

    def resolve(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        """Returns ``node`` and the subschemas its local ``$ref`` chain names (each applies to the same instance)."""
        found = [node]
        seen: set[str] = set()
        while isinstance(ref := found[-1].get("$ref"), str) and ref.startswith("#/") and ref not in seen:
            seen.add(ref)
            target: Any = self.root
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, dict) else None
            if not isinstance(target, dict):
                break
            found.append(target)
        return found

    def problems(self, node: dict[str, Any], value: Any, pointer: str, out: list[Problem], depth: int) -> None:
        if depth > MAX_DEPTH:
            return
        for schema in self.resolve(node):
            if isinstance(value, list):
                limit = schema.get("maxItems")
                if isinstance(limit, int) and len(value) > limit:
                    out.append(Problem(pointer, count_message("maxItems", limit, len(value))))
                    return
                items = schema.get("items")
                if isinstance(items, dict):
                    for index, item in enumerate(value):
                        if isinstance(item, dict | list):
                            self.problems(items, item, f"{pointer}/{index}", out, depth + 1)
            elif isinstance(value, dict):
                limit = schema.get("maxProperties")
                if isinstance(limit, int) and len(value) > limit:
                    out.append(Problem(pointer, count_message("maxProperties", limit, len(value))))
                    return
                properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
                others = schema.get("additionalProperties")
                for name, member in value.items():
                    if not isinstance(member, dict | list):
                        continue
                    sub = properties[name] if name in properties else others
                    if isinstance(sub, dict):
                        self.problems(sub, member, f"{pointer}/{_escape(name)}", out, depth + 1)

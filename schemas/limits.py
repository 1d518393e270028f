"""The count limits of a schema (``maxItems``, ``maxProperties``), checked before the schema is validated in depth.

Validating every item of an array that is over its limit costs as much as the items do: 1,024 node groups
where the submission schema admits 64 took half a second to refuse. ``CountLimits.check`` walks only the
document's arrays and objects along the schema's ``properties``, ``items``, ``additionalProperties`` and
local ``$ref``; it stops at the first array or object over its limit (its members are not looked at), so
its cost is bounded by what the schema admits, and it skips the members under whose subschema no limit
applies. Limits under conditional keywords (``if``/``then``, ``anyOf``, …) are left to the full validation,
which reports every limit in the same words.
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
        # By id() of a subschema (held with it, so that no other object takes its id): its resolve() chain, and
        # whether a count limit is reachable from it, so the walk skips the parts of a document no limit governs.
        self._chains: dict[int, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
        self._limited: dict[int, tuple[dict[str, Any], bool]] = {}

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

    def _chain(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        known = self._chains.get(id(node))
        if known is None:
            known = self._chains[id(node)] = (node, self.resolve(node))
        return known[1]

    def limited(self, node: dict[str, Any]) -> bool:
        """Returns whether a ``maxItems`` or ``maxProperties`` is reachable from ``node`` along the keywords the
        walk follows (``items``, ``properties``, ``additionalProperties``, local ``$ref``); found once per node."""
        known = self._limited.get(id(node))
        if known is None:
            known = self._limited[id(node)] = (node, self._reaches_limit(node))
        return known[1]

    def _reaches_limit(self, node: dict[str, Any]) -> bool:
        seen: set[int] = set()
        stack = [node]
        while stack:
            current = stack.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            for schema in self._chain(current):
                if "maxItems" in schema or "maxProperties" in schema:
                    return True
                properties = schema.get("properties")
                below = [schema.get("items"), schema.get("additionalProperties"),
                         *(properties.values() if isinstance(properties, dict) else ())]
                stack.extend(sub for sub in below if isinstance(sub, dict))
        return False

    def problems(self, node: dict[str, Any], value: Any, pointer: str, out: list[Problem], depth: int) -> None:
        if depth > MAX_DEPTH or not self.limited(node):
            return
        for schema in self._chain(node):
            if isinstance(value, list):
                limit = schema.get("maxItems")
                if isinstance(limit, int) and len(value) > limit:
                    out.append(Problem(pointer, count_message("maxItems", limit, len(value))))
                    return
                items = schema.get("items")
                if isinstance(items, dict) and self.limited(items):
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
                    if isinstance(sub, dict) and self.limited(sub):
                        self.problems(sub, member, f"{pointer}/{_escape(name)}", out, depth + 1)

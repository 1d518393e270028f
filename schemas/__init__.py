"""The public JSON Schemas (draft 2020-12) and a validator that reports problems by JSON Pointer.

``jsonschema`` decides and words every problem. When ``jsonschema-rs`` is installed it answers first
whether a document is valid (a valid example in a fraction of the time); only a document it finds invalid
(or cannot read) is validated again by ``jsonschema``, whose problems are the ones reported. The fast
validator checks each format with ``jsonschema``'s own FormatChecker, and documents holding a tuple (an
array to it, not to ``jsonschema``) are left to ``jsonschema``; tests/test_fast_validation.py holds the two
to the same answer on every example, base and fixture and on mutations of them.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError

from schemas.limits import CountLimits, count_message
from schemas.problem import Problem

try:  # optional: without it every document is validated by jsonschema alone
    import jsonschema_rs
except ImportError:  # pragma: no cover - depends on the installation
    jsonschema_rs = None

SCHEMA_NAMES = ("submission", "policy", "record", "catalogue", "addendum")

# A value quoted back in an error message is cut to this many characters, so a 10 MB string field
# produces a short message rather than echoing itself.
_QUOTE_LIMIT = 60


@cache
def load_schema(name: str) -> dict[str, Any]:
    """Returns the parsed schema ``schemas/<name>.schema.json``; KeyError for an unknown name."""
    if name not in SCHEMA_NAMES:
        raise KeyError(f"unknown schema {name!r}; known: {', '.join(SCHEMA_NAMES)}")
    text = resources.files(__package__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@cache
def validator(name: str) -> Draft202012Validator:
    """Returns a cached validator for one of the bundled schemas (format checks on)."""
    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=FormatChecker())


@cache
def fast_validator(name: str) -> Any:
    """Returns the ``jsonschema-rs`` validator of schema ``name`` (formats checked as ``jsonschema`` checks them),
    or None when the package is not installed."""
    if jsonschema_rs is None:
        return None
    checker = FormatChecker()
    formats = {format_name: (lambda value, format_name=format_name: checker.conforms(value, format_name))
               for format_name in checker.checkers}
    return jsonschema_rs.Draft202012Validator(load_schema(name), formats=formats, validate_formats=True)


def _holds_tuple(document: Any) -> bool:
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, tuple):
            return True
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


def _fast_says_valid(name: str, document: Any, holds_tuple: bool | None = None) -> bool:
    fast = fast_validator(name)
    if fast is None or (_holds_tuple(document) if holds_tuple is None else holds_tuple):
        return False
    try:
        return bool(fast.is_valid(document))
    except ValueError:  # a value it cannot read (a lone surrogate, an object of no JSON type)
        return False


def is_valid(name: str, document: Any) -> bool:
    """Returns True when ``document`` satisfies schema ``name``: the same answer as ``validate(...) == []``."""
    return _fast_says_valid(name, document) or not validate(name, document, at_most=1, fast=False)


@cache
def count_limits(name: str) -> CountLimits:
    """Returns the count limits (maxItems, maxProperties) of schema ``name``, checked before its full validation."""
    return CountLimits(load_schema(name))


def count_problems(name: str, document: Any) -> list[Problem]:
    """Returns the problems of each array or object of ``document`` beyond its count limit in schema ``name``.

    Cheap whatever the document holds (schemas/limits.py): a refusal for an oversized list never validates
    its items. The problems are worded and located as ``validate`` words and locates them.
    """
    return count_limits(name).check(document)


def validate(name: str, document: Any, *, at_most: int | None = None, fast: bool = True,
             holds_tuple: bool | None = None) -> list[Problem]:
    """Returns the problems of ``document`` against schema ``name``, sorted by pointer; [] if valid.

    ``at_most``: validation stops once that many distinct problems are found (those are returned), so the
    cost of a refusal is bounded. ``fast``: a valid document is recognised by ``jsonschema-rs`` when installed.
    ``holds_tuple``: whether the document holds a tuple, when the caller has walked it already
    (schemas.json_reader.strings_numbers_and_tuples); a document that does is left to ``jsonschema``.
    """
    if fast and _fast_says_valid(name, document, holds_tuple):
        return []
    seen: set[tuple[str, str]] = set()
    problems: list[Problem] = []
    for error in validator(name).iter_errors(document):
        for leaf in _leaves(error):
            problem = _describe(leaf)
            key = (problem.pointer, problem.message)
            if key not in seen:
                seen.add(key)
                problems.append(problem)
        if at_most is not None and len(problems) >= at_most:
            del problems[at_most:]
            break
    problems.sort(key=lambda p: p.pointer)
    return problems


def _leaves(error: ValidationError) -> list[ValidationError]:
    # anyOf/if-then errors wrap the specific failures in ``context``; report those, not the wrapper.
    if error.context:
        best = [e for e in error.context if not e.context] or list(error.context)
        return [leaf for e in best for leaf in _leaves(e)]
    return [error]


def _pointer(parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _quote(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= _QUOTE_LIMIT else text[:_QUOTE_LIMIT] + f"… ({len(text):,} characters)"


def _known_properties(schema: dict[str, Any]) -> list[str]:
    return sorted(schema.get("properties", {}))


# Unit suffixes a field name may be typed with, and what the contract's unit means against it (README: units live in
# field names): a figure moved to the suggested field must be converted, not copied.
_UNIT_HINTS = {
    ("gbps", "gbs"): "GB/s, gigabytes per second: a figure in Gb/s is 8 times larger, divide it by 8",
    ("gbs", "gbps"): "Gb/s, gigabits per second: a figure in GB/s is 8 times smaller, multiply it by 8",
    ("gb", "gib"): "GiB, 2^30 bytes: 1 GB = 0.9313 GiB; memory sold in binary sizes, such as DIMMs, is in GiB already",
    ("kw", "w"): "W: a figure in kW is 1,000 times smaller, multiply it by 1,000",
    ("w", "kw"): "kW: a figure in W is 1,000 times larger, divide it by 1,000",
}


def _unit_hint(name: str, suggested: str) -> str:
    """Returns what the suggested field's unit means when it differs from the typed one's only in its unit suffix."""
    typed, _, unit = name.rpartition("_")
    stem, _, expected = suggested.rpartition("_")
    explanation = _UNIT_HINTS.get((unit.lower(), expected)) if typed.lower() == stem else None
    return f" ({suggested} is in {explanation})" if explanation else ""


def _describe(error: ValidationError) -> Problem:
    """Returns a Problem whose message says what was found and what was expected."""
    pointer = _pointer(error.absolute_path)
    kind, expected, found = error.validator, error.validator_value, error.instance
    if kind == "additionalProperties":
        known = _known_properties(error.schema)
        extras = [k for k in found if k not in known] if isinstance(found, dict) else []
        if extras:
            name = extras[0]
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?{_unit_hint(name, close[0])}" if close else (
                f"; known fields: {', '.join(known)}")
            return Problem(f"{pointer}/{name}", f"unknown field {name!r}{hint}")
        extra_schema = error.schema.get("additionalProperties")
        return Problem(pointer, f"invalid property value; expected {extra_schema}")
    if kind == "required":
        missing = [k for k in expected if isinstance(found, dict) and k not in found]
        name = missing[0] if missing else "?"
        return Problem(f"{pointer}/{name}", f"required field {name!r} is missing")
    if kind == "type":
        return Problem(pointer, f"expected {_type_words(expected)}, found {_json_type(found)} {_quote(found)}")
    if kind == "minimum":
        return Problem(pointer, f"must be ≥ {expected}, found {_quote(found)}")
    if kind == "exclusiveMinimum":
        return Problem(pointer, f"must be > {expected}, found {_quote(found)}")
    if kind == "maximum":
        return Problem(pointer, f"must be ≤ {expected}, found {_quote(found)}")
    if kind == "maxLength":
        return Problem(pointer, f"text of {len(found):,} characters exceeds the limit of {expected:,}")
    if kind == "enum":
        return Problem(pointer, f"{_quote(found)} is not one of {', '.join(map(str, expected))}")
    if kind == "const":
        return Problem(pointer, f"must be {_quote(expected)}, found {_quote(found)}")
    if kind in ("maxItems", "minItems", "minProperties", "maxProperties"):
        return Problem(pointer, count_message(kind, expected, len(found)))
    if kind == "pattern":
        return Problem(pointer, f"{_quote(found)} does not match the pattern {expected}")
    if kind == "format":
        return Problem(pointer, f"{_quote(found)} is not a valid {expected}")
    message = error.message if len(error.message) <= 200 else error.message[:200] + "…"
    return Problem(pointer, message)


_TYPE_WORDS = {"integer": "an integer", "number": "a number", "string": "text", "object": "an object",
               "array": "a list", "boolean": "true or false", "null": "null"}


def _type_words(expected: str | list[str]) -> str:
    names = [expected] if isinstance(expected, str) else list(expected)
    return " or ".join(_TYPE_WORDS.get(n, n) for n in names)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {dict: "object", list: "list", str: "text", type(None): "null"}.get(type(value), type(value).__name__)

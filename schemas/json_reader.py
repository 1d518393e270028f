"""The one reader of JSON documents that come from outside: API request bodies and the CLI's submission files.

A document is read only when every reader of it would see the same values, and they are values the
service can store, canonicalise (RFC 8785) and sign:

- at most ``max_bytes`` (MAX_JSON_BYTES by default), UTF-8 (a leading byte order mark is ignored);
- JSON text (RFC 8259) without NaN or Infinity, nesting arrays and objects at most MAX_JSON_DEPTH levels
  (RFC 8259 §9 lets a parser limit it: no document here nests beyond about ten, and every recursive step
  after parsing, schema validation, RFC 8785, merge patches and deep copies, stays far from Python's
  recursion limit);
- unique member names in every object: parsers disagree on which of two equal names wins (RFC 8259 §4),
  and the evaluated, stored and signed document must be the one every reader of it sees;
- no U+0000 in any string or member name (PostgreSQL's text cannot hold it, and it is never meant) and no
  lone surrogate (a ``\\ud800`` escape without its pair is no character, and no UTF-8 text can hold it:
  I-JSON, RFC 7493 §2.1);
- numbers that JSON carries exactly: integers within ±(2^53 − 1) and finite numbers (I-JSON §2.2).

The first three are ``NotJson`` (the API answers 400), the size ``JsonTooLarge`` (413), the last two
``UnacceptableJson`` (422, one Problem per place, by JSON Pointer). The messages name ``origin`` ("the
body", a file name), so the API and the command line say the same thing in the same words.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

from schemas.problem import Problem
from schemas.text import describe, visible

MAX_JSON_BYTES = 2 * 1024 * 1024
MAX_JSON_DEPTH = 64
# RFC 8785 writes numbers as IEEE doubles: integers are exact only within ±(2^53 − 1).
SAFE_INTEGER = 2**53 - 1
# At most this many places are listed in one refusal; the detail still says how many there are.
MAX_LISTED_PROBLEMS = 100

# Only a \uD800-\uDFFF escape can put a surrogate into a parsed string: UTF-8 text cannot encode one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# A number JSON cannot carry exactly is written with 16 digits or more in a row (an integer beyond 2^53,
# or an integer part beyond 1.8e308), or with an exponent of three digits or more.
_LONG_NUMBER = re.compile(r"[0-9]{16}|[eE][-+]?[0-9]{3}")


class JsonError(ValueError):
    """A document that is not read: ``detail`` says why, ``problems`` where (by JSON Pointer), when known."""

    def __init__(self, detail: str, problems: list[Problem] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.problems = problems or []


class NotJson(JsonError):
    """Not JSON as this service reads it: not UTF-8, not JSON text, nested too deeply, or a member name repeated."""


class JsonTooLarge(JsonError):
    """Larger than the limit; not parsed."""


class UnacceptableJson(JsonError):
    """JSON that holds U+0000, a lone surrogate, or a number JSON does not carry exactly."""


class _Repeated(dict):
    """The members of an object in which a name appears more than once, with those names."""

    repeated: list[str]


def _members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) == len(pairs):
        return members
    # Counted only now: counting every object's names would cost far more than this comparison.
    repeated = _Repeated(members)
    repeated.repeated = sorted(name for name, count in Counter(name for name, _ in pairs).items() if count > 1)
    return repeated


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON (RFC 8259) does not, and neither can be canonicalised.
    raise json.JSONDecodeError(f"{name} is not a JSON number", name, 0)


def pointer_of(path: tuple[str | int, ...]) -> str:
    """Returns the JSON Pointer (RFC 6901) of a path of member names and indices."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def number_problem(value: Any) -> str | None:
    """Returns why JSON does not carry ``value`` exactly (an integer beyond ±(2^53 − 1), an infinity), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and not -SAFE_INTEGER <= value <= SAFE_INTEGER:
        return f"{str(value)[:40]} is outside the numbers JSON carries exactly (±{SAFE_INTEGER:,})"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is outside the numbers JSON carries exactly (±{SAFE_INTEGER:,})"
    return None


def unrepresentable_numbers(document: Any, pointer: str = "") -> list[Problem]:
    """Returns a Problem for each number of ``document`` that JSON does not carry exactly (see number_problem)."""
    problems = []
    stack: list[tuple[Any, str]] = [(document, pointer)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            stack.extend((item, f"{where}/{str(key).replace('~', '~0').replace('/', '~1')}")
                         for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((item, f"{where}/{index}") for index, item in enumerate(value))
        elif (message := number_problem(value)) is not None:
            problems.append(Problem(where, message))
    return sorted(problems, key=lambda p: p.pointer)


def strings_and_odd_numbers(document: Any) -> tuple[list[str], bool]:
    """Returns the strings and member names of ``document`` and whether one of its numbers is one JSON does not
    carry exactly (:func:`number_problem`), in one walk that builds no pointers.

    A valid submission holds neither a hidden character nor such a number, so the walks that locate them
    (schemas.text.hidden_text_problems, :func:`unrepresentable_numbers`) need run only when this one finds one
    (schemas.text.holds_hidden_text on the strings).
    """
    texts, odd, _ = strings_numbers_and_tuples(document)
    return texts, odd


def strings_numbers_and_tuples(document: Any) -> tuple[list[str], bool, bool]:
    """Returns what :func:`strings_and_odd_numbers` returns and whether ``document`` holds a tuple (in an array or
    object, or itself one: what ``schemas.validate`` asks before its fast validator), in the same one walk."""
    texts: list[str] = []
    odd = tuples = False
    stack = [document]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is str:
            texts.append(value)
        elif kind is dict:
            for key, item in value.items():
                if isinstance(key, str):
                    texts.append(key)
                stack.append(item)
        elif kind is list:
            stack.extend(value)
        elif kind is float:
            odd = odd or not math.isfinite(value)
        elif kind is int:
            odd = odd or not -SAFE_INTEGER <= value <= SAFE_INTEGER
        elif isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict | list):  # a subclass: walked as its base is
            stack.append(dict(value) if isinstance(value, dict) else list(value))
        elif isinstance(value, tuple):
            tuples = True
        else:
            odd = odd or number_problem(value) is not None
    return texts, odd, tuples


def read_json(data: bytes | str, origin: str = "the body", max_bytes: int | None = MAX_JSON_BYTES,
              precheck: Callable[[Any], None] | None = None) -> Any:
    """Returns the JSON value in ``data``, read as the module docstring says; JsonError (a subclass) otherwise.

    ``precheck`` is called first with the value as a plain parse reads it (at the C parser's speed: member
    names, depth and values not looked at) and refuses it by raising: a schema's count limits are checked
    so, before the careful read, whose cost grows with the document. Text that does not parse is left to the
    careful read, which says what is wrong.
    """
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    if max_bytes is not None and size > max_bytes:
        raise JsonTooLarge(f"{origin} is {size:,} bytes; the limit is {max_bytes:,} bytes")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise NotJson(f"{origin} is not UTF-8 text: {error.reason} at byte {error.start}") from None
    else:
        text = data.removeprefix("\ufeff")
    if precheck is not None:
        _precheck(text, precheck)
    try:
        document = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_members)
    except RecursionError:
        raise NotJson(_too_deep(origin)) from None
    except json.JSONDecodeError as error:
        raise NotJson(f"{origin} is not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}") from None
    except ValueError:  # Python converts integers of at most sys.get_int_max_str_digits() digits
        raise NotJson(f"{origin} holds an integer of more than {sys.get_int_max_str_digits():,} digits; no number "
                      "here needs that many") from None
    _inspect(document, origin, nul="\\u0000" in text, surrogate=_SURROGATE_ESCAPE.search(text) is not None,
             numbers=_LONG_NUMBER.search(text) is not None)
    return document


def _precheck(text: str, precheck: Callable[[Any], None]) -> None:
    try:
        quick = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return
    precheck(quick)


def _too_deep(origin: str) -> str:
    return f"{origin} nests arrays and objects more than {MAX_JSON_DEPTH} levels deep"


# What UnacceptableJson says a document contains, by the kind of each problem.
_SURROGATE_KIND, _NUL_KIND, _NUMBER_KIND = ("a lone surrogate, which is not a character",
                                            "the character U+0000 (NUL), which text may not hold here",
                                            "a number JSON does not carry exactly")


def _inspect(document: Any, origin: str, *, nul: bool, surrogate: bool, numbers: bool) -> None:
    """Raises NotJson past MAX_JSON_DEPTH or for a repeated member name, UnacceptableJson listing every string
    and number of a parsed document that is refused (its detail names each kind found).

    Iterative, so any depth Python parsed is walked; strings and numbers are looked at only when the text
    may hold what is refused (``nul``, ``surrogate``, ``numbers``).
    """
    check_text = nul or surrogate
    found: list[tuple[str, Problem]] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(document, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict | list):
            if len(path) >= MAX_JSON_DEPTH:
                raise NotJson(_too_deep(origin))
            if type(value) is _Repeated:
                _refuse_repeated(value, path, origin)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if check_text and isinstance(key, str):
                    found += _text_problems(key, path + (key,), nul, surrogate)
                if isinstance(item, dict | list) or (check_text and isinstance(item, str)):
                    stack.append((item, path + (key,)))
                elif numbers and (message := number_problem(item)) is not None:
                    found.append((_NUMBER_KIND, Problem(pointer_of(path + (key,)), message)))
        elif isinstance(value, str):
            found += _text_problems(value, path, nul, surrogate)
        elif numbers and (message := number_problem(value)) is not None:
            found.append((_NUMBER_KIND, Problem(pointer_of(path), message)))
    if not found:
        return
    kinds = [kind for kind in (_SURROGATE_KIND, _NUL_KIND, _NUMBER_KIND) if any(k == kind for k, _ in found)]
    problems = sorted((problem for _, problem in found), key=lambda p: p.pointer)
    places = f" ({len(problems):,} places; the first {MAX_LISTED_PROBLEMS} are listed)" \
        if len(problems) > MAX_LISTED_PROBLEMS else ""
    raise UnacceptableJson(f"{origin} contains " + "; it also contains ".join(kinds) + places,
                           problems[:MAX_LISTED_PROBLEMS])


def _refuse_repeated(members: _Repeated, path: tuple[str | int, ...], origin: str) -> None:
    names = ", ".join(map(repr, members.repeated))
    raise NotJson(f"{origin} is not acceptable JSON: member name {names} appears more than once in one object",
                  [Problem(visible(pointer_of(path + (name,))), "appears more than once in this object; readers of "
                                                                "JSON disagree on which of the values counts")
                   for name in members.repeated])


def _text_problems(text: str, path: tuple[str | int, ...], nul: bool, surrogate: bool) -> list[tuple[str, Problem]]:
    problems = []
    if surrogate and _SURROGATE.search(text):
        # The pointer is written with visible(): it names a member whose name may hold the surrogate itself.
        problems.append((_SURROGATE_KIND, Problem(visible(pointer_of(path)), describe(text))))
    if nul and "\x00" in text:
        problems.append((_NUL_KIND, Problem(pointer_of(path), "must not contain U+0000 (NUL)")))
    return problems


_DOUBLE_MAX = sys.float_info.max
_DOUBLE_MIN = -_DOUBLE_MAX
_SAFE_MIN = -SAFE_INTEGER


def as_doubles(value: Any, name: str = "value", error: type[ValueError] = ValueError, hint: str = "") -> Any:
    """Returns ``value`` with every integer beyond ±(2^53 − 1) as the double JSON readers read it (I-JSON §2.2).

    Tuples stay tuples. Raises ``error`` naming the innermost member for a number no double holds: an integer
    beyond the double range, NaN or an infinity (``hint`` is appended to the message).
    """
    kind = type(value)  # the common leaves first (a finite float the most common), without the general tests below
    if (kind is float and _DOUBLE_MIN <= value <= _DOUBLE_MAX) or kind is str or (
            kind is int and _SAFE_MIN <= value <= SAFE_INTEGER) or kind is bool or value is None:
        return value
    # A container's common leaves are tested here as above, without a call each (evidence is mostly such leaves).
    if kind is dict:
        out = {}
        for key, item in value.items():
            kind = type(item)
            out[key] = item if (kind is float and _DOUBLE_MIN <= item <= _DOUBLE_MAX) or kind is str or (
                kind is int and _SAFE_MIN <= item <= SAFE_INTEGER) or kind is bool or item is None else as_doubles(
                item, key, error, hint)
        return out
    if isinstance(value, dict):
        return {key: as_doubles(item, key, error, hint) for key, item in value.items()}
    if isinstance(value, list | tuple):
        items = [item if ((kind := type(item)) is float and _DOUBLE_MIN <= item <= _DOUBLE_MAX) or kind is str or (
                     kind is int and _SAFE_MIN <= item <= SAFE_INTEGER) or kind is bool or item is None
                 else as_doubles(item, name, error, hint) for item in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not -SAFE_INTEGER <= value <= SAFE_INTEGER:
        try:
            return float(value)
        except OverflowError:
            raise error(f"{name} is too large for a JSON number (an integer of {value.bit_length()} bits){hint}") \
                from None
    if isinstance(value, float) and not math.isfinite(value):
        raise error(f"{name} is not a finite number ({value}){hint}")
    return value


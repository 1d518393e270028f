"""RFC 8785 canonical JSON (the JSON Canonicalization Scheme), byte for byte what the ``rfc8785`` package writes.

``rfc8785.dumps`` walks a document in Python, one call per value; a record of the 128-node example takes
about 6 ms there, and the submission path hashes several such documents. ``canonical_json`` writes the
same bytes with the standard library's C encoder (``json.dumps`` with sorted keys, no whitespace and
UTF-8 output) after one pass that rewrites what that encoder would write differently:

- numbers: RFC 8785 writes a double as ECMAScript's ``Number.prototype.toString`` does (RFC 8785
  §3.2.2.3), Python as ``repr``. They agree for a non-integral double of magnitude 1e-4 or more (both
  fixed notation, the same shortest digits) and for one of 1e21 or more (both exponent notation). An
  integral double below 2^53 is written as the integer (``5.0`` is ``5``); one from 2^53 to 1e21 as the
  integer RFC 8785 writes (its shortest digits padded with zeros, which is not the double's exact value);
- member names are sorted by UTF-16 code units (RFC 8785 §3.2.3) where Python sorts by code points. The
  two orders differ only when a name holds a character beyond U+FFFF, so such a document is left to
  ``rfc8785``;
- strings: both escape ``"``, ``\\`` and the controls below U+0020 alike (``\\n``, ``\\u001f``, …) and
  write every other character as UTF-8.

Anything else, a non-integral double below 1e-4, a lone surrogate, an integer beyond ±(2^53 − 1), NaN or
an infinity, a type JSON has no value for, is canonicalised by ``rfc8785`` itself, so the result (or the
error) is always the package's. tests/test_canonical_json.py holds the two against each other.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import rfc8785

# Integers RFC 8785 writes exactly: the doubles' safe integer range (I-JSON, RFC 7493 §2.2).
_SAFE = 2**53
# A non-integral double at least this large is written in fixed notation by repr and by ECMAScript alike.
_FIXED_FROM = 1e-4
# From here on both write exponent notation (ECMAScript's toString switches at 1e21, repr at 1e16).
_EXPONENT_FROM = 1e21
# The first code point whose UTF-16 form is a surrogate pair (and sorts differently).
_ASTRAL = "\U00010000"


class _Unplain(Exception):
    """The document holds a value the C encoder would write differently from RFC 8785."""


def _float(value: float) -> Any:
    if value.is_integer():
        if -_SAFE < value < _SAFE:
            return int(value)
        if abs(value) >= _EXPONENT_FROM:
            return value
        return int(rfc8785.dumps(value))  # the integer RFC 8785 writes for a double of 2^53 … 1e21
    if abs(value) >= _FIXED_FROM:  # False for NaN; an infinity is refused by the encoder (allow_nan=False)
        return value
    raise _Unplain


def _plain(value: Any) -> Any:
    """Returns ``value`` with each double as the C encoder must see it to write RFC 8785; _Unplain otherwise."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        if -_SAFE < value < _SAFE:
            return value
        raise _Unplain
    if kind is float:
        return _float(value)
    if kind is dict:
        plain = {}
        for name, item in value.items():
            if type(name) is not str or not (name.isascii() or max(name) < _ASTRAL):
                raise _Unplain
            plain[name] = _plain(item)
        return plain
    if kind is list or kind is tuple:
        return [_plain(item) for item in value]
    # Subclasses (a StrEnum member, an IntEnum member, a dict subclass) hold the value RFC 8785 writes.
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return _plain(int(value))
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return _plain(dict(value))
    raise _Unplain


def _is_plain(value: Any) -> bool:
    """Returns whether ``_plain(value)`` would return a copy of ``value`` the C encoder writes alike: only exact
    dicts (member names without characters beyond U+FFFF), lists, tuples, text, flags, nulls, safe integers and
    doubles ``_float`` keeps. It builds nothing (a submission is usually such a value) and recurses as ``_plain``
    does, so a cycle ends in RecursionError alike."""
    kind = type(value)
    if kind is dict:
        for name in value:
            if type(name) is not str or not (name.isascii() or max(name) < _ASTRAL):
                return False
        items: Any = value.values()
    elif kind is list or kind is tuple:
        items = value
    else:
        return kind is str or kind is bool or value is None or (kind is int and -_SAFE < value < _SAFE) or (
            kind is float and not value.is_integer() and abs(value) >= _FIXED_FROM)
    for item in items:  # the common leaves tested here, the others (and containers) by the call
        kind = type(item)
        if not (kind is str or kind is bool or item is None or (kind is int and -_SAFE < item < _SAFE)
                or _is_plain(item)):
            return False
    return True


def canonical_json(value: Any) -> bytes:
    """Returns the RFC 8785 canonical UTF-8 bytes of ``value``, equal to ``rfc8785.dumps(value)``.

    Raises what ``rfc8785.dumps`` raises (a ``ValueError``) for a value RFC 8785 cannot canonicalise.
    """
    try:
        text = json.dumps(value if _is_plain(value) else _plain(value), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=False)
        return text.encode("utf-8")
    except (_Unplain, ValueError, RecursionError):  # UnicodeEncodeError (a lone surrogate) is a ValueError
        return rfc8785.dumps(value)


def digest_of(value: Any) -> str:
    """Returns ``sha256:<hex>`` of the RFC 8785 canonical bytes of ``value``."""
    return digest_of_canonical(canonical_json(value))


def digest_of_canonical(canonical: bytes) -> str:
    """Returns ``sha256:<hex>`` of bytes that are already canonical JSON (``canonical_json_with``'s)."""
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


# What ``canonical_json`` writes for ``placeholder(i)``: the only way that string can be written.
_PLACEHOLDER = re.compile(rb'"\\u0000canonical-json-part:(\d+)\\u0000"')


def placeholder(index: int) -> str:
    """Returns the string that stands for ``parts[index]`` in a value given to ``canonical_json_with``."""
    return f"\x00canonical-json-part:{index}\x00"


def canonical_json_with(value: Any, parts: list[bytes]) -> bytes | None:
    """Returns ``canonical_json(value)`` where each ``placeholder(i)`` of ``value`` is written as ``parts[i]``,
    the canonical bytes of the value it stands for; None where the placeholders written are not each of
    ``parts`` exactly once (a string of ``value`` holds one), and the caller canonicalises the whole value.
    ``value`` holds each ``placeholder(i)`` once, as a value (not a member name).

    RFC 8785 writes each value the same wherever it stands, so a value canonicalised once (a check's
    evidence, hashed on its own and inside its record) can be spliced into the bytes of a larger one.
    """
    pieces = _PLACEHOLDER.split(canonical_json(value))
    indices = pieces[1::2]
    if sorted(int(index) for index in indices) != list(range(len(parts))):
        return None
    pieces[1::2] = [parts[int(index)] for index in indices]
    return b"".join(pieces)

"""Request and response helpers shared by the blueprints: JSON bodies, ETags and the clock."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from datetime import datetime
from typing import Any

import rfc8785
from flask import Response, current_app, request
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from rules.errors import Problem
from schemas.text import hidden_text_problems, visible
from service.config import clock_of
from service.errors import (
    InvalidRequest,
    MalformedRequest,
    PreconditionFailed,
    PreconditionRequired,
    UnsupportedMediaType,
)
from service.store import body_digest, etag_of


def now() -> datetime:
    """Returns the current time from the app's clock (aware UTC)."""
    return clock_of(current_app.config)()


def is_json_media_type(mimetype: str) -> bool:
    """Returns True for application/json and any application/*+json type."""
    return mimetype == "application/json" or (mimetype.startswith("application/") and mimetype.endswith("+json"))


# Deeper nesting than this is refused (RFC 8259 §9 lets a parser limit it): no request body of this API
# nests beyond about ten levels, and every recursive step after parsing (schema validation, RFC 8785,
# merge patches, deep copies) stays far from Python's recursion limit.
MAX_JSON_DEPTH = 64
_TOO_DEEP = f"the body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep"


def json_body() -> Any:
    """Returns the parsed JSON body: 415 when it is not declared as JSON, 400 when it does not parse.

    Werkzeug raises 413 here first when the body exceeds MAX_CONTENT_LENGTH. The body must be UTF-8 (a
    leading byte order mark is ignored), with unique member names, no NaN or Infinity, at most
    MAX_JSON_DEPTH levels of arrays and objects (400 otherwise), and no U+0000 in any string (422:
    PostgreSQL's text cannot hold it, and it is never meant) nor a lone surrogate in any string or member
    name (422: a ``\\ud800`` escape without its pair is no character, and no UTF-8 text can hold it).
    """
    raw = request.get_data(cache=True)
    if not is_json_media_type(request.mimetype):
        found = request.mimetype or "no Content-Type"
        raise UnsupportedMediaType(f"the body must be JSON sent as Content-Type: application/json; found {found}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise MalformedRequest(f"the body is not UTF-8 text: {error.reason} at byte {error.start}") from None
    try:
        document = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_reject_duplicates)
    except RecursionError:
        raise MalformedRequest(_TOO_DEEP) from None
    except json.JSONDecodeError as error:
        raise MalformedRequest(f"the body is not valid JSON: {error.msg} at line {error.lineno}, "
                               f"column {error.colno}") from None
    except _RepeatedName as error:
        raise MalformedRequest(f"the body is not acceptable JSON: {error}") from None
    except ValueError:  # Python converts integers of at most sys.get_int_max_str_digits() digits
        raise MalformedRequest(f"the body holds an integer of more than {sys.get_int_max_str_digits():,} digits; "
                               "no number here needs that many") from None
    _check_structure(document, may_hold_nul="\\u0000" in text,
                     may_hold_surrogate=_SURROGATE_ESCAPE.search(text) is not None)
    return document


# Only a \uD800-\uDFFF escape can put a surrogate into a parsed string: UTF-8 text cannot encode one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON (RFC 8259) does not, and neither can be canonicalised.
    raise json.JSONDecodeError(f"{name} is not a JSON number", name, 0)


class _RepeatedName(ValueError):
    pass


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Parsers disagree on which of two equal names wins (RFC 8259 §4): the evaluated, stored and signed
    # document must be the one every reader of the body sees.
    members = dict(pairs)
    if len(members) != len(pairs):
        repeated = sorted(name for name, count in Counter(name for name, _ in pairs).items() if count > 1)
        raise _RepeatedName(f"member name {', '.join(map(repr, repeated))} appears more than once in one object")
    return members


def _check_structure(document: Any, may_hold_nul: bool, may_hold_surrogate: bool = False) -> None:
    """Raises MalformedRequest past MAX_JSON_DEPTH, InvalidRequest for U+0000 or a lone surrogate (iteratively)."""
    check_text = may_hold_nul or may_hold_surrogate
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(document, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict | list):
            if len(path) >= MAX_JSON_DEPTH:
                raise MalformedRequest(_TOO_DEEP)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if check_text and isinstance(key, str):
                    _check_text(key, path + (key,), may_hold_nul, may_hold_surrogate)
                if isinstance(item, dict | list) or (check_text and isinstance(item, str)):
                    stack.append((item, path + (key,)))
        elif isinstance(value, str):
            _check_text(value, path, may_hold_nul, may_hold_surrogate)


def _check_text(text: str, path: tuple[str | int, ...], may_hold_nul: bool, may_hold_surrogate: bool) -> None:
    if may_hold_surrogate and (surrogate := _SURROGATE.search(text)):
        _refuse_surrogate(path, surrogate.group())
    if may_hold_nul and "\x00" in text:
        _refuse_nul(path)


def _refuse_surrogate(path: tuple[str | int, ...], surrogate: str) -> None:
    # The pointer is written with visible(): it names a member whose name may hold the surrogate itself.
    pointer = visible("".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path))
    raise InvalidRequest("the body contains a lone surrogate, which is not a character",
                         [Problem(pointer, f"contains U+{ord(surrogate):04X}, half of a UTF-16 surrogate pair "
                                           "written as a \\u escape without its other half; JSON text must hold "
                                           "whole characters (I-JSON, RFC 7493 §2.1)")])


def _refuse_nul(path: tuple[str | int, ...]) -> None:
    pointer = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)
    raise InvalidRequest("the body contains the character U+0000 (NUL), which text may not hold here",
                         [Problem(pointer, "must not contain U+0000 (NUL)")])


def canonical_digest(document: Any) -> str:
    """Returns ``sha256:<hex>`` of the canonical JSON of a body; InvalidRequest when it has no canonical form."""
    try:
        return body_digest(document)
    except rfc8785.CanonicalizationError as error:
        raise InvalidRequest(f"the body cannot be canonicalised (RFC 8785): {error}; integers must lie within "
                             "±2^53") from None


def _pointer(error: ValidationError) -> str:
    path = list(error.absolute_path)
    if error.validator == "required":
        missing = [k for k in error.validator_value if isinstance(error.instance, dict) and k not in error.instance]
        path += missing[:1]
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        path += [k for k in error.instance if k not in known][:1]
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def validate_body(document: Any, schema: dict[str, Any], what: str) -> None:
    """Raises InvalidRequest with one {pointer, message} per way ``document`` breaks ``schema``."""
    errors = sorted(Draft202012Validator(schema).iter_errors(document), key=lambda e: list(e.absolute_path))
    # Every text of a request body can reach a record or its PDF: invisible and reordering characters are refused.
    problems = [Problem(_pointer(e), _message(e)) for e in errors] + hidden_text_problems(document)
    if problems:
        noun = "problem" if len(problems) == 1 else "problems"
        raise InvalidRequest(f"the {what} has {len(problems)} {noun}", problems)


def _message(error: ValidationError) -> str:
    if error.validator == "required":
        missing = [k for k in error.validator_value if isinstance(error.instance, dict) and k not in error.instance]
        return f"required field {missing[0]!r} is missing" if missing else error.message
    if error.validator == "additionalProperties":
        return "unknown field; " + f"known fields: {', '.join(sorted(error.schema.get('properties', {})))}"
    if error.validator == "maxLength":
        return f"text of {len(error.instance):,} characters exceeds the limit of {error.validator_value:,}"
    if error.validator == "enum":
        return f"{error.instance!r} is not one of {', '.join(map(str, error.validator_value))}"
    message = error.message
    return message if len(message) <= 200 else message[:200] + "…"


def expected_version(current_version: int) -> int:
    """Returns the version that If-Match names: 428 when it is missing, 412 when it is not the current one."""
    header = request.headers.get("If-Match")
    if not header:
        raise PreconditionRequired("this transition needs If-Match with the submission's ETag (from GET or the "
                                   "last response), so a change made meanwhile is not overwritten")
    condition = request.if_match
    if condition.star_tag:
        raise PreconditionRequired("If-Match: * does not protect against lost updates here; send the ETag you "
                                   "read")
    current = etag_of(current_version)
    if not condition.contains(current.strip('"')):
        raise PreconditionFailed(f"If-Match {header} does not match the current ETag {current}: the submission "
                                 "changed since you read it; GET it again, review the change, and retry")
    return current_version


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Returns a JSON response with optional extra headers."""
    response = current_app.response_class(json.dumps(body, ensure_ascii=False), status=status,
                                          mimetype="application/json")
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response

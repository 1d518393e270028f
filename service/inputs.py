"""The declared inputs of the API's endpoints: a body or a query, named once, validated and documented from it.

In the manner of APIFlask's ``@app.input``: ``@accepts(SPEC)`` on a view reads and validates the request's
JSON body (a ``Body``) or its query parameters (a ``Query``) before the view runs, hands the view the
result (``body=`` or ``query=``), and records the declaration where service/openapi.py reads it, so the
OpenAPI document describes exactly what is checked. Every refusal is problem+json: 400 or 415 when the
body is not JSON (schemas/json_reader.py says what is read), 422 with one ``{pointer, message}`` per
problem (or ``{parameter, message}`` for the query) when it breaks its schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, TypeVar

from flask import current_app, request
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from werkzeug.exceptions import RequestEntityTooLarge

from rules.errors import Problem
from schemas.json_reader import JsonTooLarge, NotJson, UnacceptableJson, pointer_of, read_json
from schemas.text import hidden_text_problems
from service.errors import InvalidRequest, MalformedRequest, ParameterProblem, UnsupportedMediaType

F = TypeVar("F", bound=Callable[..., Any])


def is_json_media_type(mimetype: str) -> bool:
    """Returns True for application/json and any application/*+json type."""
    return mimetype == "application/json" or (mimetype.startswith("application/") and mimetype.endswith("+json"))


def json_body(precheck: Callable[[Any], None] | None = None) -> Any:
    """Returns the parsed JSON body: 415 when it is not declared as JSON, 400 or 422 when it is not read.

    ``precheck`` refuses the body from a plain parse before it is read with care (schemas.json_reader).

    Werkzeug raises 413 first when the body exceeds MAX_CONTENT_LENGTH. The body is read by
    schemas.json_reader, as the command line reads a file: UTF-8 (a leading byte order mark is ignored),
    unique member names, no NaN or Infinity, at most MAX_JSON_DEPTH levels of arrays and objects (400
    otherwise), no U+0000 and no lone surrogate in any string or member name, and numbers JSON carries
    exactly (422 otherwise, by pointer).
    """
    raw = request.get_data(cache=True)
    if not is_json_media_type(request.mimetype):
        found = request.mimetype or "no Content-Type"
        raise UnsupportedMediaType(f"the body must be JSON sent as Content-Type: application/json; found {found}")
    try:
        return read_json(raw, "the body", max_bytes=current_app.config.get("MAX_CONTENT_LENGTH"), precheck=precheck)
    except NotJson as error:
        raise MalformedRequest(error.detail, error.problems) from None
    except UnacceptableJson as error:
        raise InvalidRequest(error.detail, error.problems) from None
    except JsonTooLarge:
        raise RequestEntityTooLarge() from None


def _pointer(error: ValidationError) -> str:
    path = list(error.absolute_path)
    if error.validator == "required":
        missing = [k for k in error.validator_value if isinstance(error.instance, dict) and k not in error.instance]
        path += missing[:1]
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        path += [k for k in error.instance if k not in known][:1]
    return pointer_of(tuple(path))


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


def validate_body(document: Any, schema: dict[str, Any], what: str) -> None:
    """Raises InvalidRequest with one {pointer, message} per way ``document`` breaks ``schema``."""
    errors = sorted(Draft202012Validator(schema).iter_errors(document), key=lambda e: list(e.absolute_path))
    # Every text of a request body can reach a record or its PDF: invisible and reordering characters are refused.
    problems = [Problem(_pointer(e), _message(e)) for e in errors] + hidden_text_problems(document)
    if problems:
        noun = "problem" if len(problems) == 1 else "problems"
        raise InvalidRequest(f"the {what} has {len(problems)} {noun}", problems)


def refuse(what: str, problems: list[Problem]) -> None:
    """Raises InvalidRequest "the <what> is not acceptable" with ``problems``, when there are any."""
    if problems:
        raise InvalidRequest(f"the {what} is not acceptable", problems)


@dataclass(frozen=True)
class Body:
    """A JSON request body: the OpenAPI component it is documented as, and how it is validated.

    ``schema`` (an API schema, service/api_schemas/components.py) is checked by ``validate_body``, then ``check``
    (what a JSON Schema cannot say: patterns as Python matches them, dates, limits from the configuration)
    raises InvalidRequest for what remains. A body of a contract schema (``SubmissionDocument``) has no
    ``schema`` here and is checked by ``validator`` (rules.evaluate.validate_submission), after ``precheck``
    (its count limits, on a plain parse, before the body is read with care). ``documented`` is the component
    when it refers to other components where ``schema`` only checks the shape.
    """

    component: str
    what: str
    schema: dict[str, Any] | None = None
    check: Callable[[Any], None] | None = None
    validator: Callable[[Any], None] | None = None
    documented: dict[str, Any] | None = None
    precheck: Callable[[Any], None] | None = None

    def read(self) -> Any:
        """Returns the request's body after checking it (see the class docstring)."""
        document = json_body(self.precheck)
        if self.validator is not None:
            self.validator(document)
        if self.schema is not None:
            validate_body(document, self.schema, self.what)
        if self.check is not None:
            self.check(document)
        return document

    def components(self) -> dict[str, dict[str, Any]]:
        """Returns the OpenAPI components this body adds (none for a contract schema, which is one already)."""
        if self.schema is None:
            return {}
        return {self.component: self.documented or self.schema}


# A query integer: ASCII digits only (str.isdigit() also takes "²", which int() refuses, and other scripts'
# digits), and few enough of them that no conversion of thousands of digits is attempted.
_INTEGER = re.compile(r"-?[0-9]{1,18}")
_SHOWN = 40


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= _SHOWN else raw[:_SHOWN] + "…")


@dataclass(frozen=True)
class Query:
    """The query parameters of an endpoint: a JSON Schema object whose properties are the parameters, in order.

    Each property has its ``description`` and a schema of one value: ``type`` integer (read from ASCII digits)
    or string, ``enum``, ``minimum``/``maximum``, ``maxLength``, ``default``. ``configured`` takes keywords
    of a property from the app's configuration (``{"per_page": {"maximum": "MAX_PAGE_SIZE"}}``), for the
    validation and the OpenAPI document alike. No parameter may hold U+0000. Undeclared parameters are
    ignored.
    """

    schema: dict[str, Any]
    configured: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def parameters(self, config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """Returns each parameter's schema (description included) with the configured keywords filled in."""
        return {name: {**schema, **{keyword: config[key] for keyword, key in self.configured.get(name, {}).items()}}
                for name, schema in self.schema["properties"].items()}

    def read(self) -> dict[str, Any]:
        """Returns every declared parameter's value (its default, else None, when absent); 422 listing the bad ones."""
        values: dict[str, Any] = {}
        problems: list[Problem] = []
        for name, schema in self.parameters(current_app.config).items():
            raw = request.args.get(name)
            if raw is None:
                values[name] = schema.get("default")
                continue
            message = _parameter_problem(raw, schema)
            if message is not None:
                problems.append(ParameterProblem("", message, name))
            values[name] = int(raw) if message is None and schema.get("type") == "integer" else raw
        if problems:
            raise InvalidRequest("the query has invalid parameters", problems)
        return values


def _parameter_problem(raw: str, schema: dict[str, Any]) -> str | None:
    """Returns what is wrong with the query value ``raw`` under ``schema``, or None when it is valid."""
    value: Any = raw
    integer = schema.get("type") == "integer"
    if integer:
        low, high = schema.get("minimum"), schema.get("maximum")
        bounds = f" from {low:,} to {high:,}" if low is not None and high is not None else \
            f" of at least {low:,}" if low is not None else ""
        wrong_integer = f"must be an integer{bounds}, found {_shown(raw)}"
        if not _INTEGER.fullmatch(raw):
            return wrong_integer
        value = int(raw)
    error = next(iter(Draft202012Validator(schema).iter_errors(value)), None)
    if error is None:
        return "must not contain U+0000 (NUL)" if "\x00" in raw else None
    if integer and error.validator in ("minimum", "maximum"):
        return wrong_integer
    if error.validator == "enum":
        return f"{_shown(raw)} is not one of {', '.join(map(str, error.validator_value))}"
    if error.validator == "maxLength":
        return f"must be at most {error.validator_value:,} characters"
    return error.message if len(error.message) <= 200 else error.message[:200] + "…"


def accepts(spec: Body | Query) -> Callable[[F], F]:
    """Returns a view decorator that reads and validates ``spec`` before the view, which receives it as ``body``
    (a Body) or ``query`` (a Query), and records ``spec`` for the OpenAPI document (service/openapi.py)."""
    argument = "body" if isinstance(spec, Body) else "query"

    def decorate(view: F) -> F:
        @wraps(view)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            kwargs[argument] = spec.read()
            return view(*args, **kwargs)

        meta = dict(getattr(view, "openapi", {}))
        meta[argument] = spec
        wrapped.openapi = meta  # type: ignore[attr-defined]
        return wrapped  # type: ignore[return-value]

    return decorate

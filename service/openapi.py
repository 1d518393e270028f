"""The OpenAPI 3.1 document, built from the app itself: its URL map, each view's docstring and metadata.

Views declare what the URL map cannot know: their body or query with ``@accepts`` (service/inputs.py),
the one declaration that also validates it; responses and headers with ``@operation``; who may call them
with ``service.accounts.auth.require``. The contract schemas in schemas/ become components as they are, and so do
the schemas the declared bodies are validated with, so the document and the validators share one source.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from importlib import resources
from typing import Any, TypeVar

import jinja2
from flask import Flask

import schemas
from rules.evaluate import engine_version
from service.accounts.auth import PERMISSIONS
from service.api_schemas.components import COMPONENTS
from service.inputs import Body, Query

F = TypeVar("F", bound=Callable[..., Any])

IGNORED_METHODS = {"HEAD", "OPTIONS"}
_RULE_ARGUMENT = re.compile(r"<(?:(?P<converter>[a-zA-Z_][a-zA-Z0-9_]*)(?:\([^)]*\))?:)?(?P<name>[a-zA-Z_]\w*)>")
_CONVERTER_TYPES = {"int": {"type": "integer"}, "float": {"type": "number"}, "uuid": {"type": "string",
                                                                                      "format": "uuid"}}
_STATUS_TEXT = {
    200: "OK", 201: "Created", 202: "Accepted", 304: "Not modified", 400: "The body is not valid JSON",
    401: "No valid API token: missing, unknown, revoked, expired, or of a disabled user (see WWW-Authenticate)",
    403: "The token's role may not do this",
    404: "Not found", 409: "The workflow state does not allow this", 412: "If-Match is not the current ETag",
    413: "The body is larger than the configured limit", 415: "The body is not declared as JSON",
    422: "The body or a parameter breaks the contract", 428: "If-Match is required",
    429: "The token's user has MAX_ACTIVE_TASKS_PER_USER background tasks queued or running: ask again after "
         "Retry-After seconds",
    503: "Not ready",
}


def operation(*, tag: str, responses: dict[int, tuple[str | None, ...]] | None = None,
              errors: tuple[int, ...] = (), parameters: tuple[dict[str, Any], ...] = (),
              if_match: bool = False, idempotency_key: bool = False,
              response_headers: dict[int, tuple[str, ...]] | None = None,
              media_type: str = "application/json",
              request_content: dict[str, str] | None = None,
              alternatives: dict[int, dict[str, str]] | None = None) -> Callable[[F], F]:
    """Returns a decorator that records a view's OpenAPI metadata on it.

    The schema half of each ``responses`` entry names a component (see service.api_schemas.components.COMPONENTS, or
    ``<Name>Document`` for a contract schema); an entry's optional third item is its media type when it
    differs from ``media_type``. A JSON body is declared with ``@accepts`` (service/inputs.py), not here;
    ``request_content`` maps media types to components for a body that is not (only) JSON, which the view
    reads as bytes, so it gets no 400 or 415 from JSON parsing. ``alternatives`` adds, per status, further
    media types of the same response (``{200: {"text/csv": "Csv"}}``: the view negotiates them).
    """

    def decorate(view: F) -> F:
        meta = dict(getattr(view, "openapi", {}))
        meta.update(tag=tag, responses=responses or {200: ("OK", None)}, errors=errors,
                    parameters=parameters, if_match=if_match, idempotency_key=idempotency_key,
                    response_headers=response_headers or {}, media_type=media_type,
                    request_content=request_content or {}, alternatives=alternatives or {})
        view.openapi = meta  # type: ignore[attr-defined]
        return view

    return decorate


def contract_component(name: str) -> str:
    """Returns the component name of a contract schema (``submission`` → ``SubmissionDocument``)."""
    return name.capitalize() + "Document"


def _embed(node: Any, component: str) -> Any:
    # Inside the OpenAPI document "#" is the document root, so the schema's own "#/$defs/…" references
    # are re-rooted at its component; its $id would re-base them again and is dropped.
    if isinstance(node, dict):
        embedded = {}
        for key, value in node.items():
            if key == "$id":
                continue
            if key == "$ref" and isinstance(value, str) and value.startswith("#/"):
                embedded[key] = f"#/components/schemas/{component}{value[1:]}"
            else:
                embedded[key] = _embed(value, component)
        return embedded
    if isinstance(node, list):
        return [_embed(item, component) for item in node]
    return node


def _ref(component: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{component}"}


def openapi_path(rule: str) -> tuple[str, list[dict[str, Any]]]:
    """Returns a Werkzeug rule as an OpenAPI path template, with its path parameters."""
    parameters = []
    for match in _RULE_ARGUMENT.finditer(rule):
        schema = _CONVERTER_TYPES.get(match["converter"] or "", {"type": "string"})
        parameters.append({"name": match["name"], "in": "path", "required": True, "schema": dict(schema)})
    return _RULE_ARGUMENT.sub(lambda m: "{" + m["name"] + "}", rule), parameters


def _docstring(view: Callable[..., Any]) -> tuple[str, str]:
    doc = inspect.getdoc(view) or ""
    summary, _, description = doc.partition("\n")
    return summary.strip(), description.strip()


def _problem_response(status: int) -> dict[str, Any]:
    response: dict[str, Any] = {"description": _STATUS_TEXT.get(status, "Error"),
                                "content": {"application/problem+json": {"schema": _ref("Problem")}}}
    if status in (429, 503):
        response["headers"] = {"Retry-After": {"schema": {"type": "string", "pattern": "^[0-9]+$"},
                                               "description": "seconds to wait before asking again"}}
    return response


def _query_parameters(query: Query, config: Any) -> list[dict[str, Any]]:
    """Returns the OpenAPI parameters of a declared query, with the bounds the app's configuration sets."""
    required = set(query.schema.get("required", ()))
    parameters = []
    for name, schema in query.parameters(config).items():
        value = {k: v for k, v in schema.items() if k != "description"}
        parameters.append({"name": name, "in": "query", "required": name in required,
                           "description": schema.get("description", ""), "schema": value})
    return parameters


def _operation(endpoint: str, view: Callable[..., Any], path_parameters: list[dict[str, Any]],
               config: Any) -> dict[str, Any]:
    meta = getattr(view, "openapi", {})
    summary, description = _docstring(view)
    security = meta.get("security", "read")
    op: dict[str, Any] = {"operationId": endpoint, "summary": summary or endpoint,
                          "tags": [meta.get("tag", "meta")], "parameters": [*path_parameters]}
    error_statuses = set(meta.get("errors", ()))
    if security is None:
        op["security"] = []
    else:
        roles = sorted(PERMISSIONS[security])
        description = (description + "\n\n" if description else "") + f"Roles: {', '.join(roles)}."
        error_statuses.add(401)
        if set(roles) != set(PERMISSIONS["read"]):
            error_statuses.add(403)
        op["x-roles"] = roles
    if description:
        op["description"] = description
    op["parameters"] += list(meta.get("parameters", ()))
    if isinstance(meta.get("query"), Query):
        op["parameters"] += _query_parameters(meta["query"], config)
        error_statuses.add(422)
    if meta.get("if_match"):
        op["parameters"].append({"name": "If-Match", "in": "header", "required": True, "schema": {"type": "string"},
                                 "description": "the submission's current ETag; 428 without it, 412 when stale"})
        error_statuses |= {412, 428}
    if meta.get("idempotency_key"):
        op["parameters"].append({"name": "Idempotency-Key", "in": "header", "required": False,
                                 "schema": {"type": "string", "maxLength": 255},
                                 "description": "a retry with the same key and body returns the first response "
                                                "(200); the same key with another body gets 422"})
    if isinstance(meta.get("body"), Body):
        component = meta["body"].component
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(component)}}}
        error_statuses |= {400, 413, 415, 422}
    elif meta.get("request_content"):
        op["requestBody"] = {"required": True, "content": {media: {"schema": _ref(component)}
                                                           for media, component in meta["request_content"].items()}}
        error_statuses |= {413, 422}
    responses: dict[str, Any] = {}
    for status, (text, component, *media) in sorted(meta.get("responses", {200: ("OK", None)}).items()):
        response: dict[str, Any] = {"description": text}
        if component:
            media_type = media[0] if media else meta.get("media_type", "application/json")
            response["content"] = {media_type: {"schema": _ref(component)}}
        for media, alternative in meta.get("alternatives", {}).get(status, {}).items():
            response.setdefault("content", {})[media] = {"schema": _ref(alternative)}
        headers = meta.get("response_headers", {}).get(status, ())
        if headers:
            response["headers"] = {name: {"schema": {"type": "string"}, **_header_description(name)}
                                   for name in headers}
        responses[str(status)] = response
    for status in sorted(error_statuses):
        responses[str(status)] = _problem_response(status)
    op["responses"] = responses
    return op


# Response headers whose meaning is the API's own; standard ones (ETag, Location) need no words.
HEADER_DESCRIPTIONS = {
    "Record-Status": "`signed`: an approved record, issued signed; `draft`: not approved (an evaluation record, "
                     "or the record of a rejected quote), unsigned",
    "Link": "RFC 5829 version links of a final record: `latest-version`, `predecessor-version`, "
            "`successor-version` (each purchase order linked issues a new version); of a list as CSV, its "
            "`next` and `prev` pages (RFC 8288)",
    "Content-Disposition": "a file name for the download",
    "Preference-Applied": "`respond-async` when the request's `Prefer: respond-async` was honoured (RFC 7240)",
}


def _header_description(name: str) -> dict[str, str]:
    text = HEADER_DESCRIPTIONS.get(name)
    return {"description": text} if text else {}


# The blueprints of pages for people (service/ui), not of the API: the document leaves their routes out.
PAGE_BLUEPRINTS = frozenset({"ui"})


def api_rules(app: Flask) -> list[Any]:
    """Returns the URL rules of the API (every route ``app`` serves but the pages'), sorted by path."""
    return sorted((rule for rule in app.url_map.iter_rules() if rule.endpoint.partition(".")[0] not in PAGE_BLUEPRINTS),
                  key=lambda r: r.rule)


def build_document(app: Flask) -> dict[str, Any]:
    """Returns the OpenAPI 3.1 document describing every route of the API that ``app`` serves."""
    paths: dict[str, dict[str, Any]] = {}
    components = {contract_component(name): _embed(schemas.load_schema(name), contract_component(name))
                  for name in schemas.SCHEMA_NAMES}
    components.update(COMPONENTS)
    for rule in api_rules(app):
        view = app.view_functions[rule.endpoint]
        path, path_parameters = openapi_path(rule.rule)
        for method in sorted((rule.methods or set()) - IGNORED_METHODS):
            paths.setdefault(path, {})[method.lower()] = _operation(rule.endpoint, view, path_parameters, app.config)
        body = getattr(view, "openapi", {}).get("body")
        for name, schema in (body.components() if isinstance(body, Body) else {}).items():
            if components.setdefault(name, schema) is not schema and components[name] != schema:
                raise ValueError(f"two declarations describe the component {name!r} differently")
    tags = sorted({op["tags"][0] for ops in paths.values() for op in ops.values()})
    return {
        "openapi": "3.1.0",
        "info": {"title": "quotecheck API", "version": engine_version(),
                 "description": "Checks an AI-server quote against its workload, runs the approval workflow, "
                                "and issues the commissioning record. Errors are application/problem+json "
                                "(RFC 9457)."},
        "tags": [{"name": tag} for tag in tags],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "an API token from `quotecheck token create`: it belongs to "
                                                          "one user, has a role and an expiry (401 after it), and "
                                                          "with scope `own` sees only its user's submissions "
                                                          "(anything else is 404)"}},
        },
        "security": [{"bearer": []}],
    }


def render_docs(document: dict[str, Any]) -> str:
    """Returns a self-contained HTML page (no scripts, no external assets) describing ``document``."""
    source = resources.files("service").joinpath("docs.html").read_text(encoding="utf-8")
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    environment.filters["tojson_pretty"] = _pretty_json
    operations = [{"path": path, "method": method.upper(), **op}
                  for path, ops in document["paths"].items() for method, op in ops.items()]
    by_tag = {tag["name"]: [op for op in operations if op["tags"][0] == tag["name"]] for tag in document["tags"]}
    return environment.from_string(source).render(doc=document, by_tag=by_tag)


def _pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)

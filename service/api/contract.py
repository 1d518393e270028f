"""The public JSON Schemas (schemas/), served as they are bundled."""

from __future__ import annotations

from flask import Blueprint, Response, url_for

import schemas
from service.accounts.auth import public
from service.errors import NotFound
from service.http import json_response
from service.openapi import operation

bp = Blueprint("schemas", __name__, url_prefix="/api/v1/schemas")


@bp.get("")
@operation(tag="schemas", responses={200: ("The schemas this API serves", "SchemaIndex")})
@public
def list_schemas() -> Response:
    """List the public JSON Schemas."""
    index = [{"name": name, "title": schemas.load_schema(name).get("title", name),
              "href": url_for("schemas.get_schema", name=name)} for name in schemas.SCHEMA_NAMES]
    return json_response({"schemas": index})


@bp.get("/<name>")
@operation(tag="schemas", errors=(404,), media_type="application/schema+json",
           responses={200: ("The JSON Schema (draft 2020-12)", None)})
@public
def get_schema(name: str) -> Response:
    """Read one public JSON Schema: submission, policy, record, catalogue or addendum."""
    try:
        schema = schemas.load_schema(name)
    except KeyError:
        raise NotFound(f"there is no schema {name!r}; schemas: {', '.join(schemas.SCHEMA_NAMES)}") from None
    response = json_response(schema)
    response.mimetype = "application/schema+json"
    return response

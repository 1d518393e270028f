"""The OpenAPI document is built from the app, validates, and lists every route; the docs page needs no network."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from openapi_spec_validator import validate

import schemas
from service.approval.workflow import TRANSITIONS, State
from service.openapi import IGNORED_METHODS, api_rules, openapi_path


@pytest.fixture
def document(client) -> dict:
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    return response.get_json()


def test_the_document_is_valid_openapi_3_1(document):
    assert document["openapi"].startswith("3.1")
    validate(document)


def test_the_document_lists_every_route_the_app_serves(app, document):
    served = {(openapi_path(rule.rule)[0], method.lower())
              for rule in api_rules(app) for method in rule.methods - IGNORED_METHODS}
    described = {(path, method) for path, operations in document["paths"].items() for method in operations}
    assert served == described


def test_operations_carry_docstrings_roles_and_problem_responses(document):
    approve = document["paths"]["/api/v1/submissions/{submission_id}/decisions"]["post"]
    assert approve["summary"].startswith("Approve, reject")
    assert approve["x-roles"] == ["admin", "approver", "reviewer"]
    assert {"401", "403", "409", "412", "428"} <= set(approve["responses"])
    assert approve["responses"]["412"]["content"]["application/problem+json"]["schema"] == {
        "$ref": "#/components/schemas/Problem"}
    assert any(p["name"] == "If-Match" and p["required"] for p in approve["parameters"])
    assert document["paths"]["/healthz"]["get"]["security"] == []


def test_the_contract_schemas_are_components(document):
    create = document["paths"]["/api/v1/submissions"]["post"]
    assert create["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SubmissionDocument"}
    component = document["components"]["schemas"]["SubmissionDocument"]
    assert component["properties"].keys() == schemas.load_schema("submission")["properties"].keys()


def test_the_docs_page_is_self_contained(client, document):
    response = client.get("/api/v1/docs")
    assert response.status_code == 200 and response.mimetype == "text/html"
    page = response.get_data(as_text=True)
    assert not re.search(r"<script|<link|src=|@import|url\(", page, re.IGNORECASE)
    assert not re.search(r'href="https?:', page)
    for path in document["paths"]:
        assert path in page


def test_schemas_are_served(client):
    index = client.get("/api/v1/schemas").get_json()
    assert [s["name"] for s in index["schemas"]] == list(schemas.SCHEMA_NAMES)
    for name in schemas.SCHEMA_NAMES:
        response = client.get(f"/api/v1/schemas/{name}")
        assert response.status_code == 200 and response.mimetype == "application/schema+json"
        assert response.get_json() == schemas.load_schema(name)
    assert client.get("/api/v1/schemas/nope").status_code == 404


def test_workflow_doc_names_every_state_and_event():
    text = (Path(__file__).parents[2] / "docs" / "workflow.md").read_text(encoding="utf-8")
    for state in State:
        assert f"`{state.value}`" in text, state
    for event in TRANSITIONS:
        assert f"`{event.value}`" in text, event


# --- one declaration per endpoint input (service/inputs.py) ---------------------------------------------------

API_SOURCES = sorted((Path(__file__).parents[2] / "service" / "api").glob("*.py"))
# What reads a request's JSON body or query by hand; only the declarations (service/inputs.py) may.
REQUEST_READERS = {"args", "get_json", "json", "form", "values"}
BODY_READERS = {"json_body", "validate_body"}


def test_views_read_bodies_and_queries_only_through_their_declaration():
    found = []
    for path in API_SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr in REQUEST_READERS
                    and isinstance(node.value, ast.Name) and node.value.id == "request") \
                    or (isinstance(node, ast.Name) and node.id in BODY_READERS):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []


def test_each_declared_body_and_query_is_what_the_document_describes(app, document):
    components = document["components"]["schemas"]
    declared = 0
    for rule in api_rules(app):
        meta = getattr(app.view_functions[rule.endpoint], "openapi", {})
        for method in rule.methods - IGNORED_METHODS:
            op = document["paths"][openapi_path(rule.rule)[0]][method.lower()]
            body, query = meta.get("body"), meta.get("query")
            if body is not None:
                declared += 1
                assert op["requestBody"]["content"]["application/json"]["schema"] == {
                    "$ref": f"#/components/schemas/{body.component}"}
                assert body.component in components and "422" in op["responses"]
                if body.schema is not None:
                    assert components[body.component] == (body.documented or body.schema)
            elif "requestBody" in op:  # a body read as bytes, whatever it holds (POST /records/verify)
                assert set(op["requestBody"]["content"]) == set(meta["request_content"]), rule.endpoint
            documented = {p["name"]: p["schema"] for p in op["parameters"] if p["in"] == "query"}
            if query is not None:
                declared += 1
                expected = {name: {k: v for k, v in schema.items() if k != "description"}
                            for name, schema in query.parameters(app.config).items()}
                assert documented == expected
            else:
                assert documented == {}, rule.endpoint
    assert declared >= 7  # submissions (2), list, waiver, decision, comparison, purchase order


def test_query_bounds_from_the_configuration_are_documented_and_enforced(make_app, as_role):
    app = make_app(MAX_PAGE_SIZE=50, DEFAULT_PAGE_SIZE=5)
    document = app.test_client().get("/api/v1/openapi.json").get_json()
    listing = document["paths"]["/api/v1/submissions"]["get"]
    per_page = next(p for p in listing["parameters"] if p["name"] == "per_page")
    assert per_page["schema"] == {"type": "integer", "minimum": 1, "maximum": 50, "default": 5}

    from api_support import Caller, new_token
    caller = Caller(app, "rita", "reviewer", new_token(app, "reviewer", "rita")[1])
    assert caller.get("/api/v1/submissions").get_json()["per_page"] == 5
    assert caller.get("/api/v1/submissions?per_page=50").status_code == 200
    refused = caller.get("/api/v1/submissions?per_page=51&state=nope").get_json()
    assert refused["status"] == 422 and refused["errors"] == [
        {"pointer": "", "parameter": "state", "message": f"'nope' is not one of {', '.join(State)}"},
        {"pointer": "", "parameter": "per_page", "message": "must be an integer from 1 to 50, found '51'"}]

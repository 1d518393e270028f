"""The OpenAPI document is built from the app, validates, and lists every route; the docs page needs no network."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from openapi_spec_validator import validate

import schemas
from service.openapi import IGNORED_METHODS, openapi_path
from service.workflow import TRANSITIONS, State


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
              for rule in app.url_map.iter_rules() for method in rule.methods - IGNORED_METHODS}
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

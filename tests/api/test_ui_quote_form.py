"""The quote form and the examples of the "Submit a quote" page through Flask's test client: a quote sent from the form
is stored and evaluated as the same document sent to the API, a bad field is refused beside the field with every
entry kept, "Show the JSON" and an example fill the JSON editor, and the form needs the session's CSRF token."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from api_support import url
from ui_support import sign_in

NEW = "/ui/submissions/new"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# 8 x HGX-H200 training Llama-3-8B, as typed into the form, and the document a person would write for it.
TYPED = {
    "entry": "form", "vendor": "Harbor Systems", "quote_id": "HS-118", "currency": "USD",
    "server_model": "HGX-H200-8GPU", "node_count": "8", "unit_price": "310000", "rack_count": "4",
    "nodes_per_rack": "2", "rack_power_kw": "40",
    "pdu_count": "2", "pdu_rating_kw": "34.6", "storage_kind": "parallel-fs", "storage_capacity_tb": "2000",
    "storage_read_gbs": "40", "storage_write_gbs": "20", "model_name": "Llama-3-8B", "objective": "pretraining",
    "precision": "bf16-mixed", "optimizer": "adamw", "sharding": "zero1", "flash_attention": "yes",
    "sequence_length": "8192", "micro_batch": "1", "global_batch": "512", "dataset_tokens": "1e12",
    "completion_window_days": "30", "checkpoint_interval_min": "120", "checkpoint_max_save_s": "120",
}
BY_HAND = {
    "schema_version": "1",
    "quote": {"vendor": "Harbor Systems", "quote_id": "HS-118", "currency": "USD",
              "node_groups": [{"name": "gpu", "server_model": "HGX-H200-8GPU", "count": 8, "unit_price": 310000}],
              "racks": [{"name": "rack", "count": 4, "node_groups": {"gpu": 2}, "power_budget_kw": 40,
                         "pdus": [{"count": 2, "rating_kw": 34.6}]}],
              "storage": {"kind": "parallel-fs", "capacity_tb": 2000, "read_gbs": 40, "write_gbs": 20}},
    "workload": {"training": {"model": {"name": "Llama-3-8B"}, "objective": "pretraining", "precision": "bf16-mixed",
                              "optimizer": "adamw", "parallelism": {"sharding": "zero1"}, "flash_attention": True,
                              "sequence_length": 8192, "micro_batch": 1, "global_batch": 512,
                              "dataset_tokens": 1000000000000, "completion_window_days": 30,
                              "checkpoint": {"interval_min": 120, "max_save_s": 120}}},
}
SUBMISSION_PAGE = re.compile(r"^/ui/submissions/([0-9a-f-]{36})\?done=submitted$")


def textarea(page: str) -> str:
    """Returns what the JSON editor of the page holds."""
    match = re.search(r'<textarea id="document"[^>]*>(.*?)</textarea>', page, re.DOTALL)
    assert match, "the page has no JSON editor"
    return html.unescape(match.group(1))


def field_tag(page: str, name: str) -> str:
    """Returns the input or select element of the form field ``name`` (a select with its options)."""
    match = (re.search(rf'<select id="{name}"[^>]*>.*?</select>', page, re.DOTALL)
             or re.search(rf'<input id="{name}"[^>]*>', page))
    assert match, f"the page has no field {name}"
    return match.group(0)


def test_a_quote_from_the_form_is_stored_and_evaluated_as_the_same_document_sent_to_the_api(app, as_role):
    # Given a submitter on the page, whose form offers the catalogue's servers and models
    submitter = as_role("submitter")
    vendor = sign_in(app, submitter)
    page = vendor.text(NEW)
    assert '<option value="HGX-H200-8GPU">' in page and '<option value="Llama-3-8B">' in page

    # When they send the form, and the same quote written by hand goes to the API
    response = vendor.post(NEW, {**TYPED, "action": "evaluate"})
    by_api = submitter.post("/api/v1/submissions", json=BY_HAND)

    # Then the form leads to the new quote's page, and the stored quote is the API's, document and checks alike
    assert response.status_code == 303, response.get_data(as_text=True)[:3000]
    found = SUBMISSION_PAGE.match(response.headers["Location"])
    assert found, response.headers["Location"]
    assert "The quote was submitted and evaluated." in vendor.text(response.headers["Location"])
    stored = submitter.get(url(found.group(1))).get_json()
    assert by_api.status_code == 201
    from_api = by_api.get_json()
    assert stored["evaluation"]["submission_digest"] == from_api["evaluation"]["submission_digest"]
    assert ([(c["id"], c["status"], c["evidence"]) for c in stored["evaluation"]["checks"]]
            == [(c["id"], c["status"], c["evidence"]) for c in from_api["evaluation"]["checks"]])
    assert json.loads(vendor.text(f"/ui/submissions/{found.group(1)}/revisions/1.json")) == BY_HAND


def test_a_bad_field_is_refused_beside_the_field_with_every_entry_kept(app, as_role):
    submitter = as_role("submitter")
    vendor = sign_in(app, submitter)

    negative = vendor.post(NEW, {**TYPED, "node_count": "-1", "action": "evaluate"})
    unknown = vendor.post(NEW, {**TYPED, "server_model": "FOO-9000", "action": "evaluate"})

    page = negative.get_data(as_text=True)
    assert negative.status_code == 422
    node_count = field_tag(page, "node_count")
    assert 'value="-1"' in node_count and 'aria-invalid="true"' in node_count
    assert re.search(r'id="node_count-error">.*must be ≥ 1, found -1', page)
    assert '<a href="#node_count">Number of servers (nodes)</a>' in page
    for name in ("vendor", "quote_id", "pdu_rating_kw", "dataset_tokens"):
        assert f'value="{html.escape(TYPED[name])}"' in field_tag(page, name), name
    assert '<option value="Llama-3-8B" selected>' in field_tag(page, "model_name")
    page = unknown.get_data(as_text=True)
    assert unknown.status_code == 422
    server_model = field_tag(page, "server_model")
    assert '<option value="FOO-9000" selected>' in server_model and 'aria-invalid="true"' in server_model
    assert re.search(r"id=\"server_model-error\">.*server &#39;FOO-9000&#39; is not in the catalogue", page)
    assert 'value="8"' in field_tag(page, "node_count") and 'aria-invalid' not in field_tag(page, "node_count")
    assert submitter.get("/api/v1/submissions").get_json()["items"] == []


def test_a_form_without_a_server_model_is_refused_naming_it(app, as_role):
    vendor = sign_in(app, as_role("submitter"))

    response = vendor.post(NEW, {**TYPED, "server_model": "", "action": "evaluate"})

    assert response.status_code == 422
    assert re.search(r'id="server_model-error">.*choose a server model', response.get_data(as_text=True))


def test_show_the_json_puts_the_forms_document_into_the_editor_and_stores_nothing(app, as_role):
    submitter = as_role("submitter")
    vendor = sign_in(app, submitter)

    response = vendor.post(NEW, {**TYPED, "action": "show-json"})

    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert json.loads(textarea(page)) == BY_HAND
    assert 'value="Harbor Systems"' in field_tag(page, "vendor")
    assert submitter.get("/api/v1/submissions").get_json()["items"] == []
    # a form with problems shows them too, beside the JSON it makes
    shown = vendor.post(NEW, {**TYPED, "node_count": "two", "action": "show-json"}).get_data(as_text=True)
    assert json.loads(textarea(shown))["quote"]["node_groups"][0]["count"] == "two"
    assert "expected an integer, found text &#39;two&#39;" in shown


def test_an_example_opens_in_the_json_editor(app, as_role):
    vendor = sign_in(app, as_role("submitter"))

    page = vendor.text(f"{NEW}?example=hgx-h200-8b-first-quote")
    unknown = vendor.get(f"{NEW}?example=../pyproject")

    assert textarea(page) == (EXAMPLES / "hgx-h200-8b-first-quote.json").read_text(encoding="utf-8")
    assert '<option value="hgx-h200-8b-first-quote" selected>' in field_tag(page, "example")
    assert {f"{path.stem}" for path in EXAMPLES.glob("*.json")} <= set(re.findall(r'<option value="([^"]+)"',
                                                                                  field_tag(page, "example")))
    assert unknown.status_code == 404
    assert "no bundled example &#39;../pyproject&#39;" in unknown.get_data(as_text=True)


def test_the_form_needs_the_sessions_csrf_token(app, as_role):
    submitter = as_role("submitter")
    vendor = sign_in(app, submitter)

    forged = vendor.post(NEW, {**TYPED, "action": "evaluate"}, csrf=False)
    wrong = vendor.post(NEW, {**TYPED, "action": "evaluate", "csrf_token": "not-the-token"})

    assert forged.status_code == 403 and wrong.status_code == 403
    assert "CSRF" in forged.get_data(as_text=True)
    assert submitter.get("/api/v1/submissions").get_json()["items"] == []

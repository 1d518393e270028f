"""The quote form of the "Submit a quote" page (service/ui/quote_form.py): what a filled-in form makes is the submission
document a person would write by hand, validated and evaluated as that document is, and each problem the schema
finds is shown beside the field it belongs to."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rules.catalogue import load_catalogue
from rules.errors import InvalidSubmission
from rules.evaluate import evaluate, validate_submission
from schemas.problem import Problem
from service.ui import quote_form

ROOT = Path(__file__).resolve().parents[1]
FIRST_QUOTE = ROOT / "examples" / "hgx-h200-8b-first-quote.json"
FORM = quote_form.sections(load_catalogue())

# examples/hgx-h200-8b-first-quote.json as typed into the form: 8 HGX-H200 servers training Llama-3-8B.
FIRST_QUOTE_FORM = {
    "vendor": "V", "quote_id": "Q-8B", "server_model": "HGX-H200-8GPU", "node_count": "8",
    "storage_kind": "parallel-fs", "storage_capacity_tb": "2000", "storage_read_gbs": "40", "storage_write_gbs": "20",
    "model_name": "Llama-3-8B", "objective": "pretraining", "precision": "bf16-mixed", "optimizer": "adamw",
    "sharding": "zero1", "tensor_parallel": "1", "pipeline_parallel": "1", "offload": "none",
    "activation_checkpointing": "none", "flash_attention": "yes", "sequence_length": "8192", "micro_batch": "1",
    "global_batch": "512", "dataset_tokens": "1e12", "gpus": "64", "completion_window_days": "30",
    "checkpoint_interval_min": "120", "checkpoint_max_save_s": "120", "checkpoint_gradients": "yes",
}
# Every field filled in with a valid value (a field whose pointer the schema does not know would be refused).
EVERY_FIELD = {
    **FIRST_QUOTE_FORM, "currency": "USD", "unit_price": "310,000",
    "rack_name": "R1-R4", "rack_count": "4", "nodes_per_rack": "2", "rack_power_kw": "40", "rack_cooling": "liquid",
    "rack_cooling_kw": "45", "rack_redundancy": "2N", "pdu_count": "2", "pdu_rating_kw": "34.6", "epochs": "1.5",
}


def document_of(typed: dict[str, str]) -> dict[str, Any]:
    return quote_form.submission_of(FORM, quote_form.values_of(FORM, typed))


def problems_of(document: dict[str, Any]) -> list[Problem]:
    with pytest.raises(InvalidSubmission) as refused:
        validate_submission(document, "the quote form")
    return refused.value.problems


def checks_of(record: dict[str, Any]) -> list[tuple[str, str, Any]]:
    return [(check["id"], check["status"], check["evidence"]) for check in record["checks"]]


def test_the_first_quote_typed_into_the_form_is_the_example_document_and_evaluates_as_it_does():
    # Given the example as a person writes it with the server's catalogue id (the form offers ids, not aliases)
    example = json.loads(FIRST_QUOTE.read_text(encoding="utf-8"))
    by_hand = copy.deepcopy(example)
    by_hand["quote"]["node_groups"][0]["server_model"] = "HGX-H200-8GPU"

    # When the same quote is typed into the form
    document = document_of(FIRST_QUOTE_FORM)

    # Then the form makes that very document, valid, and its record is the hand-written one's
    assert document == by_hand
    validate_submission(document, "the quote form")
    from_form, written = evaluate(document), evaluate(by_hand)
    assert {**from_form, "evaluated_at": None} == {**written, "evaluated_at": None}
    # and the checks come out as the example's (its alias HGX-H200 names the same catalogued server)
    assert checks_of(from_form) == checks_of(evaluate(example))
    assert {c["id"]: c["status"] for c in from_form["checks"]}["peak-memory"] == "pass"


def test_every_field_lands_where_the_schema_expects_it():
    document = document_of(EVERY_FIELD)

    validate_submission(document, "the quote form")
    rack = document["quote"]["racks"][0]
    assert rack == {"name": "R1-R4", "count": 4, "node_groups": {"gpu": 2}, "power_budget_kw": 40,
                    "cooling": "liquid", "cooling_capacity_kw": 45, "redundancy": "2N",
                    "pdus": [{"count": 2, "rating_kw": 34.6}]}
    assert document["quote"]["node_groups"][0]["unit_price"] == 310000
    assert document["quote"]["currency"] == "USD"
    assert document["workload"]["training"]["epochs"] == 1.5
    assert document["workload"]["training"]["checkpoint"]["include_gradients"] is True
    assert {field.name for field in quote_form.fields_of(FORM)} == set(EVERY_FIELD)


def test_blank_fields_are_left_out_and_racks_appear_only_when_filled_in():
    document = document_of({"vendor": "V", "server_model": "DGX-H100", "node_count": "2", "model_name": "Llama-2-7B",
                            "flash_attention": "no", "rack_power_kw": " "})

    assert document == {"schema_version": "1",
                        "quote": {"vendor": "V", "node_groups": [{"name": "gpu", "server_model": "DGX-H100",
                                                                  "count": 2}]},
                        "workload": {"training": {"model": {"name": "Llama-2-7B"}, "flash_attention": False}}}
    with_rack = document_of({"vendor": "V", "node_count": "2", "nodes_per_rack": "2"})
    assert with_rack["quote"]["racks"] == [{"name": "rack", "node_groups": {"gpu": 2}}]


@pytest.mark.parametrize(("typed", "number"), [
    ("8", 8), ("-1", -1), ("1,000", 1000), ("1 000 000", 1_000_000), ("1e12", 10**12), ("8.0", 8), ("34.6", 34.6),
    ("two", "two"), ("inf", "inf"), ("nan", "nan"), ("1e300", 1e300),
])
def test_numbers_are_read_as_json_numbers_and_other_text_is_passed_on(typed, number):
    read = quote_form.read_number(typed)
    assert read == number and type(read) is type(number)


@pytest.mark.parametrize(("typed", "field", "message"), [
    ({"node_count": "-1"}, "node_count", "must be ≥ 1, found -1"),
    ({"node_count": "two"}, "node_count", "expected an integer, found text 'two'"),
    ({"server_model": "FOO-9000"}, "server_model", "server 'FOO-9000' is not in the catalogue"),
    ({"currency": "usd"}, "currency", "does not match the pattern"),
    ({"vendor": ""}, "vendor", "required field 'vendor' is missing"),
    ({"dataset_tokens": "0"}, "dataset_tokens", "must be > 0, found 0"),
    ({"rack_count": "2"}, "nodes_per_rack", "required field 'node_groups' is missing"),
    ({"pdu_count": "2", "nodes_per_rack": "8"}, "pdu_rating_kw", "required field 'rating_kw' is missing"),
    ({"model_name": "Llama-9"}, "model_name", "did you mean Llama-3-8B"),
])
def test_a_problem_the_schema_finds_is_placed_beside_its_field(typed, field, message):
    document = document_of({**FIRST_QUOTE_FORM, **typed})

    placed = quote_form.placed(FORM, problems_of(document))

    assert list(placed) == [field] and message in placed[field][0]


def test_a_training_without_a_model_is_placed_at_the_model_and_a_problem_of_no_field_is_not_placed():
    document = document_of({key: value for key, value in FIRST_QUOTE_FORM.items() if key != "model_name"})

    assert quote_form.placed(FORM, problems_of(document)) == {"model_name": ["required field 'model' is missing"]}
    assert quote_form.field_at(FORM, "/workload") is quote_form.fields_of(FORM)[
        [f.name for f in quote_form.fields_of(FORM)].index("model_name")]
    assert quote_form.placed(FORM, [Problem("/quote/fabric/link_gbps", "x"), Problem("", "y")]) == {}


def test_the_form_asks_for_a_server_model_which_the_schema_alone_would_not():
    values = quote_form.values_of(FORM, {**FIRST_QUOTE_FORM, "server_model": ""})

    validate_submission(quote_form.submission_of(FORM, values), "the quote form")  # valid JSON, yet
    missing = quote_form.missing_server_model(values)

    assert quote_form.placed(FORM, missing) == {"server_model": [missing[0].message]}
    assert quote_form.missing_server_model(quote_form.values_of(FORM, FIRST_QUOTE_FORM)) == []


def test_the_choices_are_the_catalogues_servers_and_models():
    catalogue = load_catalogue()
    fields = {field.name: field for field in quote_form.fields_of(FORM)}

    servers = [value for value in fields["server_model"].offered if value]
    models = [value for value in fields["model_name"].offered if value]

    assert servers == catalogue.server_models() and "HGX-H200-8GPU" in servers
    assert sorted(models) == catalogue.model_names() and "Llama-3-8B" in models
    labels = dict(quote_form.server_choices(catalogue))
    assert labels["HGX-H200-8GPU"] == "HGX-H200-8GPU (HGX-H200): 8 × H200-SXM-141GB"

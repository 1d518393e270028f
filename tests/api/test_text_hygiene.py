"""Text hygiene over HTTP: invisible and reordering characters are refused by pointer, stored ones shown visibly.

A quote whose notes say ``EUR \\u202e000,052\\u202c`` displays as "EUR 250,000": such characters are refused
at intake (422 with the pointer of the field), a record stored before that rule shows them as ``<U+202E>``
in its PDF, and a lone surrogate anywhere in a body (member names included) is a 4xx problem, never a 500.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from api_support import url, waive_all

from service.persistence.db import get_db
from service.persistence.models import Record

PROBLEM = "application/problem+json"
JSON = {"Content-Type": "application/json"}
REVERSED_PRICE = "EUR \u202e000,052\u202c"


def problem(response: Any, *statuses: int) -> dict[str, Any]:
    assert response.status_code in statuses, response.get_data(as_text=True)[:500]
    assert response.mimetype == PROBLEM
    body = response.get_json()
    assert {"type", "title", "status", "detail", "instance"} <= set(body)
    return body


def pdftotext(pdf: bytes, tmp_path: Path) -> str:
    tool = shutil.which("pdftotext")
    if tool is None:
        pytest.skip("pdftotext is not installed (apt-get install -y poppler-utils)")
    source = tmp_path / "record.pdf"
    source.write_bytes(pdf)
    return subprocess.run([tool, str(source), "-"], capture_output=True, text=True, check=True, timeout=60).stdout


def _set(document: dict[str, Any], pointer: str, value: Any) -> None:
    *parents, last = pointer.strip("/").split("/")
    node: Any = document
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    node[last] = value


def _total(caller: Any) -> int:
    return caller.get("/api/v1/submissions").get_json()["total"]


# --- intake: the submission ---------------------------------------------------------------------------------

FIELDS = ["/quote/vendor", "/quote/notes", "/quote/quote_id", "/quote/node_groups/0/name",
          "/quote/line_items/0/description", "/workload/training/model/name"]
CHARACTERS = {"\u202e": "U+202E RIGHT-TO-LEFT OVERRIDE", "\u2066": "U+2066 LEFT-TO-RIGHT ISOLATE",
              "\u200f": "U+200F RIGHT-TO-LEFT MARK", "\u061c": "U+061C ARABIC LETTER MARK",
              "\u200b": "U+200B ZERO WIDTH SPACE", "\u200d": "U+200D ZERO WIDTH JOINER",
              "\ufeff": "U+FEFF ZERO WIDTH NO-BREAK SPACE", "\u00ad": "U+00AD SOFT HYPHEN",
              "\u2028": "U+2028 LINE SEPARATOR", "\x1b": "U+001B", "\u3164": "U+3164 HANGUL FILLER"}


@pytest.mark.parametrize("pointer", FIELDS)
def test_a_bidi_override_in_any_free_text_field_is_a_422_naming_the_field(as_role, submission_document, pointer):
    submitter = as_role("submitter")
    submission_document["quote"]["line_items"] = [{"sku": "X1", "description": "GPU server", "quantity": 2}]
    _set(submission_document, pointer, REVERSED_PRICE)

    response = submitter.post("/api/v1/submissions", json=submission_document)

    errors = problem(response, 422)["errors"]
    assert [e["pointer"] for e in errors] == [pointer]
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in errors[0]["message"] and "U+202C" in errors[0]["message"]
    assert _total(submitter) == 0  # nothing stored


@pytest.mark.parametrize("character", list(CHARACTERS), ids=[name for name in CHARACTERS.values()])
def test_every_invisible_or_reordering_character_is_named_in_the_problem(as_role, submission_document, character):
    submission_document["quote"]["vendor"] = f"Acme{character}GPU Systems"

    response = as_role("submitter").post("/api/v1/submissions", json=submission_document)

    errors = problem(response, 422)["errors"]
    assert errors[0]["pointer"] == "/quote/vendor" and CHARACTERS[character] in errors[0]["message"]


def test_ordinary_text_in_any_script_is_accepted(as_role, submission_document):
    # Right-to-left scripts display correctly without control characters; tabs, line breaks and emoji are text.
    submission_document["quote"]["vendor"] = "شركة الحوسبة — Ünïcode GmbH 🖥️"
    submission_document["quote"]["notes"] = "Line one\n\tLine two: עברית, 日本語, हिन्दी"

    response = as_role("submitter").post("/api/v1/submissions", json=submission_document)

    assert response.status_code == 201, response.get_json()
    assert response.get_json()["vendor"] == "شركة الحوسبة — Ünïcode GmbH 🖥️"


def test_a_revision_with_hidden_text_is_refused_and_changes_nothing(submitted, submission_document):
    submitter, view = submitted
    submission_document["quote"]["notes"] = REVERSED_PRICE

    response = submitter.post(url(view["id"], "revisions"), json=submission_document, if_match=view["etag"])

    assert problem(response, 422)["errors"][0]["pointer"] == "/quote/notes"
    after = submitter.get(url(view["id"])).get_json()
    assert after["version"] == view["version"] and after["revision"] == 1


# --- intake: waivers, decisions, comparisons, purchase orders ----------------------------------------------

def test_a_waiver_justification_with_hidden_text_is_a_422(as_role, submitted):
    submitter, view = submitted
    body = {"justification": "Accepted: the vendor confirmed \u2067in writing\u2069 on 2026-11-20."}

    response = as_role("reviewer").post(url(view["id"], "checks", "training-objective", "waivers"), json=body,
                                        if_match=view["etag"])

    errors = problem(response, 422)["errors"]
    assert errors[0]["pointer"] == "/justification" and "U+2067 RIGHT-TO-LEFT ISOLATE" in errors[0]["message"]
    assert submitter.get(url(view["id"])).get_json()["waivers"] == []


def test_a_decision_comment_with_hidden_text_is_a_422(as_role, submitted):
    _, view = submitted
    body = {"action": "reject", "comment": "Rejected: the price is \u202e000,052\u202c."}

    response = as_role("reviewer").post(url(view["id"], "decisions"), json=body, if_match=view["etag"])

    assert problem(response, 422)["errors"][0]["pointer"] == "/comment"
    assert as_role("reviewer").get(url(view["id"])).get_json()["state"] == "evaluated"


def test_a_comparison_with_hidden_text_in_a_patch_is_a_422(as_role, submission_document):
    body = {"submission": submission_document,
            "variants": [{"name": "as quoted", "patch": {}},
                         {"name": "renamed", "patch": {"quote": {"vendor": "Acme\u200b"}}}]}

    response = as_role("submitter").post("/api/v1/comparisons", json=body)

    assert problem(response, 422)["errors"][0]["pointer"] == "/variants/1/patch/quote/vendor"


# --- lone surrogates ------------------------------------------------------------------------------------------

SURROGATE_BODIES = ['{"\\ud800": 1}', '{"a": "\\udc00"}', '{"justification": "x\\ud83d", "action": "approve"}',
                    '[{"\\uDBFF\\uDBFF": ["\\uD800"]}]']


def _endpoints(view: dict[str, Any]) -> list[tuple[str, str]]:
    return [("submitter", "/api/v1/submissions"), ("submitter", url(view["id"], "revisions")),
            ("reviewer", url(view["id"], "checks", "training-objective", "waivers")),
            ("reviewer", url(view["id"], "decisions")), ("submitter", "/api/v1/comparisons"),
            ("reviewer", "/api/v1/searches"),
            ("approver", f"/api/v1/records/{view['evaluation']['record_id']}/purchase-orders"),
            ("submitter", "/api/v1/records/verify")]


@pytest.mark.parametrize("body", SURROGATE_BODIES, ids=["member-name", "value", "high-surrogate", "nested"])
def test_a_lone_surrogate_is_a_4xx_problem_on_every_json_endpoint(as_role, submitted, body):
    _, view = submitted
    for role, path in _endpoints(view):
        response = as_role(role).post(path, data=body, headers=JSON, if_match=view["etag"])
        if path.endswith("/verify"):  # verify reads any document: answered, never a 500
            assert response.status_code in (200, 400, 422), response.get_data(as_text=True)[:300]
            if response.status_code == 200:
                assert response.get_json()["ok"] is False
            continue
        found = problem(response, 400, 422)
        json.dumps(found, ensure_ascii=False).encode("utf-8")  # the problem itself is valid UTF-8 text
        if found["status"] == 422 and "surrogate" in found["detail"]:
            assert found["errors"][0]["pointer"].startswith("/"), found


def test_the_pointer_of_a_lone_surrogate_in_a_member_name_is_written_out(as_role):
    response = as_role("submitter").post("/api/v1/submissions", data='{"quote": {"\\ud800x": 1}}', headers=JSON)

    errors = problem(response, 422)["errors"]
    assert errors == [{"pointer": "/quote/<U+D800>x", "message": errors[0]["message"]}]
    assert "U+D800" in errors[0]["message"]


def test_a_valid_surrogate_pair_is_one_character_and_accepted(as_role, submission_document):
    body = json.dumps(submission_document).replace("Acme GPU Systems", "Acme GPU Systems \\ud83d\\udda5")

    response = as_role("submitter").post("/api/v1/submissions", data=body, headers=JSON)

    assert response.status_code == 201 and response.get_json()["vendor"] == "Acme GPU Systems \U0001f5a5"


# --- records stored before the rule: shown visibly -----------------------------------------------------------

def test_a_record_stored_with_a_bidi_override_shows_it_visibly_in_the_pdf(app, submitted, tmp_path):
    # Given a record stored before intake refused such characters (written into the store directly)
    submitter, view = submitted
    record_id = view["evaluation"]["record_id"]
    with get_db(app).session() as session:
        record = session.get(Record, record_id)
        document = json.loads(json.dumps(record.document))
        document["submission"]["vendor"] = "Acme GPU Systems"
        document["submission"]["notes"] = f"Total {REVERSED_PRICE} incl. support"
        record.document = document
        session.add(record)
        session.commit()

    # When its PDF is read over HTTP
    response = submitter.get(f"/api/v1/records/{record_id}.pdf")

    # Then the override is written out and the text reads in its stored order, never as "EUR 250,000"
    assert response.status_code == 200 and response.mimetype == "application/pdf"
    text = pdftotext(response.data, tmp_path)
    assert "EUR <U+202E>000,052<U+202C>" in " ".join(text.split())
    assert "250,000" not in text and "\u202e" not in text


def test_a_purchase_order_system_with_hidden_text_is_a_422(as_role, submitted):
    _, view = submitted
    view = waive_all(as_role("reviewer"), view)
    approver = as_role("approver")
    final = approver.post(url(view["id"], "decisions"), json={"action": "approve"}, if_match=view["etag"]).get_json()

    response = approver.post(f"/api/v1/records/{final['final_record_id']}/purchase-orders",
                             json={"po_number": "PO-4711", "system": "SAP\u202e"})

    assert problem(response, 422)["errors"][-1]["pointer"] == "/system"

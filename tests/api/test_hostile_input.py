"""Hostile input: every request the API cannot serve gets a clear 4xx problem (or its documented answer), quickly.

Each test pins a defect found by fuzzing the API against its own OpenAPI document (schemathesis) and by
hand-made bodies: before its fix the request got a 500, hung, or answered outside the documented contract.
Runs on SQLite and PostgreSQL like the other API tests (some defects were PostgreSQL-only).
"""

from __future__ import annotations

import copy
import json
import re
import signal
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from api_support import url

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROBLEM = "application/problem+json"
JSON = {"Content-Type": "application/json"}
PDF = {"Content-Type": "application/pdf"}
# RFC 3986 URI reference made of a path: unreserved, sub-delims, ":", "@", "/" and percent-encodings.
URI_PATH = re.compile(r"^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-F]{2})*$")


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fails the test (TimeoutError) when the block runs longer than ``seconds``, rather than hanging CI."""

    def expire(_signum: int, _frame: Any) -> None:
        raise TimeoutError(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def example(name: str) -> dict[str, Any]:
    return json.loads((EXAMPLES / name).read_text())


def problem(response: Any, status: int) -> dict[str, Any]:
    """Returns the problem body after checking the status, the media type and the RFC 9457 members."""
    assert response.status_code == status, response.get_data(as_text=True)[:500]
    assert response.mimetype == PROBLEM
    body = response.get_json()
    assert {"type", "title", "status", "detail", "instance"} <= set(body) and body["status"] == status
    assert URI_PATH.match(body["instance"]), body["instance"]
    return body


def nested(depth: int, leaf: str = "1") -> str:
    return '{"a":' * depth + leaf + "}" * depth


# --- the problem's `instance` ---------------------------------------------------------------------------------

def test_the_instance_of_a_problem_is_a_uri_reference_whatever_the_path_holds(as_role):
    # request.path is decoded; the instance was that text (spaces, "é", control characters): not a
    # "uri-reference" as the Problem schema of the OpenAPI document says.
    response = as_role("reviewer").get("/api/v1/submissions/a%20b%C3%A9%01%25")
    assert problem(response, 404)["instance"] == "/api/v1/submissions/a%20b%C3%A9%01%25"


# --- JSON bodies --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body", ["[" * 10_000 + "]" * 10_000, nested(10_000), nested(65)],
                         ids=["array-10000", "object-10000", "object-65"])
def test_deeply_nested_json_is_a_400_not_a_recursion_error(as_role, body):
    response = as_role("submitter").post("/api/v1/submissions", data=body, headers=JSON)
    assert "64 levels" in problem(response, 400)["detail"]


def test_nesting_within_the_limit_reaches_validation(as_role):
    response = as_role("submitter").post("/api/v1/submissions", data=nested(64), headers=JSON)
    problem(response, 422)


def test_deep_nesting_inside_a_comparison_patch_is_refused_before_it_is_copied(as_role, submission_document):
    # 900 levels parsed, then copy.deepcopy in the merge patch ran out of stack: 500.
    patch = json.loads("[" * 900 + "]" * 900)
    body = {"submission": submission_document, "variants": [{"name": "deep", "patch": {"notes": patch}}]}
    response = as_role("submitter").post("/api/v1/comparisons", data=json.dumps(body), headers=JSON)
    problem(response, 400)


def test_an_integer_of_thousands_of_digits_is_a_400(as_role):
    body = '{"schema_version": "1", "quote": {"node_groups": [{"count": ' + "9" * 5000 + "}]}}"
    response = as_role("submitter").post("/api/v1/submissions", data=body, headers=JSON)
    assert "digits" in problem(response, 400)["detail"]


def test_a_repeated_member_name_is_refused_rather_than_the_last_one_silently_winning(as_role, submission_document):
    body = json.dumps(submission_document).replace('"vendor": "Acme GPU Systems"',
                                                   '"vendor": "Acme GPU Systems", "vendor": "Someone Else"')
    response = as_role("submitter").post("/api/v1/submissions", data=body, headers=JSON)
    assert "'vendor'" in problem(response, 400)["detail"]


def test_only_utf8_is_read_and_a_byte_order_mark_is_ignored(as_role, submission_document):
    caller = as_role("submitter")
    text = json.dumps(submission_document)
    for encoded in (text.encode("utf-16"), text.encode("utf-32")):
        problem(caller.post("/api/v1/submissions", data=encoded, headers=JSON), 400)
    assert caller.post("/api/v1/submissions", data=b"\xef\xbb\xbf" + text.encode(), headers=JSON).status_code == 201


def test_nul_in_a_body_is_a_422_with_its_pointer(as_role, submission_document):
    # PostgreSQL's text cannot hold U+0000: the vendor column write failed with a 500 there.
    submission_document["quote"]["vendor"] = "Acme\u0000"
    response = as_role("submitter").post("/api/v1/submissions", json=submission_document)
    errors = problem(response, 422)["errors"]
    assert errors == [{"pointer": "/quote/vendor", "message": "must not contain U+0000 (NUL)"}]
    key = as_role("submitter").post("/api/v1/submissions", data='{"a\\u0000": 1}', headers=JSON)
    assert problem(key, 422)["errors"][0]["pointer"] == "/a\u0000"


def test_nul_in_a_waiver_justification_is_a_422(as_role, submitted):
    _, view = submitted
    body = {"justification": "The vendor confirmed it in writing\u0000 (mail of 2026-11-20)."}
    response = as_role("reviewer").post(url(view["id"], "checks", "training-objective", "waivers"), json=body,
                                        if_match=view["etag"])
    assert problem(response, 422)["errors"][0]["pointer"] == "/justification"


def test_numbers_json_has_no_place_for_are_still_4xx(as_role, submission_document):
    caller = as_role("submitter")
    text = json.dumps(submission_document)
    for literal in ("1e400", "-1e400", "NaN", "Infinity"):
        response = caller.post("/api/v1/submissions", data=text.replace('"count": 2', f'"count": {literal}'),
                               headers=JSON)
        assert response.status_code in (400, 422) and response.mimetype == PROBLEM, literal


# --- path and query parameters ------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/api/v1/submissions/a%00b", "/api/v1/submissions/a%00b/audit",
                                  "/api/v1/records/a%00b.json", "/api/v1/tasks/a%00b"])
def test_nul_in_a_path_is_a_404(as_role, path):
    # PostgreSQL refused the id in the WHERE clause: 500.
    problem(as_role("reviewer").get(path), 404)


def test_nul_in_the_vendor_filter_is_a_422(as_role):
    response = as_role("reviewer").get("/api/v1/submissions?vendor=a%00b")
    assert problem(response, 422)["errors"][0]["parameter"] == "vendor"


@pytest.mark.parametrize("page", ["%C2%B2", "%D9%A3", "9" * 5000, "99999999999999999999", "1000001", "0", "-1"],
                         ids=["superscript-two", "arabic-indic-three", "5000-digits", "beyond-int64", "past-max",
                              "zero", "negative"])
def test_a_page_that_is_not_a_small_ascii_integer_is_a_422(as_role, page):
    # "²".isdigit() is True but int("²") raises (500); 10^20 overflowed the database's OFFSET (500).
    response = as_role("reviewer").get(f"/api/v1/submissions?page={page}")
    assert problem(response, 422)["errors"][0]["parameter"] == "page"


def test_the_last_page_allowed_is_an_empty_page(as_role):
    response = as_role("reviewer").get("/api/v1/submissions?page=1000000&per_page=100")
    assert response.status_code == 200 and response.get_json()["items"] == []


# --- magnitudes the schema allows ---------------------------------------------------------------------------

def _set(document: dict[str, Any], pointer: str, value: Any) -> dict[str, Any]:
    document = copy.deepcopy(document)
    *parents, last = [int(p) if p.isdigit() else p for p in pointer.strip("/").split("/")]
    node: Any = document
    for part in parents:
        node = node[part]
    node[last] = value
    return document


@pytest.mark.parametrize(("name", "pointer", "value"), [
    ("fail-70b-ddp-one-rack.json", "/workload/training/gpus", 1e20),
    ("dgx-h100-70b-finetune.json", "/quote/node_groups/0/count", 2**53 - 1),
    ("dgx-h100-70b-finetune.json", "/quote/fabric/oversubscription", 1e20),
    ("dgx-h100-70b-finetune.json", "/workload/training/model/architecture/layers", 1e300),
    ("dgx-h100-70b-finetune.json", "/workload/training/completion_window_days", 5e-324),
    ("l40s-8b-serving.json", "/workload/inference/rps", 1e20),
])
def test_huge_inputs_are_evaluated_not_a_500(as_role, name, pointer, value):
    # Derived integers beyond 2^53 could not be canonicalised when the result digests were stored, and
    # overflows escaped the estimators: 500. Now they are floats, or the check fails as inconsistent.
    caller = as_role("submitter")
    with deadline(30):
        response = caller.post("/api/v1/submissions", json=_set(example(name), pointer, value))
    assert response.status_code == 201, response.get_json()
    record = caller.get(f"/api/v1/records/{response.get_json()['evaluation']['record_id']}.json")
    assert record.status_code == 200 and record.get_json()["record_id"]


def test_an_absurd_global_batch_does_not_hang_the_micro_batch_search(as_role):
    # Nothing fits this layout, so every divisor of 2^50 / 32 up to itself was tried: 3.5 · 10^13 iterations.
    document = _set(example("fail-70b-ddp-one-rack.json"), "/workload/training/global_batch", 2**50)
    with deadline(30):
        response = as_role("submitter").post("/api/v1/submissions", json=document)
    assert response.status_code == 201, response.get_json()


def test_an_absurd_pdu_count_costs_no_memory(as_role):
    # One list entry per PDU: MemoryError (500) for 2^53 PDUs, or the process killed for 2^32.
    document = _set(example("dgx-h100-70b-finetune.json"), "/quote/racks/0/pdus/0/count", 2**53 - 1)
    with deadline(30):
        response = as_role("submitter").post("/api/v1/submissions", json=document)
    assert response.status_code == 201, response.get_json()


def test_a_record_whose_figures_overflow_a_chart_still_renders(as_role):
    # The chart's axis maximum (figure × 1.1) overflowed to inf: OverflowError in the PDF renderer, 500.
    document = _set(example("dgx-h100-70b-finetune.json"), "/quote/racks/0/cooling_capacity_kw/value",
                    1.7976931348623157e308)
    caller = as_role("submitter")
    view = caller.post("/api/v1/submissions", json=document).get_json()
    with deadline(60):
        response = caller.get(f"/api/v1/records/{view['evaluation']['record_id']}.pdf")
    assert response.status_code == 200 and response.mimetype == "application/pdf"


def test_a_chart_axis_near_the_float_limit_ends():
    from service.record.charts import rack_power_chart

    # maximum = 1.6342e308 × 1.1 is finite, but the ticks stepped past it to inf, and inf <= inf forever.
    with deadline(5):
        assert rack_power_chart({"racks": [{"name": "R1", "draw_kw": 1.6342e308}]}) is None


# --- POST /api/v1/records/verify ----------------------------------------------------------------------------

def _pdf(*objects: bytes) -> bytes:
    """Returns a minimal PDF of ``objects`` (1 0 R is the catalogue) with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_verify_refuses_deeply_nested_json_with_a_422(client):
    for body in (b"[" * 10_000 + b"]" * 10_000, nested(10_000).encode()):
        response = client.post("/api/v1/records/verify", data=body, headers=JSON)
        problem(response, 422)


def test_verify_reads_an_object_of_many_members_in_linear_time(client):
    # The duplicate-name check counted every name for every name: about 5 minutes for this body.
    body = "{" + ",".join(f'"k{i}":0' for i in range(150_000)) + "}"
    with deadline(20):
        response = client.post("/api/v1/records/verify", data=body, headers=JSON)
    assert response.status_code == 200 and response.get_json()["ok"] is False


def test_verify_bounds_what_a_compressed_stream_may_inflate_to(client):
    # pyHanko's defaults for untrusted input let one stream inflate to 256 MiB: a 2 MiB upload cost half
    # a GiB of memory. 40 MiB of zeros (40 KiB deflated) as the attached record now stops at 16 MiB.
    bomb = zlib.compress(b"\0" * (40 * 1024 * 1024), 9)
    name = b"(commissioning-record.signed.json)"
    pdf = _pdf(b"<< /Type /Catalog /Pages 2 0 R /Names << /EmbeddedFiles 4 0 R >> >>",
               b"<< /Type /Pages /Kids [] /Count 0 >>",
               b"<< /Type /Filespec /F %s /UF %s /EF << /F 5 0 R >> >>" % (name, name),
               b"<< /Names [%s 3 0 R] >>" % name,
               b"<< /Type /EmbeddedFile /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(bomb), bomb))
    with deadline(20):
        response = client.post("/api/v1/records/verify", data=pdf, headers=PDF)
    result = response.get_json()
    assert response.status_code == 200 and result["ok"] is False
    assert any("16777216" in reason for reason in result["reasons"]), result["reasons"]


@pytest.mark.parametrize("body", [
    b"\x8f\x00\xff" * 1000,
    b"%PDF-1.7\n" + b"\x00\xff" * 1000,
    _pdf(b"<< /Type /Catalog /Pages 2 0 R /X " + b"[" * 100_000 + b"]" * 100_000 + b" >>",
         b"<< /Type /Pages /Kids [] /Count 0 >>"),
    _pdf(b"<< /Type /Catalog /Pages 2 0 R /Names << /EmbeddedFiles 3 0 R >> >>",
         b"<< /Type /Pages /Kids [] /Count 0 >>", b"<< /Kids [" + b"3 0 R " * 8 + b"] >>"),
], ids=["random-bytes", "damaged-pdf", "deeply-nested-pdf", "looping-name-tree"])
def test_verify_answers_unreadable_or_damaged_documents_without_a_500(client, body):
    with deadline(20):
        response = client.post("/api/v1/records/verify", data=body,
                               headers={"Content-Type": "application/octet-stream"})
    if response.status_code == 200:  # a damaged PDF is read as an invalid one (documented)
        assert response.get_json()["ok"] is False
    else:
        problem(response, 422)


@pytest.mark.parametrize("method, path", [
    ("GET", "/api/v1/webhooks/1837147614078225451515521244594176"), ("DELETE", "/api/v1/webhooks/2147483648"),
    ("GET", "/api/v1/webhooks/0/deliveries")])
def test_a_webhook_id_beyond_the_id_column_is_not_found(app, as_role, method, path):
    # Found by schemathesis: PostgreSQL's INTEGER and SQLite's 64-bit integers cannot hold such ids (500 before).
    admin = as_role("admin")

    response = app.test_client().open(path, method=method, headers={"Authorization": f"Bearer {admin.token}"})

    assert response.status_code == 404 and response.mimetype == "application/problem+json"


def test_verify_names_the_record_of_an_addendum_only_with_text_it_was_sent(client):
    # Found by schemathesis: an addendum-shaped document whose named record digest is a number was echoed
    # back as `addendum_of.digest: 471`, against the Verification schema (a string or null).
    forged = {"record": {"kind": "as-built", "addendum_version": "1", "record": {"record_id": ["x"], "digest": 471}},
              "signature": {"alg": "ecdsa-p256-sha256", "key_id": "sha256:" + "0" * 64,
                            "record_digest": "sha256:" + "0" * 64, "signed_at": "2026-12-01T00:00:00Z",
                            "value": "AA=="}}

    response = client.post("/api/v1/records/verify", json=forged)

    assert response.status_code == 200 and response.get_json()["ok"] is False
    named = response.get_json().get("addendum_of")
    assert named is None or named == {"record_id": None, "digest": None}

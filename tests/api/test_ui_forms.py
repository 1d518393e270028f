"""The forms and downloads of the reviewer pages through Flask's test client: a stale form is explained, each form
does what its API request does, and the downloads are the API's bytes."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

from api_support import FAILING_SUBMISSION, JUSTIFICATION, blocking_checks, url, waive_all
from ui_support import sign_in, version_of

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dgx-h100-70b-finetune.json"


def test_a_stale_form_is_explained_in_words_and_saves_nothing(app, as_role, submitted):
    # Given a reviewer who opened the page, and a colleague who waived a check meanwhile
    _, view = submitted
    reviewer = sign_in(app, as_role("reviewer"))
    seen = version_of(reviewer.text(f"/ui/submissions/{view['id']}"))
    colleague = as_role("reviewer")
    first, second = blocking_checks(view)[:2]
    waived = colleague.post(url(view["id"], "checks", first, "waivers"), json={"justification": JUSTIFICATION},
                            if_match=view["etag"])
    assert waived.status_code == 201

    # When the reviewer sends a waiver from the page as it was
    response = reviewer.post(f"/ui/submissions/{view['id']}/checks/{second}/waivers",
                             {"justification": JUSTIFICATION + " (second)", "version": seen})

    # Then the answer is the page as it is now, saying in words what happened, with the typed text kept
    page = response.get_data(as_text=True)
    assert response.status_code == 409
    assert "changed after you opened the page" in page and f"you saw version {seen}" in page
    assert "Nothing was saved" in page and JUSTIFICATION + " (second)" in page
    assert len(colleague.get(url(view["id"])).get_json()["waivers"]) == 1


def test_waive_then_approve_from_the_pages_issues_the_signed_record(app, as_role, submitted):
    # Given a failing quote
    _, view = submitted
    reviewer, approver = sign_in(app, as_role("reviewer")), sign_in(app, as_role("approver"))
    page_url = f"/ui/submissions/{view['id']}"

    # When a reviewer waives every blocking check on the page and an approver approves
    for check_id in blocking_checks(view):
        version = version_of(reviewer.text(page_url))
        response = reviewer.post(f"{page_url}/checks/{check_id}/waivers",
                                 {"justification": JUSTIFICATION, "version": version, "expires": ""})
        assert response.status_code == 303, response.get_data(as_text=True)[:3000]
    page = approver.text(page_url)
    response = approver.post(f"{page_url}/decisions", {"action": "approve", "version": version_of(page)})

    # Then the quote is approved and its signed PDF downloads from the page
    assert response.status_code == 303
    stored = as_role("reviewer").get(url(view["id"])).get_json()
    assert stored["state"] == "approved"
    page = approver.text(page_url)
    assert "Your approval was recorded." in approver.text(response.headers["Location"])
    # (a worker renders it: a browser first gets a page that says so and reloads itself; the task, run here in the
    # test's process, has stored the PDF by the reload)
    record_pdf = f"/ui/records/{stored['final_record_id']}.pdf"
    browser = {"Prefer": "respond-async", "Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    waiting = approver.get(record_pdf, headers=browser)
    assert waiting.status_code == 202 and waiting.mimetype == "text/html" and waiting.headers["Refresh"] == "2"
    assert "Rendering the signed PDF" in waiting.get_data(as_text=True)
    assert approver.get(record_pdf, headers=browser).mimetype == "application/pdf"
    pdf = approver.get(record_pdf)
    assert pdf.status_code == 200 and pdf.mimetype == "application/pdf" and pdf.headers["Record-Status"] == "signed"
    as_json = approver.get(f"/ui/records/{stored['final_record_id']}.json")
    api = as_role("reviewer").get(f"/api/v1/records/{stored['final_record_id']}.json")
    assert as_json.data == api.data and "attachment" in as_json.headers["Content-Disposition"]


def test_approval_blocked_shows_the_blockers_instead_of_the_button(app, as_role, submitted):
    _, view = submitted
    page = sign_in(app, as_role("approver")).text(f"/ui/submissions/{view['id']}")
    assert "Approval is blocked" in page and 'value="approve"' not in page
    assert "training-objective is fail and has no valid waiver" in page


def test_a_decision_the_role_may_not_take_is_refused_with_the_reason(app, as_role, submitted):
    _, view = submitted
    reviewer = sign_in(app, as_role("reviewer"))
    page = reviewer.text(f"/ui/submissions/{view['id']}")
    response = reviewer.post(f"/ui/submissions/{view['id']}/decisions", {"action": "approve",
                                                                          "version": version_of(page)})
    assert response.status_code == 403
    assert "role &#39;reviewer&#39; may not approve quotes" in response.get_data(as_text=True)


def test_a_purchase_order_is_linked_from_the_page_of_an_approved_quote(app, as_role, submitted):
    _, view = submitted
    view = waive_all(as_role("reviewer"), view)
    approver_api = as_role("approver")
    assert approver_api.post(url(view["id"], "decisions"), json={"action": "approve"},
                             if_match=view["etag"]).status_code == 201
    final_id = approver_api.get(url(view["id"])).get_json()["final_record_id"]
    approver = sign_in(app, approver_api)

    response = approver.post(f"/ui/records/{final_id}/purchase-orders", {"po_number": "PO-4711", "system": "SAP"})

    assert response.status_code == 303
    page = approver.text(response.headers["Location"])
    assert "The purchase order was linked" in page and "PO-4711" in page
    assert approver_api.get(url(view["id"])).get_json()["final_record_id"] != final_id


def test_a_quote_is_submitted_pasted_or_uploaded_and_a_bad_one_is_refused_by_pointer(app, as_role):
    vendor = sign_in(app, as_role("submitter"))
    assert 'name="document"' in vendor.text("/ui/submissions/new")

    pasted = vendor.post("/ui/submissions/new", {"document": json.dumps(FAILING_SUBMISSION)},
                         content_type="multipart/form-data")
    uploaded = vendor.post("/ui/submissions/new", {"file": (io.BytesIO(json.dumps(FAILING_SUBMISSION).encode()),
                                                            "quote.json")}, content_type="multipart/form-data")
    broken = copy.deepcopy(FAILING_SUBMISSION)
    broken["quote"]["node_groups"][0]["count"] = "two"
    refused = vendor.post("/ui/submissions/new", {"document": json.dumps(broken)},
                          content_type="multipart/form-data")
    not_json = vendor.post("/ui/submissions/new", {"document": "{"}, content_type="multipart/form-data")

    assert pasted.status_code == 303 and uploaded.status_code == 303
    assert "The quote was submitted and evaluated." in vendor.text(pasted.headers["Location"])
    assert refused.status_code == 422 and "/quote/node_groups/0/count" in refused.get_data(as_text=True)
    assert not_json.status_code == 422 and "not valid JSON" in not_json.get_data(as_text=True)
    reviewer = sign_in(app, as_role("reviewer"))
    assert reviewer.get("/ui/submissions/new").status_code == 403


def test_a_revision_from_the_page_shows_in_the_history_and_the_diff(app, submitted, as_role):
    # Given a quote, revised by its submitter on its page with a larger node count
    submitter, view = submitted
    vendor = sign_in(app, submitter)
    page_url = f"/ui/submissions/{view['id']}"
    revised = copy.deepcopy(FAILING_SUBMISSION)
    revised["workload"]["training"]["optimizer"] = "adamw"
    response = vendor.post(f"{page_url}/revisions", {"document": json.dumps(revised),
                                                     "version": version_of(vendor.text(page_url))},
                           content_type="multipart/form-data")
    assert response.status_code == 303, response.get_data(as_text=True)[:3000]

    # When a reviewer reads the history and the diff of the two revisions
    reviewer = sign_in(app, as_role("reviewer"))
    page = reviewer.text(page_url)
    diff = reviewer.text(f"{page_url}/diff?from=1&to=2")
    first = reviewer.get(f"{page_url}/revisions/1.json")

    # Then both revisions are listed with their documents, and the diff names the check that changed
    assert "revision 2 (JSON)" in page and "revision 1 (JSON)" in page
    assert "training-objective" in diff and "Evidence that changed" in diff
    assert first.status_code == 200 and json.loads(first.data) == FAILING_SUBMISSION


def test_the_compare_page_shows_quotes_for_one_workload_side_by_side_with_a_chart(app, as_role):
    # Given two quotes for the bundled example's job and one for a job with a longer window
    submitter = as_role("submitter")
    example = json.loads(EXAMPLE.read_text())
    ids = []
    for vendor_name in ("Alpha Systems", "Beta Systems"):
        document = copy.deepcopy(example)
        document["quote"]["vendor"] = vendor_name
        ids.append(submitter.post("/api/v1/submissions", json=document).get_json()["id"])
    other = copy.deepcopy(example)
    other["workload"]["training"]["completion_window_days"] = 30
    ids.append(submitter.post("/api/v1/submissions", json=other).get_json()["id"])
    reviewer = sign_in(app, as_role("reviewer"))

    # When a reviewer opens the picker, compares the first two, and then one of them with the third
    picker = reviewer.text("/ui/compare")
    page = reviewer.text(f"/ui/compare?ids={ids[0]}&ids={ids[1]}")
    mixed = reviewer.get(f"/ui/compare?ids={ids[0]}&ids={ids[2]}")

    # Then the picker groups them by job, the two are side by side with their figures and a chart, and the
    # mixed pair is refused naming what differs
    assert picker.count("<fieldset>") == 2
    assert "Alpha Systems" in page and "Beta Systems" in page and "<svg" in page
    assert "EUR 4,872,000" in page and "Days to result and total price of 2 quotes" in page
    assert "Rank them at each quote" in page
    assert mixed.status_code == 422 and "completion_window_days differs" in mixed.get_data(as_text=True)


def test_the_landing_page_points_to_the_pages_the_api_docs_and_the_health_endpoints(client):
    page = client.get("/").get_data(as_text=True)
    for target in ("/ui/", "/api/v1/docs", "/api/v1/openapi.json", "/healthz", "/readyz"):
        assert f'href="{target}"' in page


def test_the_ranking_runs_as_a_task_ranks_the_quotes_that_pass_and_lists_the_others_apart(app, as_role):
    # Given the example (which passes) and the same job on DDP, which does not fit memory
    submitter = as_role("submitter")
    example = json.loads(EXAMPLE.read_text())
    failing = copy.deepcopy(example)
    failing["workload"]["training"]["parallelism"]["sharding"] = "ddp"
    ids = [submitter.post("/api/v1/submissions", json=document).get_json()["id"] for document in (example, failing)]
    reviewer = sign_in(app, as_role("reviewer"))

    # When a reviewer ranks them from the pages and downloads the CSV the page links to
    response = reviewer.post("/ui/compare/rankings", {"ids": ids})
    page = reviewer.text(response.headers["Location"])
    task_id = response.headers["Location"].rsplit("/", 1)[1].split("?")[0]
    table = reviewer.get(f"/ui/compare/rankings/{task_id}.csv")

    # Then the passing quote is ranked and named soonest and cheapest, the failing one listed with its check
    assert response.status_code == 303 and "/ui/compare/rankings/" in response.headers["Location"]
    ranked, _, not_ranked = page.partition('id="not-ranked-quotes"')
    assert f'data-submission-id="{ids[0]}"' in ranked and f'data-submission-id="{ids[1]}"' not in ranked
    assert f'data-submission-id="{ids[1]}"' in not_ranked and '<code class="check-id">peak-memory</code>' in not_ranked
    soonest = page.partition('id="soonest-that-passes"')[2].partition("</p>")[0]
    cheapest = page.partition('id="cheapest-that-passes"')[2].partition("</p>")[0]
    assert f"/ui/submissions/{ids[0]}" in soonest and f"/ui/submissions/{ids[0]}" in cheapest
    assert "EUR 12,583 per run" in cheapest
    assert "TP 1 × PP 1 × DP 128, fsdp-full, micro-batch 1" in ranked and "EUR 4,872,000" in ranked
    assert f'href="/ui/compare/rankings/{task_id}.csv"' in page and "Download the comparison as CSV" in page
    assert table.status_code == 200 and table.mimetype == "text/csv"
    assert table.text.splitlines()[1].startswith(f"1,{ids[0]},")


def test_the_audit_trail_and_the_exports_download_from_the_pages(app, as_role, submitted):
    _, view = submitted
    reviewer = sign_in(app, as_role("reviewer"))
    trail = reviewer.text(f"/ui/submissions/{view['id']}/audit")
    as_csv = reviewer.get(f"/ui/submissions/{view['id']}/audit.csv?format=csv")
    sarif = reviewer.get(f"/ui/submissions/{view['id']}/checks?format=sarif")
    junit = reviewer.get(f"/ui/submissions/{view['id']}/checks?format=junit")

    assert "submission.created" in trail and "evaluation.completed" in trail
    assert as_csv.status_code == 200 and as_csv.mimetype == "text/csv" and "submission.created" in as_csv.text
    assert sarif.status_code == 200 and json.loads(sarif.data)["version"] == "2.1.0"
    assert junit.status_code == 200 and junit.data.startswith(b"<?xml")
    assert reviewer.get(f"/ui/submissions/{view['id']}/checks?format=pdf").status_code == 422

"""The reviewer pages (service/ui) through Flask's test client: sign-in and sign-out, CSRF, the forms each user
is shown, and the queues."""

from __future__ import annotations

import copy
import re
from datetime import timedelta

import pytest
from api_support import FAILING_SUBMISSION, JUSTIFICATION, token_for, url, waive_all
from click.testing import CliRunner
from ui_support import csrf_of, listed, sign_in, version_of

from service.cli import main
from service.record.listing import display_number
from service.ui.session import COOKIE


def _submit(caller, **quote):
    document = copy.deepcopy(FAILING_SUBMISSION)
    document["quote"].update(quote)
    response = caller.post("/api/v1/submissions", json=document)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def test_the_approve_button_is_absent_for_a_submitter_and_present_for_an_approver(app, as_role, submitted):
    # Given a quote whose blocking checks a reviewer waived, so that an approver may approve it
    submitter, view = submitted
    waive_all(as_role("reviewer"), view)
    page_url = f"/ui/submissions/{view['id']}"

    # When its submitter and an approver open its page
    as_submitter = sign_in(app, submitter).text(page_url)
    as_approver = sign_in(app, as_role("approver")).text(page_url)

    # Then only the approver sees the approve button; the submitter sees no decision form at all
    assert 'value="approve"' not in as_submitter and "/decisions" not in as_submitter
    assert 'value="approve"' in as_approver


def test_a_user_who_submitted_sees_no_approve_button_with_their_approver_token(app, submitted, as_role):
    # Given a quote waived in full, whose submitter's user also holds an approver token
    submitter, view = submitted
    waive_all(as_role("reviewer"), view)
    approver_self = token_for(app, submitter.name, "approver")

    # When that user opens the page as approver
    page = sign_in(app, approver_self).text(f"/ui/submissions/{view['id']}")

    # Then the four-eyes rule holds the button back and says so
    assert 'value="approve"' not in page
    assert "four-eyes rule" in page


def test_a_forged_post_without_the_csrf_token_is_refused(app, as_role, submitted):
    # Given a reviewer signed in, and a failed check of a quote
    _, view = submitted
    reviewer = sign_in(app, as_role("reviewer"))
    page = reviewer.text(f"/ui/submissions/{view['id']}")
    waive = f"/ui/submissions/{view['id']}/checks/training-objective/waivers"
    form = {"justification": JUSTIFICATION, "version": version_of(page)}

    # When a form arrives with the session cookie but without the CSRF token, or with another one
    forged = reviewer.post(waive, form, csrf=False)
    wrong = reviewer.post(waive, {**form, "csrf_token": "not-the-token"})

    # Then both are refused with 403 and nothing is stored; the real form goes through
    assert forged.status_code == 403 and wrong.status_code == 403
    assert "CSRF" in forged.get_data(as_text=True)
    assert as_role("reviewer").get(url(view["id"])).get_json()["waivers"] == []
    assert reviewer.post(waive, form).status_code == 303
    assert len(as_role("reviewer").get(url(view["id"])).get_json()["waivers"]) == 1


def test_a_form_posted_without_a_session_is_refused(app, client, submitted):
    _, view = submitted
    response = client.post(f"/ui/submissions/{view['id']}/decisions", data={"action": "reject", "version": "2"})
    assert response.status_code == 403
    assert "not signed in" in response.get_data(as_text=True)


def test_a_queue_shows_exactly_what_awaits_the_signed_in_user(app, as_role, clock):
    # Given quotes in several positions: one open to review, one the reviewer's own user submitted, one waived in
    # full (ready for approval), one approved
    submitter, reviewer_api, approver_api = as_role("submitter"), as_role("reviewer"), as_role("approver")
    own_quote_submitter = token_for(app, reviewer_api.name, "submitter")
    open_quote = _submit(submitter, quote_id="OPEN-1")
    own_quote = _submit(own_quote_submitter, quote_id="OWN-1")
    ready_quote = waive_all(reviewer_api, _submit(submitter, quote_id="READY-1"))
    done_quote = waive_all(reviewer_api, _submit(submitter, quote_id="DONE-1"))
    approved = approver_api.post(url(done_quote["id"], "decisions"), json={"action": "approve"},
                                 if_match=done_quote["etag"])
    assert approved.status_code == 201, approved.get_json()

    # When the reviewer, an approver and the submitter open their queues
    reviewer = sign_in(app, reviewer_api)
    approver = sign_in(app, as_role("approver"))
    vendor = sign_in(app, submitter)

    # Then each queue lists exactly the quotes that await that user
    assert listed(reviewer.text("/ui/queue/review")) == {open_quote["id"]}
    assert listed(approver.text("/ui/queue/approval")) == {ready_quote["id"]}
    assert listed(approver.text("/ui/queue/review")) == set()
    assert listed(reviewer.text("/ui/queue/approval")) == set()
    assert listed(reviewer.text("/ui/queue/blocked")) == {open_quote["id"], own_quote["id"]}
    assert listed(vendor.text("/ui/queue/mine")) == {open_quote["id"], ready_quote["id"], done_quote["id"]}
    assert listed(reviewer.text("/ui/queue/mine")) == {own_quote["id"], ready_quote["id"], done_quote["id"]}
    assert listed(vendor.text("/ui/queue/all")) == {q["id"] for q in (open_quote, own_quote, ready_quote, done_quote)}
    # and the filters narrow a queue further
    assert listed(vendor.text("/ui/queue/all?state=approved")) == {done_quote["id"]}
    assert listed(vendor.text("/ui/queue/all?effective_verdict=fail")) == {open_quote["id"], own_quote["id"]}
    assert listed(vendor.text(f"/ui/queue/all?submitter={reviewer_api.name}")) == {own_quote["id"]}
    everything = {q["id"] for q in (open_quote, own_quote, ready_quote, done_quote)}
    today = clock().date()
    for sort in ("verdict", "vendor", "submitter", "state", "updated"):
        assert listed(vendor.text(f"/ui/queue/all?sort={sort}&order=asc")) == everything, sort
    assert listed(vendor.text(f"/ui/queue/all?from={today.isoformat()}&to={today.isoformat()}")) == everything
    assert listed(vendor.text(f"/ui/queue/all?to={(today - timedelta(days=1)).isoformat()}")) == set()
    assert "is not a date" in vendor.text("/ui/queue/all?from=yesterday")


def test_sign_out_clears_the_session(app, as_role):
    # Given a signed-in browser and a copy of its session cookie
    browser = sign_in(app, as_role("reviewer"))
    cookie = browser.client.get_cookie(COOKIE)
    assert cookie is not None and cookie.http_only and cookie.secure and cookie.same_site == "Strict"

    # When it signs out
    response = browser.post("/ui/sign-out")

    # Then the cookie is cleared, the pages ask to sign in again, and the old cookie opens nothing any more
    assert response.status_code == 303 and browser.client.get_cookie(COOKIE) is None
    assert browser.get("/ui/queue/all").headers["Location"].startswith("/ui/sign-in")
    thief = app.test_client()
    thief.set_cookie(COOKIE, cookie.value)
    assert thief.get("/ui/queue/all").status_code == 303


def test_a_session_ends_with_its_lifetime_and_with_its_token(app, as_role, clock):
    browser = sign_in(app, as_role("reviewer"))
    clock.advance(seconds=app.config["UI_SESSION_LIFETIME_S"] + 1)
    assert browser.get("/ui/queue/all").status_code == 303

    clock.advance(seconds=-app.config["UI_SESSION_LIFETIME_S"] - 1)
    reviewer = as_role("reviewer")
    browser = sign_in(app, reviewer)
    with app.app_context():
        result = CliRunner().invoke(main, ["token", "revoke", "--name", reviewer.name], obj={"app": app})
    assert result.exit_code == 0, result.output
    assert browser.get("/ui/queue/all").status_code == 303


def test_a_bad_token_does_not_sign_in(app, client):
    form = client.get("/ui/sign-in").get_data(as_text=True)
    response = client.post("/ui/sign-in", data={"csrf_token": csrf_of(form), "token": "qc_nope"})
    assert response.status_code == 403 and "not valid" in response.get_data(as_text=True)
    assert client.get_cookie(COOKIE) is None


def test_pages_send_security_headers_and_no_inline_script(app, as_role, submitted):
    _, view = submitted
    response = sign_in(app, as_role("reviewer")).get(f"/ui/submissions/{view['id']}")
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Cache-Control"] == "no-store"
    page = response.get_data(as_text=True)
    assert "<script>" not in page and " style=" not in page and "onclick" not in page


def test_a_vendor_token_of_scope_own_sees_only_its_own_quotes_on_the_pages(app, as_role):
    # Given a vendor whose token sees only their own quotes, and a quote of someone else
    vendor_api = token_for(app, "Acme Sales", "submitter", scope="own")
    own = _submit(vendor_api, quote_id="ACME-1")
    other = _submit(as_role("submitter"), quote_id="OTHER-1")

    # When the vendor browses the pages
    vendor = sign_in(app, vendor_api)

    # Then the other quote is in no list and its page is "not found", as in the API
    assert listed(vendor.text("/ui/queue/all")) == {own["id"]}
    assert other["id"] not in vendor.text("/ui/compare")
    assert vendor.get(f"/ui/submissions/{other['id']}").status_code == 404
    assert vendor.get(f"/ui/records/{other['evaluation']['record_id']}.json").status_code == 404


def test_an_unknown_page_is_a_page_and_an_unknown_api_path_stays_a_problem(app, as_role):
    browser = sign_in(app, as_role("reviewer"))
    page = browser.get("/ui/no-such-page")
    api = browser.get("/api/v1/no-such-resource")
    assert page.status_code == 404 and page.mimetype == "text/html"
    assert api.status_code == 404 and api.mimetype == "application/problem+json"
    assert browser.get("/ui/queue/nope").status_code == 404


@pytest.mark.parametrize("target", ["/ui/queue/all\r\nSet-Cookie: x=1", "/ui/queue/all\n", "//evil.example/ui/",
                                    "/ui\\..\\evil", "https://evil.example/ui/"])
def test_sign_in_goes_home_instead_of_to_a_next_that_is_not_one_of_these_pages(app, client, as_role, target):
    # Given a sign-in form posted with a next that would split the Location header or leave the site
    form = client.get("/ui/sign-in", query_string={"next": target})
    assert form.status_code == 200
    hidden = re.search(r'name="next" value="([^"]*)"', form.get_data(as_text=True))
    assert hidden is not None and hidden.group(1) == "/ui/"
    response = client.post("/ui/sign-in", data={"csrf_token": csrf_of(form.get_data(as_text=True)),
                                                "token": as_role("reviewer").token, "next": target})
    # Then the user signs in and goes to their home page, not a 500 and not elsewhere
    assert response.status_code == 303 and response.headers["Location"] == "/ui/"


def test_the_quote_page_leads_with_the_buyers_figures(app, as_role, submitted):
    # Given the failing quote as evaluated (its record's time-to-result evidence prices the run)
    _, view = submitted
    evidence = next(c["evidence"] for c in view["evaluation"]["checks"] if c["id"] == "time-to-result")
    first_fail = next(c["id"] for c in view["evaluation"]["checks"] if c["status"] == "fail")

    # When a reviewer opens its page
    page = re.sub(r"\s+", " ", sign_in(app, as_role("reviewer")).text(f"/ui/submissions/{view['id']}"))

    # Then the summary leads with the record PDF's lead block: the quote's figures as its evidence gives them
    lead = page[page.index('class="facts lead"'):page.index("Verdict as evaluated")]
    for label, figure in (("Quote total", evidence.get("quote_total")), ("Cost per run", evidence.get("cost_per_run")),
                          ("Cost per million tokens", evidence.get("cost_per_million_tokens"))):
        shown = f"{evidence['cost_currency']} {display_number(figure)}" if figure is not None else "not priced"
        assert f"<dt>{label}</dt><dd>{shown}" in lead, label
    if evidence.get("days") is None:  # the check lacked inputs: said, never blank
        assert "<dt>Days to result</dt><dd>not determined" in lead and "<dt>GPUs</dt><dd>not determined" in lead
    else:
        assert f"against the {display_number(evidence['window_days'])}-day window" in lead
        assert f"{display_number(evidence['gpus'])} quoted" in lead
    assert f"<dt>Top finding</dt><dd>FAIL {first_fail}:" in lead

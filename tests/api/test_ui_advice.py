"""The advice of the submission page through Flask's test client: the layout search and the remedy search started
from its buttons and shown on their task pages (tasks run in-process: no broker), and a revision made from a remedy.

Figures are checked against the engine's own functions of the stored document (the layout search, an evaluation at
the best layout, the remedy search), never against literals.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from api_support import caller_for, token_for, url
from task_support import QueueWithoutWorkers
from ui_support import Browser, sign_in, version_of

from rules.advice.best_layout import layout_patch
from rules.advice.compare import merge_patch
from rules.advice.remedies import search_remedies
from rules.advice.search import search_submission
from rules.evaluate import evaluate
from service.record.view import display_number
from service.tasks import task_runs, tasks_port

EXAMPLES = Path(__file__).parents[2] / "examples"
FINETUNE = EXAMPLES / "dgx-h100-70b-finetune.json"  # 16 DGX H100 nodes, priced in EUR
SERVING_ONLY = EXAMPLES / "l40s-8b-serving.json"
TASK_PAGE = re.compile(r"^/ui/submissions/([0-9a-f-]{36})/(searches|remedies)/([^/?#]+)$")
APPLY_FORM = re.compile(r'action="(/ui/submissions/[0-9a-f-]{36}/remedies/(r-[0-9a-f]{12})/revision)"')
APPLY_BUTTON = "Apply this remedy"


def _document(path: Path = FINETUNE) -> dict[str, Any]:
    return json.loads(path.read_text())


def _little_slack() -> dict[str, Any]:
    """The fine-tune with a 2.5-day window: 95 % of it is needed, so time-to-result warns and nothing else does."""
    return merge_patch(_document(), {"workload": {"training": {"completion_window_days": 2.5}}})


def _modelled_short() -> dict[str, Any]:
    """The fine-tune at its modelled bf16 rate (no stated throughput) with a 2-day window: time-to-result fails."""
    return merge_patch(_document(), {"workload": {"training": {"completion_window_days": 2, "throughput": None}}})


@cache
def _remedies_of(name: str) -> dict[str, Any]:
    return search_remedies({"little-slack": _little_slack, "modelled-short": _modelled_short}[name]())


def _submit(caller: Any, document: dict[str, Any]) -> dict[str, Any]:
    response = caller.post("/api/v1/submissions", json=document)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def _start(browser: Browser, submission_id: str, what: str) -> str:
    """Presses a button of the submission page (``searches`` or ``remedies``); returns the task page it leads to."""
    response = browser.post(f"/ui/submissions/{submission_id}/{what}")
    assert response.status_code == 303, response.get_data(as_text=True)[:2000]
    location = response.headers["Location"]
    match = TASK_PAGE.match(location)
    assert match and match.group(1) == submission_id and match.group(2) == what, location
    return location


def _between(page: str, start: str, end: str) -> str:
    assert start in page, f"{start!r} is not on the page"
    return page.partition(start)[2].partition(end)[0]


def _remedy_card(page: str, remedy_id: str) -> str:
    return _between(page, f'id="remedy-{remedy_id}"', "</article>")


def test_the_submission_page_offers_both_searches_to_a_reader(app, as_role):
    view = _submit(as_role("submitter"), _document())

    page = sign_in(app, as_role("reviewer")).text(f"/ui/submissions/{view['id']}")

    advice = _between(page, 'id="advice-h"', "</section>")
    assert f'action="/ui/submissions/{view["id"]}/searches"' in advice and ">Search layouts</button>" in advice
    assert f'action="/ui/submissions/{view["id"]}/remedies"' in advice and ">Find remedies</button>" in advice


def test_a_layout_search_from_the_page_shows_the_best_layout_with_its_days_and_mfu(app, as_role):
    # Given the fine-tune example, submitted, and a reviewer on its page
    document = _document()
    view = _submit(as_role("submitter"), document)
    reviewer = sign_in(app, as_role("reviewer"))

    # When the reviewer presses "Search layouts" (the task runs in-process, so it has finished by the redirect)
    task_page = _start(reviewer, view["id"], "searches")
    response = reviewer.get(task_page)

    # Then the task's page shows the search's best layout with the days to result of the job run at it, and its MFU
    assert response.status_code == 200 and "Refresh" not in response.headers
    page = response.get_data(as_text=True)
    search = search_submission(document)
    best = search["best"]
    at_best = evaluate(merge_patch(document, layout_patch(document, best)[0]))
    days = next(c for c in at_best["checks"] if c["id"] == "time-to-result")["evidence"]["days"]
    section = _between(page, 'id="best-h"', "</section>")
    assert f"{best['mfu']:.1%}" in _between(section, '<dd class="mfu">', "</dd>")
    assert display_number(days) in _between(section, '<dd class="days">', "</dd>")
    assert f"t{best['tensor']} × p{best['pipeline']}" in section
    # ... the next best below it, fastest first, each with its MFU, and the submitted layout
    table = _between(page, 'id="layouts-h"', "</table>")
    mfus = re.findall(r'<td class="mfu">([^<]+)</td>', table)
    assert mfus[:-1] == [f"{row['mfu']:.1%}" for row in search["top"][:5]] and len(mfus) == 6
    assert mfus[-1] == f"{search['submitted']['mfu']:.1%}" and ">Submitted</th>" in table
    assert search["submitted_vs_best"] in page
    assert 'data-task-state="' not in page  # done: no progress block


def test_a_task_page_reloads_itself_while_the_task_is_queued(make_app, as_role):
    # Given a service whose tasks stay queued (no worker takes them)
    app = make_app()
    tasks_port.register(app, QueueWithoutWorkers())
    submitter = caller_for(app)
    view = _submit(submitter, _document())
    browser = sign_in(app, submitter)

    for what, steps in (("searches", "parts of the layout space searched"), ("remedies", "evaluations")):
        # When a search is started from the page
        response = browser.get(_start(browser, view["id"], what))

        # Then its page says it is queued, with its steps, and reloads itself without script (Refresh)
        page = response.get_data(as_text=True)
        assert response.status_code == 200 and response.headers["Refresh"] == "2"
        assert 'data-task-state="PENDING"' in page and "is queued: 0 of " in page and f" {steps} done" in page
        assert "<script>" not in page


def test_the_remedies_page_lists_each_remedy_with_its_verdict_days_and_added_cost(app, as_role):
    # Given the fine-tune whose only finding is time-to-result's warning (little slack in a 2.5-day window)
    document = _little_slack()
    view = _submit(as_role("submitter"), document)
    assert [c["status"] for c in view["evaluation"]["checks"] if c["status"] not in ("pass", "not-applicable")] \
        == ["warn"]
    reviewer = sign_in(app, as_role("reviewer"))

    # When a reviewer presses "Find remedies"
    page = reviewer.text(_start(reviewer, view["id"], "remedies"))

    # Then every remedy of the search is listed, with its verdict, days, added cost in the quote's currency (or why it
    # is not priced), the decisions it asks and its changes in words
    expected = _remedies_of("little-slack")
    assert expected["remedies"] and expected["currency"] == "EUR"
    assert any(r["added_cost"] is not None for r in expected["remedies"])
    for remedy in expected["remedies"]:
        card = _remedy_card(page, remedy["id"])
        assert f"verdict-{remedy['verdict']}" in card
        assert display_number(remedy["days"]) in _between(card, '<dd class="days">', "</dd>")
        cost = _between(card, '<dd class="added-cost">', "</dd>")
        if remedy["added_cost"] is None:
            assert cost.startswith("not priced") and all(why in cost for why in remedy["unpriced"])
        else:
            assert cost == f"EUR {display_number(remedy['added_cost'])}"
        assert all(change in card for change in remedy["changes"])
    assert "time-to-result" in _between(page, "Checks to remedy:", "</p>")
    # ... and a reviewer may not revise, so no remedy has an apply button
    assert APPLY_BUTTON not in page and not APPLY_FORM.search(page)


def test_a_remedy_that_asks_a_decision_says_which(app, as_role):
    view = _submit(as_role("submitter"), _modelled_short())
    reviewer = sign_in(app, as_role("reviewer"))

    page = reviewer.text(_start(reviewer, view["id"], "remedies"))

    asking = [r for r in _remedies_of("modelled-short")["remedies"] if r["decisions"]]
    assert asking
    for remedy in asking:
        decisions = _between(_remedy_card(page, remedy["id"]), '<ul class="decisions">', "</ul>")
        assert all(decision in decisions for decision in remedy["decisions"])


def test_applying_a_remedy_makes_revision_2_and_the_quote_page_shows_it(app, as_role):
    # Given the little-slack quote, its submitter signed in, and its remedies found
    submitter = as_role("submitter")
    document = _little_slack()
    view = _submit(submitter, document)
    browser = sign_in(app, submitter)
    remedies_page = browser.text(_start(browser, view["id"], "remedies"))
    best = _remedies_of("little-slack")["remedies"][0]
    forms = APPLY_FORM.findall(remedies_page)
    assert [remedy_id for _, remedy_id in forms] == [r["id"] for r in _remedies_of("little-slack")["remedies"]]
    assert remedies_page.count(f">{APPLY_BUTTON}</button>") == len(forms)

    # When the submitter presses "Apply this remedy" on the best one
    response = browser.post(forms[0][0], {"version": version_of(remedies_page)})

    # Then the quote is revised by the remedy's patch, and its page shows revision 2 and says what happened
    assert response.status_code == 303, response.get_data(as_text=True)[:3000]
    assert response.headers["Location"].startswith(f"/ui/submissions/{view['id']}?done=remedy-applied")
    page = browser.text(response.headers["Location"])
    assert "The remedy was applied" in page
    assert "<dt>Revision</dt><dd>2</dd>" in page and "2 (current)" in page
    stored = submitter.get(url(view["id"])).get_json()
    assert stored["revision"] == 2 and stored["evaluation"]["verdict"] == best["verdict"]
    assert json.loads(browser.get(f"/ui/submissions/{view['id']}/revisions/2.json").data) == \
        merge_patch(document, best["patch"])


def test_applying_a_remedy_from_a_page_of_an_older_version_saves_nothing(app, as_role):
    submitter = as_role("submitter")
    view = _submit(submitter, _little_slack())
    browser = sign_in(app, submitter)
    page = browser.text(_start(browser, view["id"], "remedies"))
    action = APPLY_FORM.findall(page)[0][0]
    assert browser.post(action, {"version": version_of(page)}).status_code == 303

    again = browser.post(action, {"version": version_of(page)})

    assert again.status_code == 409 and "changed after you opened the page" in again.get_data(as_text=True)
    assert submitter.get(url(view["id"])).get_json()["revision"] == 2


@pytest.mark.parametrize("role", ["reviewer", "submitter"])
def test_who_may_not_revise_sees_no_apply_button_and_a_forged_form_is_refused(app, as_role, role):
    # Given the little-slack quote, and a reviewer or another submitter (not the one who sent it)
    view = _submit(as_role("submitter"), _little_slack())
    other = sign_in(app, as_role(role))
    page = other.text(_start(other, view["id"], "remedies"))
    remedy = _remedies_of("little-slack")["remedies"][0]

    # Then they see the remedies but no button to apply one
    assert remedy["id"] in page and APPLY_BUTTON not in page
    assert "Only the quote's original submitter (or an admin) may apply a remedy" in page

    # and a form they forge is refused, with nothing revised
    forged = other.post(f"/ui/submissions/{view['id']}/remedies/{remedy['id']}/revision", {"version": "1"})
    assert forged.status_code == 403 and forged.mimetype == "text/html"
    assert as_role("reviewer").get(url(view["id"])).get_json()["revision"] == 1


def test_every_button_without_the_csrf_token_is_refused_and_starts_nothing(app, as_role):
    submitter = as_role("submitter")
    view = _submit(submitter, _little_slack())
    browser = sign_in(app, submitter)
    remedy = _remedies_of("little-slack")["remedies"][0]

    for path in ("searches", "remedies", f"remedies/{remedy['id']}/revision"):
        response = browser.post(f"/ui/submissions/{view['id']}/{path}", {"version": "1"}, csrf=False)
        assert response.status_code == 403, path
        assert "CSRF check" in response.get_data(as_text=True)
        forged = browser.post(f"/ui/submissions/{view['id']}/{path}", {"version": "1", "csrf_token": "x" * 43},
                              csrf=False)
        assert forged.status_code == 403, path

    assert submitter.get(url(view["id"])).get_json()["revision"] == 1
    actions = {event["action"] for event in submitter.get(url(view["id"], "audit")).get_json()["events"]}
    assert "submission.created" in actions and not actions & {"search.requested", "remedies.requested"}


def test_the_task_limit_is_a_page_that_says_when_to_ask_again(make_app):
    # Given a service whose tasks stay queued, and a user who may have one task queued at a time
    app = make_app(MAX_ACTIVE_TASKS_PER_USER=1)
    tasks_port.register(app, QueueWithoutWorkers())
    submitter = caller_for(app)
    view = _submit(submitter, _document())
    browser = sign_in(app, submitter)
    _start(browser, view["id"], "searches")

    # When they start a second task from the page
    response = browser.post(f"/ui/submissions/{view['id']}/remedies")

    # Then the answer is a page (429, with Retry-After), not an error of the server
    assert response.status_code == 429 and response.mimetype == "text/html"
    assert response.headers["Retry-After"] == str(app.config["TASK_LIMIT_RETRY_AFTER_S"])
    assert "MAX_ACTIVE_TASKS_PER_USER" in response.get_data(as_text=True)


def test_a_task_page_shows_only_a_search_of_that_submission_to_who_may_see_it(app, as_role):
    # Given two vendors' quotes, each searched by its vendor (scope own)
    acme, globex = token_for(app, "acme", "submitter", scope="own"), token_for(app, "globex", "submitter", scope="own")
    ours, theirs = _submit(acme, _document()), _submit(globex, _little_slack())
    acme_browser, globex_browser = sign_in(app, acme), sign_in(app, globex)
    search_page = _start(acme_browser, ours["id"], "searches")
    remedies_page = _start(acme_browser, ours["id"], "remedies")
    search_task = search_page.rsplit("/", 1)[1]
    remedies_task = remedies_page.rsplit("/", 1)[1]

    # Then the other vendor gets 404 for them, and for the same task under their own quote
    assert globex_browser.get(search_page).status_code == 404
    assert globex_browser.get(f"/ui/submissions/{theirs['id']}/searches/{search_task}").status_code == 404
    # ... a task under a quote it did not search, or of the other kind, is 404 even to its owner's reviewer
    reviewer = sign_in(app, as_role("reviewer"))
    assert reviewer.get(f"/ui/submissions/{theirs['id']}/searches/{search_task}").status_code == 404
    assert reviewer.get(f"/ui/submissions/{ours['id']}/searches/{remedies_task}").status_code == 404
    assert reviewer.get(f"/ui/submissions/{ours['id']}/remedies/{search_task}").status_code == 404
    assert reviewer.get(search_page).status_code == 200
    missing = reviewer.get(f"/ui/submissions/{ours['id']}/searches/no-such-task")
    assert missing.status_code == 404 and "<h1>" in missing.get_data(as_text=True)


def test_a_quote_with_nothing_to_search_is_told_so_on_a_page(app, as_role):
    view = _submit(as_role("submitter"), _document(SERVING_ONLY))
    reviewer = sign_in(app, as_role("reviewer"))

    response = reviewer.post(f"/ui/submissions/{view['id']}/searches")

    assert response.status_code == 422 and response.mimetype == "text/html"
    assert "has nothing to search" in response.get_data(as_text=True)


def test_remedies_of_an_older_revision_have_no_apply_button(app, as_role):
    # Given remedies found for revision 1, and the quote revised since by one of them
    submitter = as_role("submitter")
    view = _submit(submitter, _little_slack())
    browser = sign_in(app, submitter)
    old_page = _start(browser, view["id"], "remedies")
    page = browser.text(old_page)
    assert browser.post(APPLY_FORM.findall(page)[0][0], {"version": version_of(page)}).status_code == 303

    # Then the page of revision 1's remedies says so and offers none to apply
    page = browser.text(old_page)
    assert "is of revision 1; the quote is at revision 2 now" in page and APPLY_BUTTON not in page


def test_a_failed_search_says_why_on_its_page(make_app):
    # Given a search that a worker took and failed (its end recorded as a problem)
    app = make_app()
    tasks_port.register(app, QueueWithoutWorkers())
    submitter = caller_for(app)
    view = _submit(submitter, _document())
    browser = sign_in(app, submitter)
    task_page = _start(browser, view["id"], "searches")
    with app.app_context():
        task_runs.fail(task_page.rsplit("/", 1)[1], RuntimeError("the worker ran out of memory"))

    # Then its page says the search failed and why, and no longer reloads itself
    response = browser.get(task_page)
    page = response.get_data(as_text=True)
    assert response.status_code == 200 and "Refresh" not in response.headers
    assert "The layout search failed" in page and 'data-task-state="FAILURE"' in page and 'id="best-h"' not in page
    detail = submitter.get(f"/api/v1/tasks/{task_page.rsplit('/', 1)[1]}").get_json()["error"]["detail"]
    assert detail and detail in _between(page, 'data-task-state="FAILURE"', "</div>")

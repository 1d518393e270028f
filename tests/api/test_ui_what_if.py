"""The what-if page (service/ui/what_if.py) through Flask's test client: the levers as query parameters, the
outcome, where the verdict flips, the chart, and a parameter out of range named in a 422 page."""

from __future__ import annotations

import json
import re
from pathlib import Path

from api_support import token_for
from ui_support import sign_in

FIRST_QUOTE = Path(__file__).parents[2] / "examples" / "hgx-h200-8b-first-quote.json"


def test_the_what_if_page_recomputes_with_the_levers_and_says_where_the_verdict_flips(app, as_role):
    # Given the first quote of the examples (8 x HGX-H200, Llama-3-8B, a 30-day window) and a reviewer signed in
    response = as_role("submitter").post("/api/v1/submissions", json=json.loads(FIRST_QUOTE.read_text()))
    assert response.status_code == 201, response.get_json()
    view = response.get_json()
    browser = sign_in(app, as_role("reviewer"))
    page_url = f"/ui/submissions/{view['id']}/what-if"

    # When the reviewer opens its what-if page as submitted, then with a 10-day window
    as_submitted = browser.text(page_url)
    shorter = browser.text(page_url + "?window_days=10")

    # Then both say where time-to-result flips on MFU, nodes and window, and draw days against MFU
    for shown in (as_submitted, shorter):
        assert "time-to-result fails below MFU" in shown or "fails at every MFU" in shown
        assert "time-to-result fails with a window shorter than" in shown
        assert '<svg xmlns="http://www.w3.org/2000/svg" class="chart"' in shown
    # and the window set is shown and judged: the run misses a 10-day window
    assert 'value="10.0"' in shorter
    assert "misses-window" in shorter
    # and the submission itself is unchanged: its page still shows revision 1
    assert "revision 1" in browser.text(f"/ui/submissions/{view['id']}")


def test_a_lever_out_of_range_is_a_422_page_naming_it(app, as_role, submitted):
    _, view = submitted
    browser = sign_in(app, as_role("reviewer"))
    for query, name in (("mfu_percent=120", "mfu_percent"), ("nodes=2.5", "nodes"), ("window_days=nan", "window_days")):
        response = browser.get(f"/ui/submissions/{view['id']}/what-if?{query}")
        assert response.status_code == 422, query
        assert re.search(rf"{name} must be", response.get_data(as_text=True)), query


def test_the_what_if_of_another_vendors_quote_is_not_found(app, submitted):
    _, view = submitted
    other = sign_in(app, token_for(app, "Other Vendor", "submitter", scope="own"))
    assert other.get(f"/ui/submissions/{view['id']}/what-if").status_code == 404

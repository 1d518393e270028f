"""End to end in headless chromium against the app under gunicorn with a Celery worker on Redis.

A vendor writes a first quote with the form, runs the layout search from its page (seeing it queued while the
worker is held, then its best layout), moves its MFU on the what-if page (recomputed in place), finds the
remedies of a second quote and applies the best as a revision, and submits the failing example by pasting it; a
reviewer opens that from the queue and waives a check; the vendor revises; a different approver approves it
from the queue; the signed PDF, which the worker renders while the page says so, downloads without a reload and
verifies; then three quotes are compared (the waived, the remedied, one that fails), the failing one listed
apart with its reason, and the comparison downloads as CSV. Every page is screenshotted into
test-artifacts/browser/ and scanned with axe-core, which must report no serious or critical violation.
"""

from __future__ import annotations

import copy
import csv
import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from browser_support import ARTIFACTS, ROOT

expect = pytest.importorskip("playwright.sync_api",
                             reason="the playwright package is not installed (pip install -e '.[dev]')").expect

EXAMPLE = ROOT / "examples" / "fail-70b-ddp-one-rack.json"
JUSTIFICATION = "The facility adds a third 17.3 kW feed to the rack before delivery (site survey of 2026-11-20)."
BLOCKING_IMPACTS = ("serious", "critical")


class Tour:
    """Walks the pages: each page visited is screenshotted and scanned; CSP reports on the console are kept."""

    def __init__(self, page: Any, url: str, axe_source: str) -> None:
        self.page, self.url, self.axe_source = page, url, axe_source
        self.shots: list[Path] = []
        self.violations: dict[str, list[dict[str, Any]]] = {}
        self.console: list[str] = []
        page.on("console", lambda message: self.console.append(message.text))
        page.on("dialog", lambda dialog: dialog.accept())

    def go(self, path: str) -> None:
        self.page.goto(self.url + path)

    def record(self, name: str) -> None:
        """Screenshots the page as ``<n>-<name>.png`` and scans it with axe-core."""
        self.page.wait_for_load_state("load")
        shot = ARTIFACTS / f"{len(self.shots) + 1:02d}-{name}.png"
        self.page.screenshot(path=str(shot), full_page=True)
        self.shots.append(shot)
        self.page.evaluate(self.axe_source)
        results = self.page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
        found = [{"id": v["id"], "impact": v["impact"], "help": v["help"],
                  "targets": [n["target"] for n in v["nodes"]][:5]}
                 for v in results["violations"] if v["impact"] in BLOCKING_IMPACTS]
        if found:
            self.violations[f"{name} ({self.page.url})"] = found

    def sign_in(self, token: str) -> None:
        """Signs in with the keyboard: the token typed into its field, Enter sends the form."""
        self.go("/ui/sign-in")
        self.page.focus("#token")
        self.page.keyboard.type(token)
        self.page.keyboard.press("Enter")
        self.page.wait_for_url("**/ui/queue/**")

    def sign_out(self) -> None:
        self.page.click("button:has-text('Sign out')")
        self.page.wait_for_url("**/ui/sign-in**")

    def open_from_queue(self, slug: str, quote_id: str) -> None:
        self.go(f"/ui/queue/{slug}")
        self.record(f"queue-{slug}")
        self.page.click(f"table.queue a:has-text('{quote_id}')")
        self.page.wait_for_url("**/ui/submissions/**")


def _verify(pdf: Path, server: Any) -> str:
    """Returns the command line's verdict on a downloaded PDF, checked with the service's published certificate."""
    with urllib.request.urlopen(server.url + "/api/v1/keys", timeout=30) as response:
        keys = json.loads(response.read())
    certificate = pdf.with_name("service.cert.pem")
    certificate.write_text(keys["keys"][0]["certificate_pem"])
    done = subprocess.run([sys.executable, "-m", "service.cli", "verify", str(pdf), "--key", str(certificate)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# 8 x HGX-H200 training Llama-3-8B on 1T tokens in 30 days, as examples/hgx-h200-8b-first-quote.json has it
FORM_QUOTE = {
    "#vendor": "First Quote Ltd", "#quote_id": "FQ-1", "#node_count": "8", "#storage_capacity_tb": "2000",
    "#storage_read_gbs": "40", "#storage_write_gbs": "20", "#sequence_length": "8192", "#micro_batch": "1",
    "#global_batch": "512", "#dataset_tokens": "1e12", "#completion_window_days": "30", "#gpus": "64",
    "#tensor_parallel": "1", "#pipeline_parallel": "1", "#checkpoint_interval_min": "120",
    "#checkpoint_max_save_s": "120"}
FORM_CHOICES = {"#server_model": "HGX-H200-8GPU", "#storage_kind": "parallel-fs", "#model_name": "Llama-3-8B",
                "#objective": "pretraining", "#precision": "bf16-mixed", "#optimizer": "adamw", "#sharding": "zero1",
                "#offload": "none", "#activation_checkpointing": "none", "#flash_attention": "yes",
                "#checkpoint_gradients": "yes"}


def _write_a_quote_with_the_form(tour: Tour) -> str:
    """Submits the first quote through the form; returns its page's path."""
    page = tour.page
    page.click("nav >> text=Submit a quote")
    tour.record("new-submission")
    for field, value in FORM_CHOICES.items():
        page.select_option(field, value)
    for field, value in FORM_QUOTE.items():
        page.fill(field, value)
    tour.record("form-filled")
    page.click("button:has-text('Submit the form')")
    page.wait_for_url("**/ui/submissions/**?done=submitted")
    assert page.locator("text=The quote was submitted and evaluated.").is_visible()
    tour.record("form-submitted")
    return page.url.split("?")[0].removeprefix(tour.url)


def _what_if(tour: Tour, quote_path: str) -> None:
    """Moves the MFU on the quote's what-if page: the page recomputes in place and says where the verdict flips."""
    page = tour.page
    tour.go(quote_path)
    page.click("a:has-text('What if')")
    page.wait_for_url("**/what-if")
    assert "time-to-result fails below MFU" in page.locator("#what-if-flips").inner_text()
    before = page.locator("#what-if-days").inner_text()
    page.evaluate("window.notReloaded = true")
    page.fill("#mfu_percent", "30")
    page.press("#mfu_percent", "Tab")  # the field's change recomputes the page in place
    expect(page).to_have_url(re.compile(r"mfu_percent=30"))
    expect(page.locator("#what-if-days")).not_to_have_text(before)
    assert page.evaluate("window.notReloaded === true")
    assert "FAIL" in page.locator("#what-if-verdict").inner_text()
    tour.record("what-if")


def _held(tour: Tour, worker: Any, button: str, done: str, name: str) -> None:
    """Starts a task with ``button`` while the worker is held, so its page shows it queued with its progress; then
    lets the worker go on and waits until the page, reloading itself, shows ``done``."""
    page = tour.page
    worker.pause()
    try:
        page.click(f"button:has-text('{button}')")
        page.wait_for_selector("[data-task-state]")
        assert "done" in page.locator("[data-task-state]").inner_text()
        tour.record(f"{name}-queued")
    finally:
        worker.resume()
    page.wait_for_selector(done, timeout=120_000)
    tour.record(name)


def _search_layouts(tour: Tour, worker: Any, quote_path: str) -> None:
    """Runs the layout search from the quote's page: its progress, then the best layout with its days and MFU."""
    tour.go(quote_path)
    _held(tour, worker, "Search layouts", "#best-h", "layout-search")
    assert tour.page.locator("dd.days").first.inner_text().strip()
    assert "%" in tour.page.locator("dd.mfu").first.inner_text()


def _find_and_apply_a_remedy(tour: Tour, worker: Any, quote_id: str) -> None:
    """Finds the remedies of a quote from its page and applies the best one as its next revision."""
    page = tour.page
    tour.open_from_queue("mine", quote_id)
    _held(tour, worker, "Find remedies", "article.remedy", "remedies")
    best = page.locator("article.remedy").first
    assert "PASS" in best.inner_text().upper()
    best.locator("button:has-text('Apply this remedy')").click()
    page.wait_for_url("**done=remedy-applied**")
    assert page.locator("text=The remedy was applied").is_visible()
    tour.record("remedy-applied")


def _compare_three(tour: Tour, quote_ids: dict[str, str]) -> None:
    """Compares the waived, the remedied and the failing quote: the failing one is listed apart with its reason,
    the other two ranked, the cheapest that passes named; the comparison downloads as CSV."""
    page = tour.page
    page.click("nav >> text=Compare")
    tour.record("compare-picker")
    for label in quote_ids.values():
        page.check(f"label:has-text('{label}')")
    page.click("button:has-text('Compare the picked quotes')")
    assert page.locator("table.compare tbody tr").count() == 3
    tour.record("compare")
    page.click("button:has-text('Rank them')")
    page.wait_for_selector("#cheapest-that-passes", timeout=120_000)
    tour.record("ranking")
    ranked, apart = page.locator("table#ranked-quotes").inner_text(), page.locator("table#not-ranked-quotes")
    assert quote_ids["waived"] in ranked and quote_ids["remedied"] in ranked
    assert quote_ids["failing"] not in ranked and quote_ids["failing"] in apart.inner_text()
    assert "peak-memory" in apart.locator("code.check-id").all_inner_texts()
    cheapest = page.locator("#cheapest-that-passes").inner_text()
    assert cheapest.startswith("Cheapest that passes: ") and any(q in cheapest for q in quote_ids.values()), cheapest
    with page.expect_download() as download:
        page.click("a#ranking-csv")
    table = ARTIFACTS / "comparison.csv"
    download.value.save_as(str(table))
    rows = list(csv.DictReader(table.read_text(encoding="utf-8").splitlines()))
    assert len(rows) == 3 and [row["rank"] for row in rows] == ["1", "2", ""]
    assert all(float(row["days_p50"]) > 0 for row in rows if row["rank"])


def test_submit_waive_revise_approve_and_verify_in_the_browser(page, server, axe_source):
    tour = Tour(page, server.url, axe_source)
    document = json.loads(EXAMPLE.read_text())
    quote_id = document["quote"]["quote_id"]
    # A second quote for the same job, from another vendor, for the Compare page
    other = copy.deepcopy(document)
    other["quote"].update(vendor="Second Source GmbH", quote_id="SS-2026-17")
    other["workload"]["training"]["parallelism"]["sharding"] = "fsdp-full"
    server.api("POST", "/api/v1/submissions", "submitter", other)
    # A third, under plain DDP as the example has it: peak-memory fails, so it cannot be ranked
    failing = copy.deepcopy(document)
    failing["quote"].update(vendor="Third Way AB", quote_id="TW-2026-9")
    server.api("POST", "/api/v1/submissions", "submitter", failing)

    # The landing page points to the pages; Tab reaches the skip link first
    tour.go("/")
    tour.record("landing")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    tour.go("/ui/sign-in")
    tour.record("sign-in")

    # The vendor signs in, writes a first quote with the form, searches its layouts and tries what-ifs on it
    tour.sign_in(server.tokens["submitter"])
    tour.record("queue-mine")
    first_quote = _write_a_quote_with_the_form(tour)
    _search_layouts(tour, server.worker, first_quote)
    _what_if(tour, first_quote)
    # finds the remedies of the second source's quote and applies the best
    _find_and_apply_a_remedy(tour, server.worker, "SS-2026-17")

    # and submits the failing example by pasting it
    page.click("nav >> text=Submit a quote")
    page.fill("#document", json.dumps(document, indent=2))
    page.click("button:has-text('Submit and evaluate')")
    page.wait_for_url("**/ui/submissions/**?done=submitted")
    submission_url = page.url.split("?")[0]
    assert page.locator("text=The quote was submitted and evaluated.").is_visible()
    assert page.locator("button[value='approve']").count() == 0
    tour.record("submission-as-submitter")
    tour.sign_out()

    # A reviewer opens it from the queue and waives rack-power with a justification
    tour.sign_in(server.tokens["reviewer"])
    tour.open_from_queue("review", quote_id)
    tour.record("submission-as-reviewer")
    page.fill("#justification-rack-power", JUSTIFICATION)
    page.click("button:has-text('Waive rack-power')")
    page.wait_for_url("**done=waived**")
    assert "counted as" in page.locator("#check-rack-power .check-status").inner_text()
    tour.record("submission-waived")
    page.click("text=audit trail")
    tour.record("audit-trail")
    tour.sign_out()

    # The vendor revises the sharding to fsdp-full, which settles the memory checks
    tour.sign_in(server.tokens["submitter"])
    tour.go(submission_url.removeprefix(server.url))
    page.click("summary:has-text('Send a revised quote')")
    revised = copy.deepcopy(document)
    revised["workload"]["training"]["parallelism"]["sharding"] = "fsdp-full"
    page.fill("#revise-document", json.dumps(revised))
    page.click("button:has-text('Submit revision 2')")
    page.wait_for_url("**done=revised**")
    page.click("button:has-text('Show the changed checks')")
    assert page.locator("h2:has-text('peak-memory')").count() == 1
    tour.record("revision-diff")
    tour.sign_out()

    # A different user, an approver, approves it from the approval queue; the worker is held meanwhile, so the
    # signed PDF it renders is not there yet when the approver first asks for it
    tour.sign_in(server.tokens["approver"])
    tour.open_from_queue("approval", quote_id)
    server.worker.pause()
    page.click("button:has-text('Approve revision 2')")
    page.wait_for_url("**done=approve**")
    assert "approved (final)" in page.locator("dl.facts:not(.lead)").inner_text()
    approved_url = page.url
    tour.record("submission-approved")

    # The link answers with a page saying the PDF is being rendered; once the worker goes on, the page reloads
    # itself into the signed PDF, which downloads and verifies against the published certificate
    page.click("a:has-text('final record (PDF, signed)')")
    page.wait_for_selector("h1:has-text('Rendering the signed PDF')")
    tour.record("pdf-rendering")
    with page.expect_download(timeout=120_000) as download:
        server.worker.resume()
    pdf = ARTIFACTS / "commissioning-record.pdf"
    download.value.save_as(str(pdf))
    assert pdf.read_bytes().startswith(b"%PDF")
    verdict = _verify(pdf, server)
    assert verdict.startswith("VALID"), verdict
    page.goto(approved_url)

    # The approver links the purchase order, then compares three quotes and ranks those that pass
    page.fill("#po-number", "PO-2026-0042")
    page.fill("#po-system", "SAP")
    page.click("button:has-text('Link purchase order')")
    page.wait_for_url("**done=purchase-order**")
    tour.record("purchase-order-linked")
    _compare_three(tour, {"waived": quote_id, "remedied": "SS-2026-17", "failing": "TW-2026-9"})
    tour.go("/ui/submissions/no-such-quote")
    tour.record("not-found")

    assert not tour.violations, json.dumps(tour.violations, indent=1)
    assert not [line for line in tour.console if "Content Security Policy" in line], tour.console
    assert all(shot.stat().st_size > 0 for shot in tour.shots)


def test_the_accessibility_scan_reports_what_it_is_there_to_find(page, axe_source):
    # Given a page with an unlabelled field and an image without a text alternative
    page.set_content('<html><head><title>t</title></head><body><main><input id="x"><img src="data:,">'
                     "</main></body></html>")

    # When axe-core scans it as it scans every page above
    page.evaluate(axe_source)
    results = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")

    # Then it reports both as critical: a scan that finds nothing above has looked
    found = {v["id"]: v["impact"] for v in results["violations"]}
    assert found.get("label") == "critical" and found.get("image-alt") == "critical"

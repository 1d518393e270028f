"""Two GETs at once of a hostile draft, over HTTP, on gunicorn's sync workers as deploy/gunicorn.conf.py runs them.

A submitter's notes of 20,000 newlines once laid out as 351 pages, and each GET of the draft rendered it
again for 17 s: two such GETs held both API workers. Now the notes are cut in the PDF and the draft is
rendered once; this test asks for it twice at once while it polls ``/healthz``.

No timed assertion here is tight: the bound is a multiple of one render of a bounded record (the same
example's draft without notes) measured in this process on this machine, under whatever load it carries.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.request
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from gunicorn_support import gunicorn_process
from pyhanko.pdf_utils.reader import PdfFileReader

from rules.evaluate import evaluate
from service.record.render import draft_pdf, warm_up

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "h200-128node-pretraining.json"
HOSTILE_NOTES = "\n" * 20_000
MAX_PAGES = 40  # issue 13: no GET of any record costs more than a render of a 40-page record
# How many renders of a bounded record a GET or /healthz may take here: one render, plus the time its twin
# waits, plus a machine shared with other work. The unbounded draft took about 17 renders.
BOUND_RENDERS = 5
WORKERS = 2  # as many sync workers as the requests at once: the case that held every worker before


def _get(url: str, token: str | None = None, timeout: float = 120) -> tuple[int, bytes, float]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, response.read(), time.perf_counter() - start


def _bounded_render_s() -> float:
    """Returns the seconds of one in-process render of the example's draft (a bounded record of 20 pages)."""
    record = evaluate(json.loads(EXAMPLE.read_text()))
    warm_up()
    start = time.perf_counter()
    draft_pdf(record)
    return time.perf_counter() - start


@pytest.fixture
def gunicorn(app: Any, database_url: str, tmp_path: Path) -> Any:
    """Yields the base URL of gunicorn serving ``app``'s database and instance with deploy/gunicorn.conf.py."""
    log = tmp_path / "gunicorn.log"
    settings = {"DATABASE_URL": database_url, "INSTANCE_PATH": app.instance_path}
    with gunicorn_process(settings, log, workers=WORKERS) as (port, server):
        yield f"http://127.0.0.1:{port}", server, log


def test_two_gets_at_once_of_a_hostile_draft_answer_within_a_bounded_render_and_healthz_answers(
        gunicorn: Any, as_role: Any, tmp_path: Path) -> None:
    tool = shutil.which("pdftotext")
    if tool is None:
        pytest.skip("pdftotext is not installed (apt-get install -y poppler-utils)")
    # Given a draft whose notes hold 20,000 newlines, never read yet, and the time a bounded record renders in
    base, server, log = gunicorn
    submitter = as_role("submitter")
    document = json.loads(EXAMPLE.read_text())
    document["quote"]["notes"] = HOSTILE_NOTES
    created = submitter.post("/api/v1/submissions", json=document)
    assert created.status_code == 201, created.get_json()
    pdf_url = f"{base}/api/v1/records/{created.get_json()['evaluation']['record_id']}.pdf"
    bound_s = BOUND_RENDERS * _bounded_render_s()

    # When two readers GET it at once, while /healthz is asked every 0.2 s
    answers: list[tuple[int, bytes, float]] = []
    readers = [threading.Thread(target=lambda: answers.append(_get(pdf_url, submitter.token))) for _ in range(2)]
    for reader in readers:
        reader.start()
    health: list[float] = []
    while any(reader.is_alive() for reader in readers):
        status, _, took = _get(f"{base}/healthz")
        assert status == 200
        health.append(took)
        time.sleep(0.2)
    for reader in readers:
        reader.join()

    # Then both answer the same bounded draft within the bound, /healthz answered meanwhile, no worker died
    assert [status for status, _, _ in answers] == [200, 200] and answers[0][1] == answers[1][1]
    slowest = max(took for _, _, took in answers)
    assert slowest <= bound_s, f"a GET took {slowest:.1f} s, over {BOUND_RENDERS} bounded renders ({bound_s:.1f} s)"
    assert health and max(health) <= bound_s, f"/healthz took up to {max(health):.1f} s (bound {bound_s:.1f} s)"
    pdf = answers[0][1]
    assert int(PdfFileReader(BytesIO(pdf)).root["/Pages"]["/Count"]) <= MAX_PAGES
    source = tmp_path / "draft.pdf"
    source.write_bytes(pdf)
    text = subprocess.run([tool, str(source), "-"], capture_output=True, text=True, check=True, timeout=60).stdout
    assert "… truncated: 20,000 lines / 20,000 characters; the attached JSON holds the whole text" in " ".join(
        text.split())
    assert server.poll() is None
    assert "WORKER TIMEOUT" not in log.read_text(errors="replace")

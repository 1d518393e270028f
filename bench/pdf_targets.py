"""`python -m bench pdf-targets`: the record PDF's cost against references measured beside it in one run.

Three targets (issue 13), each a ratio of medians taken in this process, alternating with the reference:

- render + sign of the H200 example's approved record ≤ 30 × a one-page WeasyPrint render (the page
  ``render.warm_up`` renders: the record stylesheet, its margin boxes, a line of text);
- a cached DRAFT GET (``GET /api/v1/records/{id}.pdf`` of the example's evaluation record, already
  rendered once) ≤ 1 × the in-process evaluation of the same example;
- no GET of a record costs more than one render of a 40-page record: the first GET of a draft whose notes
  hold 20,000 newlines (rendered then, the costliest draft), and render + sign (what the first GET of an
  approved record costs without a broker), each against a 40-page record (the H200 record with its check
  sections repeated until it lays out as 40 pages or more).

The API runs in this process on a SQLite file in a temporary folder (Flask's test client: no network).
"""

from __future__ import annotations

import copy
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import Any

from rules.evaluate import default_engine, evaluate

ROOT = Path(__file__).resolve().parent.parent
RECORD_EXAMPLE = ROOT / "examples" / "h200-128node-pretraining.json"
ONE_PAGE_TARGET = 30.0  # render + sign ≤ 30 one-page renders
CACHED_GET_TARGET = 1.0  # a cached draft GET ≤ 1 evaluation
REFERENCE_PAGES = 40  # no GET costs more than one render of a 40-page record
HOSTILE_NOTES = "\n" * 20_000
REPEATS = 7


def _pages(pdf: bytes) -> int:
    from pyhanko.pdf_utils.reader import PdfFileReader

    return int(PdfFileReader(BytesIO(pdf)).root["/Pages"]["/Count"])


def _side_by_side(subject: Callable[[], object], reference: Callable[[], object], repeats: int,
                  reference_repeats: int = 1) -> tuple[float, float]:
    """Returns the median seconds of ``subject`` and of ``reference``, run alternately after one warm-up each."""
    subject()
    reference()
    subjects, references = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        subject()
        subjects.append(time.perf_counter() - start)
        for _ in range(reference_repeats):
            start = time.perf_counter()
            reference()
            references.append(time.perf_counter() - start)
    return statistics.median(subjects), statistics.median(references)


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def approved_record() -> dict[str, Any]:
    """Returns the H200 example's record as approved (as bench.record_pdf renders it)."""
    record = evaluate(json.loads(RECORD_EXAMPLE.read_text()))
    return {**record, "record_id": "bench-record",
            "decisions": [{"action": "approve", "actor": "bench", "role": "approver", "at": record["evaluated_at"]}]}


def one_page_html() -> str:
    """Returns the one-page reference: what ``render.warm_up`` renders (the record stylesheet and a line of text)."""
    return ('<html><head><link rel="stylesheet" href="quotecheck-asset:record.css"></head><body class="final">'
            '<p>warm <b>up</b> <span class="mono">0</span><span class="kv">x</span></p></body></html>')


def long_record_html(record: dict[str, Any], pages: int) -> tuple[str, int]:
    """Returns the HTML of ``record`` with its check sections repeated until it lays out as ``pages`` or more,
    and the pages it lays out as."""
    from service.record.render import html_to_pdf, record_html

    html = record_html(record, draft=False)
    start, end = html.index('<section class="check"'), html.index('<section class="appendix"')
    checks = html[start:end]
    copies, laid_out = 1, _pages(html_to_pdf(html, []))
    while laid_out < pages:
        copies = max(copies + 1, int(copies * pages / laid_out + 0.999))
        candidate = html[:start] + checks * copies + html[end:]
        laid_out = _pages(html_to_pdf(candidate, []))
    return html[:start] + checks * copies + html[end:], laid_out


class Api:
    """The API in this process on a SQLite file, with a submitter's token (Flask's test client)."""

    def __init__(self, folder: Path) -> None:
        from service import create_app
        from service.accounts.auth import create_token
        from service.persistence.db import get_db

        self.app = create_app({"INSTANCE_PATH": str(folder / "instance"),
                               "DATABASE_URL": f"sqlite:///{folder / 'bench.sqlite3'}"})
        with self.app.app_context(), get_db(self.app).session() as session:
            _, self.token = create_token(session, "bench-submitter", "submitter", datetime.now(UTC))
            session.commit()
        self.client = self.app.test_client()

    def submit(self, document: dict[str, Any]) -> str:
        """Returns the evaluation record id of ``document`` submitted."""
        response = self.client.post("/api/v1/submissions", json=document, headers=self._auth())
        if response.status_code != 201:
            raise RuntimeError(f"submission refused: {response.status_code} {response.get_data(as_text=True)[:300]}")
        return response.get_json()["evaluation"]["record_id"]

    def get_pdf(self, record_id: str) -> bytes:
        response = self.client.get(f"/api/v1/records/{record_id}.pdf", headers=self._auth())
        if response.status_code != 200:
            raise RuntimeError(f"GET {record_id}.pdf: {response.status_code}")
        return response.data

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def run() -> list[bool]:
    """Measures the three targets, prints each with its figures and met or missed; returns the verdicts."""
    from service.record import SigningKeys
    from service.record.render import html_to_pdf, signed_pdf, warm_up

    warm_up()
    record, keys = approved_record(), SigningKeys.generate()
    one_page = one_page_html()
    verdicts = []

    # 1. render + sign against a one-page render
    pdf = signed_pdf(record, keys)
    sign_s, page_s = _side_by_side(lambda: signed_pdf(record, keys), lambda: html_to_pdf(one_page, []), REPEATS,
                                   reference_repeats=3)
    ratio = sign_s / page_s
    verdicts.append(ratio <= ONE_PAGE_TARGET)
    print(f"render + sign of {RECORD_EXAMPLE.name} ({_pages(pdf)} pages): median {sign_s * 1000:.0f} ms; a one-page "
          f"render: median {page_s * 1000:.1f} ms; {ratio:.1f} one-page renders (target ≤ {ONE_PAGE_TARGET:g}, ratio "
          f"{ratio / ONE_PAGE_TARGET:.2f}) {_verdict(verdicts[-1])}")

    with tempfile.TemporaryDirectory(prefix="quotecheck-bench-") as folder:
        api = Api(Path(folder))
        document = json.loads(RECORD_EXAMPLE.read_text())
        # 2. a cached draft GET against one evaluation
        draft_id = api.submit(document)
        draft = api.get_pdf(draft_id)  # rendered and stored here
        engine = default_engine()
        get_s, evaluation_s = _side_by_side(lambda: api.get_pdf(draft_id), lambda: evaluate(document, engine=engine),
                                            REPEATS * 3)
        ratio = get_s / evaluation_s
        verdicts.append(ratio <= CACHED_GET_TARGET)
        print(f"cached DRAFT GET of {RECORD_EXAMPLE.name}'s record ({_pages(draft)} pages, {len(draft):,} bytes): "
              f"median {get_s * 1000:.1f} ms; its in-process evaluation: median {evaluation_s * 1000:.1f} ms; "
              f"{ratio:.2f} evaluations (target ≤ {CACHED_GET_TARGET:g}, ratio {ratio / CACHED_GET_TARGET:.2f}) "
              f"{_verdict(verdicts[-1])}")

        # 3. the costliest GETs against one render of a 40-page record
        long_html, long_pages = long_record_html(record, REFERENCE_PAGES)
        hostile_ids = []
        for index in range(3):
            hostile = copy.deepcopy(document)
            hostile["quote"]["notes"] = HOSTILE_NOTES
            hostile["quote"]["quote_id"] = f"{document['quote']['quote_id']}-NOTES-{index}"
            hostile_ids.append(api.submit(hostile))
        first_gets, references, hostile_pages = [], [], 0
        for record_id in hostile_ids:
            start = time.perf_counter()
            hostile_pdf = api.get_pdf(record_id)  # its first GET: rendered now
            first_gets.append(time.perf_counter() - start)
            hostile_pages = _pages(hostile_pdf)
            start = time.perf_counter()
            html_to_pdf(long_html, [])
            references.append(time.perf_counter() - start)
        hostile_s, long_s = statistics.median(first_gets), statistics.median(references)
        worst = max(hostile_s, sign_s)
        verdicts.append(worst <= long_s)
        print(f"first DRAFT GET with 20,000-line notes ({hostile_pages} pages): median {hostile_s * 1000:.0f} ms; "
              f"render + sign of an approved record (its first GET without a broker): {sign_s * 1000:.0f} ms; a "
              f"{long_pages}-page record: median {long_s * 1000:.0f} ms; the costliest GET is {worst / long_s:.2f} of "
              f"it (target ≤ 1, ratio {worst / long_s:.2f}) {_verdict(verdicts[-1])}")
    return verdicts

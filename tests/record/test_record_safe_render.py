"""Safe rendering: record text is escaped, and the renderer fetches nothing but its own stylesheet.

A real HTTP server listens on an ephemeral loopback port; markup that would make WeasyPrint fetch from it
is put into the submission, and the server must receive no request at all.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from record_support import EXAMPLE, pdftotext

from rules.evaluate import evaluate
from service.record.render import FetchRefused, draft_pdf, html_to_pdf, url_fetcher


class _Recorder(BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        type(self).requests.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/css")
        self.end_headers()
        self.wfile.write(b"body { background: red }")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    """Yields the base URL of a listening HTTP server and the paths it was asked for."""
    handler = type("Recorder", (_Recorder,), {"requests": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler.requests
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def test_hostile_submission_text_renders_literally_and_fetches_nothing(server: tuple[str, list[str]],
                                                                        tmp_path: Path) -> None:
    base, requests = server
    vendor = f'<img src="{base}/x">'
    notes = '<link rel=stylesheet href="file:///etc/passwd">'
    quote_id = f'<object data="{base}/q"></object>'
    submission = json.loads(EXAMPLE.read_text())
    submission["quote"].update(vendor=vendor, notes=notes, quote_id=quote_id)
    submission["quote"]["racks"][0]["name"] = f'<svg onload="fetch(\'{base}/r\')">'
    record = evaluate(submission)

    pdf = draft_pdf(record)

    text = pdftotext(pdf, tmp_path)
    assert vendor in text
    assert notes in text
    assert quote_id in text
    assert requests == [], f"the renderer fetched {requests}"


def test_fetcher_serves_only_the_template_stylesheet(server: tuple[str, list[str]]) -> None:
    base, requests = server
    fetcher = url_fetcher()

    assert b"@page" in fetcher.fetch("quotecheck-asset:record.css").read()
    for url in (f"{base}/x", "file:///etc/passwd", "quotecheck-asset:../../pyproject.toml",
                "quotecheck-asset:record.html", "data:text/css,body{}", "ftp://127.0.0.1/x"):
        with pytest.raises(FetchRefused, match="refused to fetch"):
            fetcher.fetch(url)
    assert requests == []


def test_a_url_in_the_template_stops_the_render(server: tuple[str, list[str]]) -> None:
    """Fail closed: if markup ever asked for a URL, the render stops instead of quietly leaving a gap."""
    base, requests = server

    with pytest.raises(FetchRefused, match="refused to fetch"):
        html_to_pdf(f'<html><body><img src="{base}/img.png"></body></html>', [])
    assert requests == []

"""A webhook receiver on 127.0.0.1 (http.server in a thread) that can be taken down and brought back on its port,
and a Standard Webhooks signature check written from the specification, independently of the service's code."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    """One request the receiver got: its headers (lower-case names) and the raw body."""

    headers: dict[str, str]
    body: bytes

    @property
    def event(self) -> dict[str, Any]:
        return json.loads(self.body)


@dataclass
class Receiver:
    """An HTTP server on 127.0.0.1 that records every POST and answers ``status`` (or the next of ``answers``)."""

    port: int = 0
    status: int = 204
    answers: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/quotecheck"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.received.append(Received({k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.answers.pop(0) if receiver.answers else receiver.status
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", receiver.url + "/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._server is not None

    def stop(self) -> None:
        """Takes the receiver down: its port refuses connections until ``start`` brings it back."""
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self._server = None


def signature_is_valid(secret: str, received: Received) -> bool:
    """Returns whether ``webhook-signature`` holds a ``v1`` signature of ``id.timestamp.body`` under ``secret``.

    Standard Webhooks: the key is the base64 after ``whsec_``; the signature is base64 HMAC-SHA256; the header
    may list several space-separated ``v1,<signature>`` values.
    """
    key = base64.b64decode(secret.split("_", 1)[1])
    content = f"{received.headers['webhook-id']}.{received.headers['webhook-timestamp']}.".encode() + received.body
    expected = base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()
    return any(hmac.compare_digest(value.split(",", 1)[1], expected)
               for value in received.headers["webhook-signature"].split() if value.startswith("v1,"))


"""The API under gunicorn as deployed (deploy/gunicorn.conf.py), on a port of its own, for tests over real HTTP."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]
START_S = 60


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def request(port: int, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
            ) -> tuple[int, str, bytes]:
    """Returns (status, Content-Type, body) of one request on a new connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        connection.close()


@contextmanager
def gunicorn_process(settings: dict[str, str], log: Path, workers: int = 1, env: dict[str, str] | None = None,
                     ) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """Runs `gunicorn -c deploy/gunicorn.conf.py service.wsgi:app` with ``settings`` (QUOTECHECK_ names without the
    prefix) and extra ``env``; yields its port and process once /healthz answers; stops it afterwards."""
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("QUOTECHECK_")}
    environment.update({f"QUOTECHECK_{key}": value for key, value in settings.items()})
    environment.update(QUOTECHECK_BIND=f"127.0.0.1:{port}", QUOTECHECK_WORKERS=str(workers), **(env or {}))
    command = [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "service.wsgi:app"]
    with log.open("wb") as output:
        process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_S
        while True:
            try:
                if request(port, "GET", "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.2)
        yield port, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def gunicorn(settings: dict[str, str], log: Path, workers: int = 1, env: dict[str, str] | None = None) -> Iterator[int]:
    """Runs the API under gunicorn as ``gunicorn_process`` does; yields its port."""
    with gunicorn_process(settings, log, workers, env) as (port, _):
        yield port

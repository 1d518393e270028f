"""Fixtures of the browser tests: the app under gunicorn on 127.0.0.1 with a Celery worker process on Redis,
Debian's chromium driven by Playwright, and axe-core from the npm registry.

Nothing here downloads a browser: Playwright drives the ``chromium`` the system has (Debian's package, as
.ci/run installs it) through ``executable_path``. axe-core is installed with npm into ``.test-tools/`` (ignored)
when it is not there yet. Without chromium, Playwright or a reachable npm registry the tests are skipped with
the reason; so are they without Redis on 127.0.0.1:6379 (.ci/run starts it). The worker takes the tasks of
its own queue under its own key prefix, whose keys are deleted afterwards.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from browser_support import ARTIFACTS, AXE, AXE_PACKAGE, ROLES, ROOT, TOOLS

from tests.redis_support import delete_keys, reachable_redis_url


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of the system's chromium."""
    pytest.importorskip("playwright.sync_api",
                        reason="the playwright package is not installed (pip install -e '.[dev]')")
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium; .ci/run does it)")
    return path


@pytest.fixture(scope="session")
def axe_source() -> str:
    """The text of axe-core's axe.min.js, installed from the npm registry into .test-tools/ when missing."""
    if not AXE.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed, so axe-core cannot be installed from the npm registry")
        TOOLS.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run([npm, "install", "--prefix", str(TOOLS), "--no-audit", "--no-fund", "--no-save",
                                   AXE_PACKAGE], capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm install {AXE_PACKAGE} did not finish in 300 s (is the npm registry reachable?)")
        if done.returncode != 0 or not AXE.exists():
            pytest.skip(f"npm install {AXE_PACKAGE} failed (is the npm registry reachable?): {done.stderr[-600:]}")
    return AXE.read_text(encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Worker:
    """``celery -A workers.worker worker`` in a session of its own, which a test may pause to see a task wait."""

    process: subprocess.Popen

    def pause(self) -> None:
        os.killpg(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
        self.process.terminate()  # warm shutdown: the current task finishes first
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


@dataclass
class Server:
    url: str
    tokens: dict[str, str]
    instance: Path
    worker: Worker

    def api(self, method: str, path: str, role: str, body: object = None) -> dict:
        """Returns the JSON answer of an API request made with ``role``'s token."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Authorization": f"Bearer {self.tokens[role]}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())


@pytest.fixture(scope="session")
def celery_settings() -> Iterator[dict[str, str]]:
    """The environment that sends the app's tasks to a queue of its own on Redis; its keys are deleted afterwards."""
    url = reachable_redis_url()
    run = secrets.token_hex(4)
    prefix = {"global_keyprefix": f"qc-browser-{run}:"}
    yield {"QUOTECHECK_CELERY_BROKER_URL": url, "QUOTECHECK_CELERY_RESULT_BACKEND": url,
           "QUOTECHECK_CELERY_QUEUE": f"qc-browser-{run}",
           "QUOTECHECK_CELERY": json.dumps({"broker_transport_options": prefix,
                                            "result_backend_transport_options": prefix})}
    delete_keys(url, prefix["global_keyprefix"])


def _start_worker(env: dict[str, str]) -> Worker:
    """Starts the worker as an operator would, on the app's database, instance folder and queue; waits until ready."""
    log_path = ARTIFACTS / "worker.log"
    command = [sys.executable, "-m", "celery", "-A", "workers.worker", "worker", "--pool=solo", "--concurrency=1",
               "-Q", env["QUOTECHECK_CELERY_QUEUE"], "-n", "browser@%h",
               "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=INFO"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    deadline = time.monotonic() + 60
    while " ready." not in log_path.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the worker did not become ready; see {log_path}")
        time.sleep(0.2)
    return Worker(process)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, celery_settings: dict[str, str]) -> Iterator[Server]:
    """The app under gunicorn (deploy/gunicorn.conf.py, two workers) on a fresh SQLite database, with a token for
    each of ROLES' users, and one Celery worker process that runs its tasks from Redis."""
    from service import create_app
    from service.accounts.auth import create_token
    from service.persistence.db import get_db

    home = tmp_path_factory.mktemp("browser")
    instance, database = home / "instance", f"sqlite:///{home / 'quotecheck.sqlite3'}"
    app = create_app({"INSTANCE_PATH": str(instance), "DATABASE_URL": database})
    tokens = {}
    with app.app_context(), get_db(app).session() as session:
        for role, name in ROLES.items():
            _, tokens[role] = create_token(session, name, role, datetime.now(UTC))
        session.commit()
    get_db(app).engine.dispose()
    port = _free_port()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for stale in ARTIFACTS.glob("*.png"):  # a run's screenshots are its own
        stale.unlink()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("QUOTECHECK_")}, **celery_settings,
           "PYTHONPATH": str(ROOT), "QUOTECHECK_INSTANCE_PATH": str(instance), "QUOTECHECK_DATABASE_URL": database}
    worker = _start_worker(env)
    env.update({"QUOTECHECK_BIND": f"127.0.0.1:{port}", "QUOTECHECK_WORKERS": "2"})
    log = (ARTIFACTS / "gunicorn.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", str(ROOT / "deploy" / "gunicorn.conf.py"),
                                "service.wsgi:app"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"gunicorn did not become ready; see {ARTIFACTS / 'gunicorn.log'}")
            time.sleep(0.5)
        yield Server(url, tokens, instance, worker)
    finally:
        worker.stop()
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture
def page(chromium: str) -> Iterator[object]:
    """A Playwright page of a fresh headless chromium context (1280 × 900), downloads accepted."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        try:
            yield context.new_page()
        finally:
            context.close()
            browser.close()

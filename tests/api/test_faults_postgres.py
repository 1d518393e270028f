"""PostgreSQL restarted under load: 16 clients submit with Idempotency-Keys for 20 s to the API under gunicorn.

The test starts its own PostgreSQL (``initdb``, ``pg_ctl``) on a loopback port of its own, the API under
gunicorn as deployed (deploy/gunicorn.conf.py) on it, and stops both afterwards. Midway the database is
stopped for two seconds and started again, then restarted at once. Each client retries a 503 (or a
connection error) with the same key and body until it is answered 201 or 200 (replayed), as the API
tells clients to. No Redis: submitting sends no task. Skipped when PostgreSQL's binaries are missing.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from api_support import FAILING_SUBMISSION, new_token
from fault_support import ROOT, PostgresServer, free_port, service_env, wait_until
from sqlmodel import select

from service import create_app
from service.persistence import audit
from service.persistence.db import get_db
from service.persistence.models import Submission

pytestmark = pytest.mark.faults

CLIENTS = 16
LOAD_S = 20
GUNICORN_WORKERS = 3
# A submission whose answer is lost to an outage is retried until it is answered; past this, it is lost.
SETTLE_S = 30


@dataclass
class Client:
    """One client's keys and what each request for them was answered."""

    token: str
    answers: dict[str, list[int]] = field(default_factory=dict)  # key → statuses, in order
    created: dict[str, str] = field(default_factory=dict)  # key → submission id of its final answer
    without_retry_after: int = 0
    connection_errors: int = 0


def _post(base: str, token: str, key: str, body: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
    request = urllib.request.Request(f"{base}/api/v1/submissions", data=body, method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json", "Idempotency-Key": key})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read() or b"{}")


def _submit_until(client: Client, base: str, stop_at: float) -> None:
    """Submits with new keys until ``stop_at``; each key is retried until answered, at most SETTLE_S past it."""
    body = json.dumps(FAILING_SUBMISSION).encode()
    while time.monotonic() < stop_at:
        key = secrets.token_hex(8)
        statuses = client.answers.setdefault(key, [])
        while time.monotonic() < stop_at + SETTLE_S:
            try:
                status, headers, view = _post(base, client.token, key, body)
            except OSError:  # refused or cut off: the answer never came, so try again
                client.connection_errors += 1
                time.sleep(0.2)
                continue
            statuses.append(status)
            if status in (200, 201):
                client.created[key] = view["id"]
                break
            if status == 503 and "Retry-After" not in headers:
                client.without_retry_after += 1
            if status != 503:
                break  # anything else is a failure the assertions name
            time.sleep(0.25)


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.remove()


def _gunicorn(env: dict[str, str], log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "deploy" / "gunicorn.conf.py"), "service.wsgi:app"]
    with log.open("wb") as output:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)


def test_postgresql_restarted_under_16_submitting_clients_loses_and_duplicates_nothing(postgres, tmp_path):
    # Given the API under gunicorn on the test's own PostgreSQL, migrated, with a token per client
    instance = tmp_path / "instance"
    app = create_app({"TESTING": True, "INSTANCE_PATH": str(instance), "DATABASE_URL": postgres.url})
    clients = [Client(new_token(app, "submitter")[1]) for _ in range(CLIENTS)]
    port = free_port()
    env = {**service_env(postgres.url, instance, {"AUTO_MIGRATE": False}),
           "QUOTECHECK_BIND": f"127.0.0.1:{port}", "QUOTECHECK_WORKERS": str(GUNICORN_WORKERS)}
    log = tmp_path / "gunicorn.log"
    server = _gunicorn(env, log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _healthy(base) or server.poll() is not None, 60, "gunicorn starting")
        assert server.poll() is None, log.read_text()

        # When 16 clients submit for 20 s while PostgreSQL is stopped for 2 s, started, and later restarted
        started = time.monotonic()
        threads = [threading.Thread(target=_submit_until, args=(c, base, started + LOAD_S)) for c in clients]
        for thread in threads:
            thread.start()
        time.sleep(LOAD_S * 0.3)
        postgres.stop()
        time.sleep(2)
        postgres.start()
        time.sleep(LOAD_S * 0.3)
        postgres.stop()
        postgres.start()
        for thread in threads:
            thread.join(timeout=LOAD_S + SETTLE_S + 60)
        assert not any(t.is_alive() for t in threads), "a client did not finish"
        # ... and the service answers afterwards without being restarted
        assert server.poll() is None and _healthy(base)
        gunicorn_log = log.read_text(errors="replace")
    finally:
        server.terminate()
        server.wait(timeout=30)

    statuses = Counter(s for c in clients for answers in c.answers.values() for s in answers)
    print(f"\n{CLIENTS} clients, {LOAD_S} s: {sum(len(c.answers) for c in clients)} keys, answers {dict(statuses)}, "
          f"{sum(c.connection_errors for c in clients)} connection errors")
    # Then every key was answered 201 or 200 in the end, and only 503s (with Retry-After) on the way
    unanswered = {k: a for c in clients for k, a in c.answers.items() if k not in c.created}
    assert unanswered == {}, unanswered
    assert set(statuses) <= {200, 201, 503}, statuses
    assert statuses[503] > 0, "the outage was not seen: nothing was tested"
    assert sum(c.without_retry_after for c in clients) == 0
    # ... nothing was lost and nothing duplicated: one submission per key, each of them stored
    ids = [submission_id for c in clients for submission_id in c.created.values()]
    assert len(ids) == len(set(ids))
    with get_db(app).session() as session:
        stored = set(session.exec(select(Submission.id)).all())
        assert stored == set(ids), (len(stored), len(ids))
        assert audit.verify(session).ok
    # ... by the same gunicorn workers: none was restarted (a hung one would have been killed and replaced)
    assert gunicorn_log.count("Booting worker") == GUNICORN_WORKERS, gunicorn_log[-3000:]
    get_db(app).engine.dispose()


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False

"""A slow webhook receiver never delays the other tasks (real processes): deliveries have a queue and a worker of
their own.

The stack of test_faults_redis.py (its own PostgreSQL and Redis, the API in-process) with two workers as deployed:
``workers.worker`` with one process (concurrency 1: one held process would stop every comparison) and
``workers.webhook_worker`` (the webhook queue). The receiver reads the POST and then answers one byte every 4 s, a
trickle that never ends within the attempt's timeout (30 s here, so that the whole-attempt deadline cannot be what
frees a worker): while it holds the webhook worker, a comparison sent right after the event must complete within
15 s. Were deliveries on the main queue, the one main process would be held for the 30 s instead.
"""

from __future__ import annotations

import base64
import os
import socket
import threading
import time

import pytest
from api_support import Caller, new_token
from fault_support import wait_until
from test_faults_redis import COMPARISONS, Stack, _body, stack  # noqa: F401

from service.tasks import task_runs
from service.tasks.tasks_port import COMPARE_CONFIGURATIONS, DELIVER_WEBHOOKS

pytestmark = pytest.mark.faults

BYTE_EVERY_S, ATTEMPT_TIMEOUT_S, COMPLETE_WITHIN_S = 4, 30, 15


class TrickleReceiver:
    """A receiver on 127.0.0.1 that reads each request, then sends one byte every ``BYTE_EVERY_S`` until stopped."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.requests: list[bytes] = []
        self.open_connections = 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.getsockname()[1]}/hooks"

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(connection,), daemon=True).start()

    def _trickle(self, connection: socket.socket) -> None:
        with connection:
            request = connection.recv(65536)
            with self.lock:
                self.requests.append(request)
                self.open_connections += 1
            try:
                while not self.stopping.wait(BYTE_EVERY_S):
                    connection.sendall(b"H")
            except OSError:
                pass  # the sender gave up and closed it
            finally:
                with self.lock:
                    self.open_connections -= 1

    def holding(self) -> bool:
        """Returns whether a sender is connected and still waiting for the rest of the answer."""
        with self.lock:
            return self.open_connections > 0

    def stop(self) -> None:
        self.stopping.set()
        self.server.close()


def test_a_receiver_sending_one_byte_every_4_s_holds_the_webhook_worker_and_a_comparison_completes_within_15_s(
        stack: Stack) -> None:  # noqa: F811
    # Given the main worker with one process, the webhook worker, and a webhook whose receiver trickles its answer
    receiver = TrickleReceiver()
    stack.configure(CELERY_TASK_SOFT_TIME_LIMIT_S=60, CELERY_TASK_TIME_LIMIT_S=70, CELERY_VISIBILITY_TIMEOUT_S=80,
                    WEBHOOK_TIMEOUT_S=ATTEMPT_TIMEOUT_S, WEBHOOK_ALLOWED_NETWORKS=["127.0.0.0/8"],
                    # With a broker the secrets' key comes from the configuration, the API's and the workers' alike
                    WEBHOOK_SECRET_KEY=base64.b64encode(os.urandom(32)).decode())
    main = stack.worker("worker")
    webhooks = stack.worker("webhooks", queue=f"{stack.queue}-webhooks", app="workers.webhook_worker")
    try:
        main.start(concurrency=1, as_deployed=True)
        webhooks.start(concurrency=1, as_deployed=True)
        admin = Caller(stack.app, *_admin(stack))
        created = admin.post("/api/v1/webhooks", json={"url": receiver.url, "events": ["submission.submitted"]})
        assert created.status_code == 201, created.get_json()
        submitter = stack.caller()

        # When a quote is submitted (the event), and its delivery is being trickled an answer
        submitted = submitter.post("/api/v1/submissions", json=_body("event")["submission"])
        assert submitted.status_code == 201, submitted.get_json()
        wait_until(receiver.holding, 30, f"the delivery reaching the receiver\n{stack.logs()}")

        # Then a comparison sent right after completes within 15 s, while the receiver still holds the delivery
        sent_at = time.monotonic()
        response = submitter.post(COMPARISONS, json=_body("while a receiver trickles"))
        assert response.status_code == 202, response.get_json()
        task_id = response.get_json()["id"]
        state = _ended_within(stack, task_id, COMPLETE_WITHIN_S)
        took = time.monotonic() - sent_at
        print(f"\ncomparison completed {took:.1f} s after it was sent, the receiver holding the delivery throughout")
        assert state == task_runs.SUCCESS, f"{state} after {COMPLETE_WITHIN_S} s\n{stack.logs()}"
        assert receiver.holding(), "the delivery ended before the comparison: the test proved nothing"
        # ... the delivery ran on the webhook worker, the comparison on the main worker, neither on the other
        assert (_started(webhooks.text(), DELIVER_WEBHOOKS), _started(webhooks.text(), COMPARE_CONFIGURATIONS)) == \
            (1, 0), stack.logs()
        assert (_started(main.text(), DELIVER_WEBHOOKS), main.succeeded(COMPARE_CONFIGURATIONS)) == (0, 1), stack.logs()
        assert len(receiver.requests) == 1 and b"submission.submitted" in receiver.requests[0]
    finally:
        receiver.stop()


def _admin(servers: Stack) -> tuple[str, str, str]:
    assert servers.app is not None
    name, token = new_token(servers.app, "admin")
    return name, "admin", token


def _started(log: str, task: str) -> int:
    """Returns how many runs of ``task`` a worker's log says started (workers/celery_app.py logs each)."""
    return sum(1 for line in log.splitlines() if f"task {task} " in line and line.endswith(" started"))


def _ended_within(servers: Stack, task_id: str, timeout_s: float) -> str:
    """Returns the state the task is in once it ended, or when ``timeout_s`` passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = servers.row(task_id).state
        if state in task_runs.FINISHED or time.monotonic() >= deadline:
            return state
        time.sleep(0.2)

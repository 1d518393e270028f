"""A stalled broker and stuck consumers, real processes: Redis paused while a task ends, workers that consume nothing.

Each test starts its own PostgreSQL and Redis (test_faults_redis.py's ``stack``), real workers (``celery -A
workers.worker worker``) and the API in-process on them, with the service's own Redis timeouts.

- Redis paused (SIGSTOP) for 15 s while a short comparison ends, then resumed: a comparison sent 8 s later
  completes within 30 s, try after try, with the worker as deployed (prefork, deploy/quotecheck-worker.service's
  options) and with the solo pool. The solo worker used to stop consuming for good: its acknowledgement failed at
  the socket timeout and left its prefetch window full (workers/acks.py). QUOTECHECK_TEST_PAUSE_TRIES tries per
  pool (default 1, to keep the default run short; 5 is the issue's figure).
- Workers that answer pings but consume nothing make /readyz answer 503 within 30 s, from the task table alone,
  and it answers 200 again once the queue moves: a worker consuming another queue, then a worker SIGSTOPped.

Deadlines are polled; the figures measured (how long each comparison took, when /readyz turned) are printed.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from fault_support import wait_until
from test_faults_redis import COMPARISONS, Stack, _body, stack  # noqa: F401

from service.tasks import task_runs

pytestmark = pytest.mark.faults

PAUSE_S, SEND_AFTER_S, COMPLETE_WITHIN_S = 15, 8, 30
NOT_READY_WITHIN_S = 30
TRIES = int(os.environ.get("QUOTECHECK_TEST_PAUSE_TRIES", "1"))
# Each step of a comparison takes this much longer in the workers, so that Redis can be paused while one runs.
STEP_DELAY_S = 0.5


def _ended_within(servers: Stack, task_id: str, timeout_s: float) -> tuple[str, float]:
    """Returns the state a task ended in and how long (s) that took from now; ("PENDING" or "PROGRESS", timeout_s)
    when it had not ended by then."""
    started = time.monotonic()
    while True:
        state = servers.row(task_id).state
        elapsed = time.monotonic() - started
        if state in task_runs.FINISHED or elapsed >= timeout_s:
            return state, elapsed
        time.sleep(0.2)


@pytest.mark.parametrize("pool", ["prefork", "solo"])
def test_after_redis_paused_while_a_task_ends_a_comparison_sent_8_s_later_completes_within_30_s(stack, pool):  # noqa: F811
    # Given the service's own Redis timeouts, and one worker started as deployed (its pool aside)
    stack.configure(celery={}, CELERY_TASK_SOFT_TIME_LIMIT_S=120, CELERY_TASK_TIME_LIMIT_S=150,
                    CELERY_VISIBILITY_TIMEOUT_S=300, TASK_DISPATCH_INTERVAL_S=10)
    worker = stack.worker(f"worker-{pool}", step_delay_s=STEP_DELAY_S)
    worker.start(as_deployed=True, pool=pool)
    submitter = stack.caller()
    readiness = stack.app.test_client()
    figures: list[str] = []
    for attempt in range(TRIES):
        # When Redis is paused for 15 s while a short comparison (2 steps) runs, and ends meanwhile
        short = submitter.post(COMPARISONS, json=_body(f"short {attempt}", variants=2)).get_json()["id"]
        wait_until(lambda short=short: stack.row(short).progress_current >= 1, 60, "the short comparison running")
        stack.redis.pause()
        try:
            time.sleep(PAUSE_S / 2)
            probed = time.monotonic()
            during = readiness.get("/readyz").status_code
            probe_s = time.monotonic() - probed
            time.sleep(max(0.0, PAUSE_S / 2 - probe_s))
        finally:
            stack.redis.resume()
        short_state = stack.row(short).state
        # ... and a comparison is sent 8 s after Redis answers again
        time.sleep(SEND_AFTER_S)
        response = submitter.post(COMPARISONS, json=_body(f"after {attempt}"))
        assert response.status_code == 202, response.get_json()

        # Then it completes within 30 s
        state, took_s = _ended_within(stack, response.get_json()["id"], COMPLETE_WITHIN_S)
        figures.append(f"try {attempt + 1}: the short comparison was {short_state} at resume; the next completed "
                       f"in {took_s:.1f} s ({state}); /readyz answered {during} in {probe_s:.2f} s while paused")
        assert state == task_runs.SUCCESS, f"{figures}\n{stack.logs()}"
        assert stack.row(short).state == task_runs.SUCCESS
    print(f"\n{pool}: " + "\n".join(figures))


def _turns(client: Any, status: int, timeout_s: float) -> tuple[dict[str, Any], float]:
    """Polls /readyz until it answers ``status``; returns its body and how long that took (AssertionError past it)."""
    started = time.monotonic()
    while True:
        response = client.get("/readyz")
        if response.status_code == status:
            return response.get_json(), time.monotonic() - started
        assert time.monotonic() - started < timeout_s, f"not {status} within {timeout_s} s: {response.get_json()}"
        time.sleep(0.5)


def test_workers_answering_pings_but_consuming_nothing_make_readyz_not_ready_within_30_s_until_the_queue_moves(
        stack):  # noqa: F811
    # Given a worker that answers pings but consumes another queue than the one the API sends to
    stack.configure()
    client = stack.app.test_client()
    elsewhere = stack.worker("elsewhere", queue=f"{stack.queue}-elsewhere")
    elsewhere.start()
    _turns(client, 200, 30)
    submitter = stack.caller()

    # When a comparison is queued, nothing takes it: /readyz turns 503 from the task table within 30 s
    waiting = submitter.post(COMPARISONS, json=_body("waits")).get_json()["id"]
    body, not_ready_s = _turns(client, 503, NOT_READY_WITHIN_S)
    workers = body["checks"]["workers"]
    assert workers["status"] == "failed" and "READINESS_MAX_QUEUED_AGE_S" in workers["detail"], body
    assert body["checks"]["broker"]["status"] == "ok" and body["checks"]["database"]["status"] == "ok"
    # ... and 200 once a worker consumes the queue
    consumer = stack.worker("consumer")
    consumer.start()
    _, ready_again_s = _turns(client, 200, 60)
    assert _ended_within(stack, waiting, 30)[0] == task_runs.SUCCESS

    # When the consuming worker is stopped (SIGSTOP) while the other still answers pings
    consumer.pause()
    try:
        stopped = submitter.post(COMPARISONS, json=_body("stopped")).get_json()["id"]
        body, stopped_not_ready_s = _turns(client, 503, NOT_READY_WITHIN_S)
        assert "READINESS_MAX_QUEUED_AGE_S" in body["checks"]["workers"]["detail"], body
    finally:
        consumer.resume()
    # Then it is ready again once the worker runs, and the task completes
    _, resumed_ready_s = _turns(client, 200, 60)
    assert _ended_within(stack, stopped, 30)[0] == task_runs.SUCCESS
    print(f"\n/readyz: 503 {not_ready_s:.1f} s after a task was queued for a worker on another queue, 200 "
          f"{ready_again_s:.1f} s after a consuming worker started; 503 {stopped_not_ready_s:.1f} s after a task was "
          f"queued for a SIGSTOPped worker, 200 {resumed_ready_s:.1f} s after SIGCONT")

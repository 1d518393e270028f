"""Tasks that cannot be stranded, in-process on SQLite and PostgreSQL: the outbox, claims, stale rows, reconciling.

A queue that stands in for the broker (``Broker``) refuses messages while it is "down" and reports the
states a result backend would; the app without a broker runs what it is sent at once (eager), which is
what a worker does with a message, so "the broker is back" is a dispatch through that app.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from api_support import caller_for
from click.testing import CliRunner
from flask import Flask
from sqlalchemy import update
from task_support import example

from service.cli import main
from service.persistence.db import get_db
from service.persistence.models import TaskRun
from service.tasks import task_outbox, task_runs, tasks_port
from service.tasks.tasks_port import COMPARE_CONFIGURATIONS

COMPARISONS = "/api/v1/comparisons"


class Broker:
    """A task queue that takes messages while up, refuses them while down, and reports backend states."""

    def __init__(self) -> None:
        self.up = True
        self.sent: list[tuple[str, str]] = []
        self.forgotten: list[str] = []
        self.states: dict[str, tuple[str, Any]] = {}

    def send(self, name: str, args: list[Any], task_id: str) -> None:
        if not self.up:
            raise ConnectionError("Error 111 connecting to 10.0.0.9:6379. Connection refused.")
        self.sent.append((name, task_id))

    def forget(self, task_id: str) -> None:
        if not self.up:
            raise ConnectionError("Error 111 connecting to 10.0.0.9:6379. Connection refused.")
        self.forgotten.append(task_id)
        self.states.pop(task_id, None)

    def state(self, task_id: str) -> tuple[str | None, Any]:
        return self.states.get(task_id, ("PENDING", None))


def _on_broker(make_app: Any) -> tuple[Flask, Broker]:
    app = make_app()
    broker = Broker()
    tasks_port.register(app, broker)
    return app, broker


def _body(name: str = "as quoted") -> dict[str, Any]:
    return {"submission": example(), "variants": [{"name": name, "patch": {}}]}


def _row(app: Flask, task_id: str) -> TaskRun:
    with app.app_context(), get_db(app).session() as session:
        row = task_runs.find(session, task_id)
    assert row is not None
    return row


def _set(app: Flask, task_id: str, **values: Any) -> None:
    with app.app_context(), get_db(app).session() as session:
        session.execute(update(TaskRun).where(TaskRun.id == task_id).values(**values))
        session.commit()


def test_a_request_while_the_broker_is_down_is_accepted_and_sent_once_when_it_is_back(make_app):
    # Given the API on a broker that is down
    app, broker = _on_broker(make_app)
    broker.up = False
    submitter = caller_for(app)

    # When a comparison is requested
    response = submitter.post(COMPARISONS, json=_body())

    # Then it is accepted, PENDING, its message kept in the outbox
    assert response.status_code == 202, response.get_json()
    task_id = response.get_json()["id"]
    assert response.get_json()["state"] == "PENDING"
    row = _row(app, task_id)
    assert (row.sent, row.send_lease_until, row.attempts) == (False, None, 0)
    assert row.args is not None and row.args[1] == _body()["variants"]
    # ... a dispatch while it is still down leaves it there, and so does asking again
    with app.app_context():
        assert task_outbox.dispatch_pending().as_dict() == {"sent": 0, "failed": 1}
    assert submitter.post(COMPARISONS, json=_body()).get_json()["id"] == task_id
    assert broker.sent == [] and not _row(app, task_id).sent

    # When the broker is back: a dispatcher (here an app that runs what it is sent, as a worker does)
    worker_app = make_app()
    with worker_app.app_context():
        report = task_outbox.dispatch_pending()

    # Then it was sent, ran once, and the outbox is empty
    assert report.as_dict() == {"sent": 1, "failed": 0}
    task = submitter.get(f"/api/v1/tasks/{task_id}").get_json()
    assert task["state"] == "SUCCESS", task
    row = _row(app, task_id)
    assert (row.sent, row.attempts, row.args) == (True, 1, None)
    with worker_app.app_context():
        assert task_outbox.unsent() == [] and task_outbox.dispatch_pending().sent == 0


def test_the_same_work_asked_for_again_once_the_broker_is_back_sends_the_waiting_task(make_app):
    app, broker = _on_broker(make_app)
    broker.up = False
    submitter = caller_for(app)
    task_id = submitter.post(COMPARISONS, json=_body()).get_json()["id"]

    broker.up = True
    again = submitter.post(COMPARISONS, json=_body())
    once_more = submitter.post(COMPARISONS, json=_body())

    assert again.get_json()["id"] == once_more.get_json()["id"] == task_id
    assert broker.sent == [(COMPARE_CONFIGURATIONS, task_id)] and _row(app, task_id).sent


def test_quotecheck_tasks_dispatch_sends_the_outbox_and_says_when_the_broker_refused(make_app):
    app, broker = _on_broker(make_app)
    broker.up = False
    first = caller_for(app).post(COMPARISONS, json=_body("one")).get_json()["id"]
    second = caller_for(app).post(COMPARISONS, json=_body("two")).get_json()["id"]

    refused = CliRunner().invoke(main, ["tasks", "dispatch"], obj={"app": app})
    broker.up = True
    sent = CliRunner().invoke(main, ["tasks", "dispatch"], obj={"app": app})

    assert refused.exit_code == 1 and "0 sent, the broker refused the next" in refused.output
    assert sent.exit_code == 0 and "2 sent, none left" in sent.output, sent.output
    assert broker.sent == [(COMPARE_CONFIGURATIONS, first), (COMPARE_CONFIGURATIONS, second)]
    # A task that never ran has no backend state to clear
    assert broker.forgotten == []


def test_a_row_another_sender_holds_is_not_sent_again_until_its_lease_ran_out(make_app, clock):
    app, broker = _on_broker(make_app)
    broker.up = False
    task_id = caller_for(app).post(COMPARISONS, json=_body()).get_json()["id"]
    broker.up = True
    _set(app, task_id, send_lease_until=clock() + timedelta(seconds=task_outbox.SEND_LEASE_S))

    with app.app_context():
        assert task_outbox.dispatch_pending().as_dict() == {"sent": 0, "failed": 0}
        clock.advance(seconds=task_outbox.SEND_LEASE_S + 1)
        assert task_outbox.dispatch_pending().as_dict() == {"sent": 1, "failed": 0}

    assert broker.sent == [(COMPARE_CONFIGURATIONS, task_id)]


def test_each_run_claims_its_row_so_a_message_sent_twice_runs_once(make_app, clock):
    app, _ = _on_broker(make_app)
    task_id = caller_for(app).post(COMPARISONS, json=_body()).get_json()["id"]
    hard_s = app.config["CELERY_TASK_TIME_LIMIT_S"]

    with app.app_context():
        def claim(tag: str | None) -> task_runs.Claim:
            return task_runs.claim(task_id, task_runs.COMPARISON, "k", 1, tag)

        first = claim("message-1")
        # A second message for the same task while the first run is alive waits for it to be stale
        busy = claim("message-2")
        # ... and so does a run in-process (no message, no tag) while a run no message holds is alive
        _set(app, task_id, claimed_by=None)
        untagged = claim(None)
        _set(app, task_id, claimed_by="message-1")
        # The first message redelivered (its worker died) takes the row back at once, counted again
        redelivered = claim("message-1")
        # Long unwritten, the row is stale: anyone may take it
        clock.advance(seconds=hard_s + 1)
        stale = claim("message-3")
        task_runs.succeed(task_id, {"rows": []})
        done = claim("message-4")

    assert first.outcome == task_runs.RUN and first.row.attempts == 1 and first.row.state == "PROGRESS"
    assert busy.outcome == task_runs.BUSY and hard_s - 1 <= busy.wait_s <= hard_s + 1
    assert untagged.outcome == task_runs.BUSY
    assert redelivered.outcome == task_runs.RUN and redelivered.row.attempts == 2
    assert stale.outcome == task_runs.RUN and stale.row.attempts == 3 and stale.row.claimed_by == "message-3"
    assert done.outcome == task_runs.DONE and done.row.result == {"rows": []}
    row = _row(app, task_id)
    assert (row.state, row.args, row.attempts) == ("SUCCESS", None, 3)


def test_the_same_message_delivered_twice_runs_its_work_once(make_app, monkeypatch):
    import workers.tasks

    runs: list[str] = []
    compare = workers.tasks.compare_configurations
    monkeypatch.setattr(workers.tasks, "compare_configurations",
                        lambda *args, **kwargs: runs.append("ran") or compare(*args, **kwargs))
    app = make_app()
    task_id = caller_for(app).post(COMPARISONS, json=_body()).get_json()["id"]
    assert _row(app, task_id).args is None  # cleared once the task ended
    body = _body()
    task = app.extensions["celery"].tasks[COMPARE_CONFIGURATIONS]

    with app.app_context():
        again = task.apply(args=[json.dumps(body["submission"]), body["variants"]], task_id=task_id)

    assert runs == ["ran"] and again.result == _row(app, task_id).result
    assert _row(app, task_id).attempts == 1


def test_a_stale_task_is_run_again_when_the_same_work_is_asked_for_again(make_app, clock):
    # Given a comparison whose worker died mid-run: PROGRESS 2/16 and nothing written since
    app, broker = _on_broker(make_app)
    submitter = caller_for(app)
    task_id = submitter.post(COMPARISONS, json=_body()).get_json()["id"]
    _set(app, task_id, state="PROGRESS", progress_current=2, progress_total=16, attempts=1, claimed_by="m-1")
    hard_s = app.config["CELERY_TASK_TIME_LIMIT_S"]

    # While the run might be alive, asking again gets the same running task, not sent again
    assert submitter.post(COMPARISONS, json=_body()).get_json()["state"] == "PROGRESS"
    assert broker.sent == [(COMPARE_CONFIGURATIONS, task_id)]

    # Once unwritten for longer than the hard time limit, asking again resets it and sends it again
    clock.advance(seconds=hard_s + 1)
    again = submitter.post(COMPARISONS, json=_body())

    assert again.status_code == 202 and again.get_json()["id"] == task_id
    assert again.get_json()["state"] == "PENDING" and again.get_json()["progress"] == {"current": 0, "total": 1}
    assert broker.sent == [(COMPARE_CONFIGURATIONS, task_id)] * 2
    # ... its last run's state cleared from the result backend before it was sent
    assert broker.forgotten == [task_id]


def test_an_end_only_the_result_backend_knows_of_is_written_to_the_row_and_asking_again_reruns(make_app):
    # Given a task whose worker was killed at the hard time limit: the backend says FAILURE, the row PROGRESS
    app, broker = _on_broker(make_app)
    submitter = caller_for(app)
    task_id = submitter.post(COMPARISONS, json=_body()).get_json()["id"]
    _set(app, task_id, state="PROGRESS", progress_current=2, attempts=1)
    broker.states[task_id] = ("FAILURE", RuntimeError("TimeLimitExceeded(150,)"))

    # When the task is read
    task = submitter.get(f"/api/v1/tasks/{task_id}").get_json()

    # Then it reads FAILURE, and the row says so too
    assert task["state"] == "FAILURE" and task["error"]["type"].endswith("/task-failed")
    assert "RuntimeError" in task["error"]["detail"] and "ask again" in task["error"]["detail"]
    assert _row(app, task_id).state == "FAILURE"
    # ... so asking again runs it again
    again = submitter.post(COMPARISONS, json=_body()).get_json()
    assert again["id"] == task_id and again["state"] == "PENDING"
    assert broker.sent == [(COMPARE_CONFIGURATIONS, task_id)] * 2


def test_a_success_only_the_result_backend_knows_of_is_written_to_the_row(make_app):
    app, broker = _on_broker(make_app)
    submitter = caller_for(app)
    task_id = submitter.post(COMPARISONS, json=_body()).get_json()["id"]
    _set(app, task_id, state="PROGRESS", attempts=1)
    broker.states[task_id] = ("SUCCESS", {"rows": ["merged"]})

    task = submitter.get(f"/api/v1/tasks/{task_id}").get_json()

    assert task["state"] == "SUCCESS" and task["result"] == {"rows": ["merged"]}
    assert task["progress"] == {"current": 1, "total": 1}
    row = _row(app, task_id)
    assert (row.state, row.result) == ("SUCCESS", {"rows": ["merged"]})


def test_a_task_still_in_the_outbox_is_not_reconciled_with_a_backend_state_of_its_last_run(make_app):
    app, broker = _on_broker(make_app)
    broker.up = False
    submitter = caller_for(app)
    task_id = submitter.post(COMPARISONS, json=_body()).get_json()["id"]
    broker.states[task_id] = ("FAILURE", RuntimeError("an earlier run"))

    assert submitter.get(f"/api/v1/tasks/{task_id}").get_json()["state"] == "PENDING"
    assert _row(app, task_id).state == "PENDING"

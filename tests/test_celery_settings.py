"""The Celery settings a Flask configuration gives: eager without a broker, JSON only, late acknowledgement."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service import create_app
from service.config import DEFAULTS
from service.errors import InvalidRequest
from workers.celery_app import celery_settings


def _settings(**config: Any) -> dict[str, Any]:
    return celery_settings({**DEFAULTS, **config})


def test_without_a_broker_tasks_run_in_process_and_keep_their_state_in_memory() -> None:
    settings = _settings()

    assert settings["task_always_eager"] is True and settings["task_eager_propagates"] is False
    assert settings["result_backend"] == "cache+memory://" and settings["task_store_eager_result"] is True


def test_a_redis_broker_is_the_result_backend_too_unless_one_is_named() -> None:
    assert _settings(CELERY_BROKER_URL="redis://r:6379/0")["result_backend"] == "redis://r:6379/0"
    assert _settings(CELERY_BROKER_URL="redis://r:6379/0",
                     CELERY_RESULT_BACKEND="redis://r:6379/1")["result_backend"] == "redis://r:6379/1"
    assert _settings(CELERY_BROKER_URL="redis://r:6379/0")["task_always_eager"] is False


def test_tasks_are_acknowledged_late_within_time_limits() -> None:
    settings = _settings(CELERY_TASK_SOFT_TIME_LIMIT_S=10, CELERY_TASK_TIME_LIMIT_S=20, CELERY_QUEUE="q")

    assert settings["task_acks_late"] and settings["task_reject_on_worker_lost"]
    assert settings["worker_prefetch_multiplier"] == 1
    assert (settings["task_soft_time_limit"], settings["task_time_limit"]) == (10, 20)
    assert settings["task_default_queue"] == "q"


def test_pickle_cannot_be_configured_back_on() -> None:
    settings = _settings(CELERY={"task_serializer": "pickle", "accept_content": ["pickle", "json"]})

    assert settings["task_serializer"] == settings["result_serializer"] == "json"
    assert settings["accept_content"] == settings["result_accept_content"] == ["json"]


def test_transport_options_merge_with_the_defaults() -> None:
    settings = _settings(CELERY_BROKER_URL="redis://r:6379/0",
                         CELERY={"result_backend_transport_options": {"global_keyprefix": "qc:"}})

    options = settings["result_backend_transport_options"]
    assert options["global_keyprefix"] == "qc:" and options["retry_policy"]["max_retries"] == 2


def test_a_nested_setting_from_the_environment_stays_in_its_own_app(monkeypatch, tmp_path):
    # QUOTECHECK_CELERY__x writes into the app's CELERY dict; the next app must not inherit it.
    before = json.dumps(DEFAULTS["CELERY"], sort_keys=True)
    monkeypatch.setenv("QUOTECHECK_CELERY__task_default_priority", "7")
    first = create_app({"TESTING": True, "INSTANCE_PATH": str(tmp_path / "a"),
                        "DATABASE_URL": f"sqlite:///{tmp_path / 'a.sqlite3'}"})
    monkeypatch.delenv("QUOTECHECK_CELERY__task_default_priority")
    second = create_app({"TESTING": True, "INSTANCE_PATH": str(tmp_path / "b"),
                         "DATABASE_URL": f"sqlite:///{tmp_path / 'b.sqlite3'}"})

    assert first.config["CELERY"]["task_default_priority"] == 7
    assert "task_default_priority" not in second.config["CELERY"]
    assert json.dumps(DEFAULTS["CELERY"], sort_keys=True) == before


def test_the_visibility_timeout_outlasts_the_hard_time_limit_and_dead_workers_messages_are_looked_for() -> None:
    settings = _settings(CELERY_BROKER_URL="redis://r:6379/0", CELERY_TASK_TIME_LIMIT_S=150,
                         CELERY_VISIBILITY_TIMEOUT_S=300,
                         CELERY={"broker_transport_options": {"global_keyprefix": "qc:"}})

    options = settings["broker_transport_options"]
    assert options["visibility_timeout"] == 300 > settings["task_time_limit"] == 150
    # Every look is a scan, so a message is re-queued within the interval of its timeout running out
    assert options["unacked_restore_throttle"] == 1 and 0 < options["unacked_restore_interval"] < 300
    assert options["global_keyprefix"] == "qc:"


@pytest.mark.parametrize("limits", [
    {"CELERY_TASK_TIME_LIMIT_S": 300, "CELERY_VISIBILITY_TIMEOUT_S": 300},
    {"CELERY_TASK_SOFT_TIME_LIMIT_S": 150, "CELERY_TASK_TIME_LIMIT_S": 150},
    {"CELERY_VISIBILITY_TIMEOUT_S": "soon"},
    {"TASK_DISPATCH_INTERVAL_S": 0},
])
def test_time_limits_out_of_order_stop_the_start(tmp_path, limits) -> None:
    with pytest.raises(InvalidRequest, match="CELERY_|TASK_DISPATCH"):
        create_app({"TESTING": True, "INSTANCE_PATH": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path}/q.db",
                    **limits})


def test_webhook_deliveries_are_routed_to_a_queue_of_their_own_and_every_other_task_to_the_main_one() -> None:
    from celery import Celery

    from service.tasks import tasks_port

    routed = Celery("routes", set_as_current=False)
    routed.config_from_object(_settings(CELERY_BROKER_URL="redis://r:6379/0", CELERY_QUEUE="qc"))
    named = Celery("named", set_as_current=False)
    named.config_from_object(_settings(CELERY_QUEUE="qc", CELERY_WEBHOOK_QUEUE="hooks"))

    def queue(app: Any, task: str) -> str:
        return app.amqp.router.route({}, task)["queue"].name

    assert queue(routed, tasks_port.DELIVER_WEBHOOKS) == "qc-webhooks"
    assert queue(named, tasks_port.DELIVER_WEBHOOKS) == "hooks"
    others = [tasks_port.COMPARE_CONFIGURATIONS, tasks_port.COMPARE_QUOTES, tasks_port.RENDER_RECORD_PDF,
              tasks_port.SEARCH_LAYOUTS, tasks_port.FIND_REMEDIES]
    assert {queue(app, task) for app in (routed, named) for task in others} == {"qc"}
    # A worker started without -Q (workers.worker, as deployed) consumes the main queue only
    assert list(routed.amqp.queues.consume_from) == ["qc"]


@pytest.mark.parametrize("queues", [{"CELERY_QUEUE": "q", "CELERY_WEBHOOK_QUEUE": "q"}, {"CELERY_QUEUE": ""}])
def test_a_webhook_queue_that_is_not_one_of_its_own_stops_the_start(tmp_path, queues) -> None:
    with pytest.raises(InvalidRequest, match="CELERY_WEBHOOK_QUEUE|CELERY_QUEUE"):
        create_app({"TESTING": True, "INSTANCE_PATH": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path}/q.db",
                    **queues})


def test_deliveries_still_run_in_process_without_a_broker(tmp_path) -> None:
    app = create_app({"TESTING": True, "INSTANCE_PATH": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path}/q.db"})
    celery_app = app.extensions["celery"]

    with app.app_context():
        result = celery_app.tasks["quotecheck.deliver_webhooks"].apply_async(args=[], task_id="t-1")

    assert celery_app.conf.task_always_eager and result.get() == {"attempted": 0, "delivered": 0, "failed": 0,
                                                                 "cancelled": 0}

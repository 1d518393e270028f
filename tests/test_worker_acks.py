"""Acknowledgements the broker did not take are sent again (workers/acks.py), with messages that stand in for kombu's.

The fault test (tests/api/test_faults_redis_stall.py) shows the whole effect with Redis paused under a real worker;
these pin the order, the refusal and the dropping of messages whose channel is gone.
"""

from __future__ import annotations

from typing import Any

import pytest

from service import create_app
from workers import acks
from workers.acks import ACK, REJECT, AckRetries, RetriedAckRequest, retry_untaken


class Channel:
    def __init__(self) -> None:
        self.closed = False


class Message:
    """A message whose acknowledgement the broker refuses ``refusals`` times before taking it."""

    def __init__(self, tag: str, refusals: int, channel: Channel, sent: list[tuple[str, str, bool]]) -> None:
        self.delivery_tag, self.refusals, self.channel, self.sent = tag, refusals, channel, sent
        self.acknowledged = False

    def _send(self, action: str, requeue: bool = False) -> None:
        if self.refusals:
            self.refusals -= 1
            raise TimeoutError("Timeout reading from 127.0.0.1:6379")
        self.acknowledged = True
        self.sent.append((self.delivery_tag, action, requeue))

    def ack(self) -> None:
        self._send(ACK)

    def reject(self, requeue: bool = False) -> None:
        self._send(REJECT, requeue)


@pytest.fixture(autouse=True)
def _no_leftovers() -> Any:
    acks._untaken.clear()
    yield
    acks._untaken.clear()


def test_untaken_acknowledgements_are_sent_again_in_order_until_the_broker_takes_them():
    # Given two acknowledgements and a rejection the broker did not take (the first refused once more)
    sent: list[tuple[str, str, bool]] = []
    channel = Channel()
    first, second, third = (Message(tag, refusals, channel, sent) for tag, refusals in (("a", 1), ("b", 0), ("c", 0)))
    acks._untaken.extend([(first, ACK, False), (second, ACK, False), (third, REJECT, True)])

    # When the broker still refuses: nothing is sent past the refusal, and all three wait
    assert retry_untaken((TimeoutError,)) == 3 and sent == []
    # Then once it answers, each is sent once, oldest first
    assert retry_untaken((TimeoutError,)) == 0
    assert sent == [("a", ACK, False), ("b", ACK, False), ("c", REJECT, True)]
    assert retry_untaken((TimeoutError,)) == 0 and len(sent) == 3


def test_a_message_whose_channel_closed_or_that_was_acknowledged_since_is_dropped_unsent():
    sent: list[tuple[str, str, bool]] = []
    gone, live = Channel(), Channel()
    gone.closed = True
    done = Message("done", 0, live, sent)
    done.acknowledged = True
    acks._untaken.extend([(Message("gone", 0, gone, sent), ACK, False), (done, ACK, False),
                          (Message("live", 0, live, sent), ACK, False)])

    assert retry_untaken((TimeoutError,)) == 0
    assert sent == [("live", ACK, False)]


def test_every_task_of_the_worker_app_uses_the_retrying_request_and_its_consumer_the_retries(tmp_path):
    app = create_app({"TESTING": True, "INSTANCE_PATH": str(tmp_path / "instance"),
                      "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}"})
    celery_app = app.extensions["celery"]

    assert AckRetries in celery_app.steps["consumer"]
    names = [name for name in celery_app.tasks if name.startswith("quotecheck.")]
    assert names and all(issubclass(celery_app.tasks[name].Request, RetriedAckRequest) for name in names)

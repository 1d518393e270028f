"""Acknowledgements the broker did not take are tried again, so that a worker never stops consuming after one.

Tasks are acknowledged late (``acks_late``): a worker acknowledges a message once its task ended. On Redis that is a
command to the broker (kombu removes the message from its unacknowledged set); when Redis hangs past the socket
timeout, the command fails, and kombu's ``Message.ack_log_error`` logs "Couldn't ack …" and goes on. The channel still
counts the message as delivered and unacknowledged (kombu's ``QoS.ack`` marks it done only after the command
succeeded), so with the prefetch limit of one message per process (``worker_prefetch_multiplier`` 1) the channel's
``can_consume()`` stays false and the worker never fetches another message, while answering pings: Redis paused for
15 s while a short task finished left a solo worker consuming nothing for good (tests/api/test_faults_redis_stall.py).

So each task's request (``Task.Request``, Celery's documented seam for a custom request class: celery.app.task,
"Request class used, or the qualified name of one") records an acknowledgement or rejection that did not go
through, and the consumer's event loop tries it again every ``RETRY_INTERVAL_S`` (``AckRetries``, a consumer
bootstep, on the consumer's timer: the same thread as the acknowledgements, so no lock is needed) until the broker
takes it. A message whose channel was closed meanwhile (the consumer reconnected: kombu restored its unacknowledged
messages to the queue, or the visibility timeout will) is dropped, not acknowledged on a channel that is gone.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import bootsteps
from celery.worker.request import Request

logger = logging.getLogger(__name__)

# How often (s) the event loop tries again the acknowledgements the broker did not take. Each try waits at most the
# broker's socket timeout while Redis still hangs.
RETRY_INTERVAL_S = 2.0
ACK, REJECT = "ack", "reject"
# (message, what to send, requeue): in the order they failed; only the consumer's event loop reads and writes it.
_untaken: list[tuple[Any, str, bool]] = []


class RetriedAckRequest(Request):
    """A task request whose acknowledgement (or rejection) is tried again later when the broker did not take it."""

    def acknowledge(self) -> None:
        taken_before = self.acknowledged
        super().acknowledge()
        if not taken_before and not self.message.acknowledged:
            _untaken.append((self.message, ACK, False))

    def reject(self, requeue: bool = False) -> None:
        taken_before = self.acknowledged
        super().reject(requeue)
        if not taken_before and not self.message.acknowledged:
            _untaken.append((self.message, REJECT, requeue))


def retry_untaken(connection_errors: tuple[type[BaseException], ...]) -> int:
    """Sends again, oldest first, the acknowledgements the broker did not take, until it refuses one; returns how
    many are still untaken."""
    while _untaken:
        message, action, requeue = _untaken[0]
        if message.acknowledged or getattr(message.channel, "closed", False):
            _untaken.pop(0)
            continue
        try:
            if action == ACK:
                message.ack()
            else:
                message.reject(requeue=requeue)
        except connection_errors as error:
            logger.warning("%d acknowledgements still not taken by the broker (%s): trying again in %s s",
                           len(_untaken), error, RETRY_INTERVAL_S)
            break
        _untaken.pop(0)
        logger.info("task message %s %s once the broker answered again",
                    message.delivery_tag, "acknowledged" if action == ACK else "rejected")
    return len(_untaken)


class AckRetries(bootsteps.StartStopStep):
    """A consumer bootstep: tries the untaken acknowledgements again every RETRY_INTERVAL_S on the consumer's timer."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.timer_entry: Any = None

    def start(self, c: Any) -> None:
        errors = tuple(c.connection.connection_errors) + tuple(c.connection.channel_errors)
        self.timer_entry = c.timer.call_repeatedly(RETRY_INTERVAL_S, retry_untaken, (errors,))

    def stop(self, c: Any) -> None:
        if self.timer_entry is not None:
            self.timer_entry.cancel()
            self.timer_entry = None

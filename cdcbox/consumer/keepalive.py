"""Staying in the group while a record waits.

A record that is retried (most of all while the circuit breaker holds it) can wait far
longer than `max.poll.interval.ms`. A member that stops polling for that long is expelled,
and a member that does not poll cannot take part in a rebalance either: the whole group
stalls until it returns. So a retry wait is spent polling with every assigned partition
paused: heartbeats and rebalances go on, no record is taken. A record fetched anyway (a
partition assigned during the wait) is put back with a seek.

If the wait lost partitions to a rebalance, `PartitionsRevoked` ends the batch: another
member now owns them and starts from the last committed offset. A stop asked during the
wait ends it too (`StopRequested`): the record is not finished, so it is not committed.
"""

from __future__ import annotations

import threading
import time

from cdcbox.errors import CdcboxError
from cdcbox.kafka.client import Consumer, TopicPartition


class BatchAbandoned(CdcboxError, RuntimeError):
    """A record's wait ended without it: the rest of the batch is left for later."""


class PartitionsRevoked(BatchAbandoned):
    """Partitions were taken away while a record waited."""

    def __init__(self, revoked: set[TopicPartition]) -> None:
        super().__init__(f"partitions revoked during a retry wait: {sorted(revoked)}")
        self.revoked = revoked


class StopRequested(BatchAbandoned):
    """The consumer was asked to stop while a record waited for its next attempt."""


class GroupKeepAlive:
    """Waits (a retry's backoff) while staying in the consumer group: the partitions are
    paused and polled, so heartbeats and `max.poll.interval.ms` are kept; a revoked
    partition ends the wait with `BatchAbandoned`."""

    def __init__(self, kafka: Consumer, stop: threading.Event, slice_s: float = 0.5) -> None:
        self.kafka = kafka
        self.stop = stop
        self.slice_s = slice_s

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` (less once stop is asked) while polling with partitions paused."""
        before = self.kafka.assignment()
        self.kafka.pause(before)
        deadline = time.monotonic() + seconds
        try:
            while not self.stop.is_set() and (left := deadline - time.monotonic()) > 0:
                fetched = self.kafka.poll(timeout_ms=int(min(left, self.slice_s) * 1000))
                for tp, records in fetched.items():
                    self.kafka.seek(tp, records[0].offset)  # not ours to take now
                    self.kafka.pause({tp})
        finally:
            now = self.kafka.assignment()
            self.kafka.resume(now)
        revoked = before - now
        if revoked:
            raise PartitionsRevoked(revoked)
        if self.stop.is_set():
            raise StopRequested("stop requested while a record waited for its next attempt")

"""The dead-letter step: a record that cannot be applied is published to `<topic>.dlq`
(awaited), its inbox row becomes FAILED and its aggregate is parked, so the aggregate's
later events follow it to the DLQ (the park gate, `cdcbox.consumer.steps.park_gate`)
instead of being applied out of order.

The DLQ publish comes first: if it fails, `DeadLetterError` leaves the record's offset
uncommitted and nothing is recorded, so the record comes back.
"""

from __future__ import annotations

import logging
from datetime import datetime

import psycopg

from cdcbox import wire
from cdcbox.consumer.steps.route import Routed
from cdcbox.db import ConnectionSource
from cdcbox.errors import DatabaseError
from cdcbox.event import Event, header
from cdcbox.kafka import dlq
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.dlq import DeadLetterError, DeadLetterPublisher
from cdcbox.seam.stores import ParkingStore, Stores
from cdcbox.telemetry import tracing
from cdcbox.wire import ConsumedRecord

log = logging.getLogger("cdcbox.consumer")


class DeadLetterStep:
    """Publishes what cannot be applied to its DLQ, then records it (FAILED inbox row, park).

    Guarantee: nothing is recorded unless the DLQ acknowledged the letter; a record that
    was published but not recorded comes back and is published again (one copy per
    event id and consumer is replayed)."""

    def __init__(
        self,
        publisher: DeadLetterPublisher,
        stores: Stores,
        park_aggregates: bool,
        group_id: str,
        kafka: KafkaSettings,
    ) -> None:
        self.kafka = kafka
        self.publisher = publisher
        self.stores = stores
        self.park_aggregates = park_aggregates
        self.group_id = group_id

    @property
    def parking(self) -> ParkingStore:
        return self.stores.parking

    def requeue(self, connection: ConnectionSource, routed: Routed, hops: int) -> None:
        """Put a live record back behind its aggregate's replay (FAILED, not parked)."""
        self.publisher.requeue(routed.record, routed.consumer, hops)
        self._record(connection, routed, "requeued behind the replay of its aggregate", 0, False)

    def replay_since(
        self,
        connection: ConnectionSource,
        consumer: str,
        since: datetime,
        partitions: set[tuple[str, int]] | None = None,
    ) -> int:
        """Replay what `consumer` dead-lettered from `since` on (the breaker's tripping
        window) on `partitions` (all for None): its aggregates are marked replaying, so
        they drain in order and are released. Returns how many letters were replayed."""
        conn = connection()
        with conn.transaction():
            failed = [
                (event_id, topic)
                for event_id, topic, partition in self.stores.inbox.failed_since(
                    conn, consumer, since
                )
                if partitions is None or (topic, partition) in partitions
            ]
        if not failed:
            return 0
        wanted = {str(event_id) for event_id, _ in failed}
        letters = [
            letter
            for topic in sorted({t for _, t in failed})
            for letter in dlq.read(self.kafka, topic + self.publisher.suffix)
            if letter.inbox_key in wanted and letter.header("cdcbox.consumer") == consumer
        ]
        count = dlq.republish(self.publisher.producer, letters)
        with conn.transaction():
            ids = [letter.inbox_key for letter in letters]
            self.parking.mark_replaying(conn, dlq.parked_keys(letters), ids)
        log.warning("replayed %d events %s dead-lettered as the breaker tripped", count, consumer)
        return count

    def give_up(
        self, connection: ConnectionSource, routed: Routed, error: BaseException, attempts: int
    ) -> None:
        """Dead-letter a record whose handler failed: publish, mark FAILED, park."""
        self.publish(routed.record, routed.event, routed.consumer, error, attempts)
        self._record(connection, routed, f"{type(error).__name__}: {error}", attempts, park=True)

    def _record(
        self, connection: ConnectionSource, routed: Routed, reason: str, attempts: int, park: bool
    ) -> None:
        """The published record is FAILED in the inbox and, with `park`, its aggregate
        parked (held: a park during a replay stops the replay's requeueing)."""
        park = park and self.park_aggregates
        event, name = routed.event, routed.consumer
        try:
            conn = connection()
            with conn.transaction():
                self.stores.inbox.record_failure(conn, event, name, attempts, reason)
                if park:
                    self.parking.park(conn, event, name, reason)
        except (psycopg.Error, DatabaseError) as e:
            # Published but not recorded: the record comes back (offset uncommitted) and
            # is published again; a replay dedupes the two copies by event id.
            raise DeadLetterError(
                f"dead-lettered {event.log_fields} but could not record it: {e}"
            ) from e
        if park:
            self.parking.remember(routed.parked_key)

    def publish(
        self,
        record: ConsumedRecord,
        event: Event | None,
        consumer: str | None,
        error: BaseException,
        attempts: int,
    ) -> None:
        """Publish to the DLQ and log it; nothing is written to the database."""
        tracing.dead_lettered(error)
        self.publisher.publish(
            record,
            error_type=type(error).__name__,
            message=str(error),
            attempts=attempts,
            consumer=consumer or self.group_id,
            event=event,
        )
        log.error(
            "dead-lettered %s[%d]@%d (event %s): %s: %s",
            record.topic,
            record.partition,
            record.offset,
            event.log_fields if event else _record_id(record),
            type(error).__name__,
            error,
            extra=event.log_extra if event else {"event_id": _record_id(record)},
        )


def _record_id(record: ConsumedRecord) -> str:
    """The event id a record carries, for a log line about a record that did not decode."""
    raw = header(record, wire.HEADER_EVENT_ID)
    return raw.decode(errors="replace") if raw else "?"

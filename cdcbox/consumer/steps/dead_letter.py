"""Step 6, dead letters: a record that cannot be applied is published to `<topic>.dlq`
(awaited), its inbox row becomes FAILED and its aggregate is parked, so the aggregate's
later events follow it to the DLQ (`follow_park`) instead of being applied out of order.

The DLQ publish comes first: if it fails, `DeadLetterError` leaves the record's offset
uncommitted and nothing is recorded, so the record comes back.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from cdcbox.consumer.steps.route import Routed
from cdcbox.consumer.stores import Stores
from cdcbox.db import ConnectionSource
from cdcbox.dlq import DeadLetterError, DeadLetterPublisher
from cdcbox.errors import PoisonRecord
from cdcbox.event import Event
from cdcbox.parking import Parking

log = logging.getLogger("cdcbox.consumer")


class DeadLetterStep:
    def __init__(
        self,
        publisher: DeadLetterPublisher,
        stores: Stores,
        park_aggregates: bool,
        group_id: str,
    ) -> None:
        self.publisher = publisher
        self.stores = stores
        self.park_aggregates = park_aggregates
        self.group_id = group_id

    @property
    def parking(self) -> Parking:
        return self.stores.parking

    def follow_park(self, connection: ConnectionSource, routed: Routed) -> bool:
        """True when the aggregate is parked: the record was sent after its predecessor.
        A dead letter replayed for this consumer is not held: it is what the park waits for."""
        if (
            not self.park_aggregates
            or routed.replayed_for_me
            or not self.parking.might_be_parked(routed.parked_key)
        ):
            return False
        conn = connection()
        with conn.transaction():
            if not self.parking.is_parked(conn, routed.parked_key):
                return False
        event = routed.event
        error = PoisonRecord(
            f"aggregate {event.aggregate_type}/{event.aggregate_id} is "
            "parked behind an earlier dead-lettered event"
        )
        self.give_up(connection, routed, error, attempts=0)
        return True

    def give_up(
        self, connection: ConnectionSource, routed: Routed, error: BaseException, attempts: int
    ) -> None:
        """Dead-letter a record whose handler failed: publish, mark FAILED, park."""
        event, name = routed.event, routed.consumer
        self.publish(routed.record, event, name, error, attempts)
        reason = f"{type(error).__name__}: {error}"
        try:
            conn = connection()
            with conn.transaction():
                self.stores.inbox.record_failure(conn, event, name, attempts, reason)
                if self.park_aggregates:
                    self.parking.park(conn, event, name, reason)
        except psycopg.Error as e:
            # Published but not recorded: the record comes back (offset uncommitted) and
            # is dead-lettered again; a replay dedupes the two letters by event id.
            raise DeadLetterError(
                f"dead-lettered {event.log_fields} but could not record it: {e}"
            ) from e
        if self.park_aggregates:
            self.parking.remember(routed.parked_key)

    def publish(
        self,
        record: Any,
        event: Event | None,
        consumer: str | None,
        error: BaseException,
        attempts: int,
    ) -> None:
        """Publish to the DLQ and log it; nothing is written to the database."""
        self.publisher.publish(
            record,
            error_type=type(error).__name__,
            message=str(error),
            attempts=attempts,
            consumer=consumer or self.group_id,
        )
        log.error(
            "dead-lettered %s[%d]@%d (event %s): %s: %s",
            record.topic,
            record.partition,
            record.offset,
            event.log_fields if event else "?",
            type(error).__name__,
            error,
        )

"""The consumer's per-record protocol, composed from its steps in the order a record
meets them. This is the one numbered list of the steps; everywhere else they are named.
Each is one module of `cdcbox.consumer.steps`:

1. route (`route`) — decode the record once (`Decoded`: its envelope in each wire format,
   its replay marks), find the handlers that take it, decode the payload for each (or
   end as unhandled, or dead-lettered at once when it cannot be decoded: with its
   aggregate parked, like a handler failure, when the headers name the event);
2. park gate (`park_gate`) — an aggregate with a dead-lettered event sends its later
   events after it;
3. retry (`retry`), with the breaker, around the record's transaction (`transaction`):
   inbox claim → version guard (`guard`) → handler → outcome mark → COMMIT (on
   PostgreSQL left in flight while the next record's transaction begins: `in_flight`);
4. dead letter (`dead_letter`) — when the retries are spent: DLQ publish, FAILED inbox
   row, park.

What ends a record between routing and its transaction (poison, the park gate, the
consumers that take none of it) is `cdcbox.consumer.routing_ends`. Batch mode
(`cdcbox.consumer.batch_mode`, over `steps.batch`) runs the transaction for a whole poll
batch at once and hands the records it could not apply to the per-record path here.
Every record ends with exactly one counted `Outcome`; the Kafka offset is the poll
batch's business (`cdcbox.consumer.poll_batch`), after all of this.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cdcbox.consumer.batch_mode import BatchMode
from cdcbox.consumer.breaker import CircuitBreaker
from cdcbox.consumer.config import ConsumerConfig
from cdcbox.consumer.handler import BaseHandler
from cdcbox.consumer.routing_ends import RoutingEnds
from cdcbox.consumer.stats import ConsumerStats, Outcome
from cdcbox.consumer.steps.batch import BatchTransaction
from cdcbox.consumer.steps.dead_letter import DeadLetterStep
from cdcbox.consumer.steps.guard import GuardStep
from cdcbox.consumer.steps.in_flight import EarlierCommitFailed, InFlight, Overlap
from cdcbox.consumer.steps.park_gate import ParkGate
from cdcbox.consumer.steps.retry import RetryStep
from cdcbox.consumer.steps.route import (
    Decoded,
    Routed,
    Router,
    Unroutable,
)
from cdcbox.consumer.steps.transaction import FirstTry, RecordTransaction, Redo
from cdcbox.db import ConnectionSource
from cdcbox.kafka.dlq import DeadLetterPublisher
from cdcbox.seam.stores import Stores
from cdcbox.telemetry import tracing
from cdcbox.wire import ConsumedRecord

log = logging.getLogger("cdcbox.consumer")


class RecordPipeline:
    """Guarantee: each record ends as exactly one counted outcome, and an effect is applied
    at most once per consumer name, in its aggregate's version order."""

    def __init__(
        self,
        handlers: Mapping[str, Sequence[BaseHandler]],
        stores: Stores,
        dead_letters: DeadLetterPublisher,
        config: ConsumerConfig,
        stats: ConsumerStats,
        breaker: CircuitBreaker,
        sleep: Callable[[float], None] = time.sleep,
        owned_partitions: Callable[[], set[tuple[str, int]]] | None = None,
    ) -> None:
        self.stats = stats
        self._owned_partitions = owned_partitions
        self.group_id = config.group_id
        self.router = Router(handlers, config.schemas, config.unhandled)
        self.transaction = RecordTransaction(
            stores,
            GuardStep(stores.versions, config.gap_policy),
            stats,
            dedupe=not config.fault_switches.no_inbox_dedupe,
            in_flight=Overlap(self._confirmed),
        )
        self.dead_letter = DeadLetterStep(
            dead_letters, stores, config.park_aggregates, config.group_id, config.kafka
        )
        self.park_gate = ParkGate(stores, self.dead_letter, config.park_aggregates)
        self.retry = RetryStep(
            self.transaction, config.retry, breaker, stats, sleep, self._replay_tripped
        )
        self.batch = BatchTransaction(stores, self.transaction)
        self.ends = RoutingEnds(handlers, self.park_gate, self.dead_letter, stats, self.group_id)
        self.batch_mode = BatchMode(
            self.router,
            self.ends,
            self.batch,
            self.transaction,
            stats,
            per_record=self._process_decoded,
            settle=self._settle,
            apply_one=self._apply_one,
        )
        # processed, a COMMIT still in flight: each record with the callback that ends it
        self._unended: list[tuple[ConsumedRecord, Callable[[ConsumedRecord], None]]] = []

    def process(self, connection: ConnectionSource, record: ConsumedRecord) -> None:
        """One record, one transaction per handler taking it (and their retries)."""
        self.process_records(connection, [record], _ignore)

    def process_records(
        self,
        connection: ConnectionSource,
        records: Sequence[ConsumedRecord],
        ended: Callable[[ConsumedRecord], None],
    ) -> None:
        """Records of one partition in order, each as `process` does, a record's COMMIT
        in flight while the next one's transaction begins (`steps.in_flight`).
        `ended(record)` is called in order once every transaction of the record has
        answered: only then may its offset be committed."""
        in_flight = self.transaction.in_flight
        try:
            for record in records:
                self._process_decoded(connection, self.router.decode(record), overlap=True)
                self._unended.append((record, ended))
                if in_flight.pending is None:
                    self._end_records()
            self._settle(connection)
        except BaseException:
            in_flight.abandon()  # not ended: those records come back
            raise
        finally:
            self._unended.clear()

    def _process_decoded(
        self, connection: ConnectionSource, decoded: Decoded | Unroutable, overlap: bool = False
    ) -> None:
        routing = decoded if isinstance(decoded, Unroutable) else self.router.route(decoded)
        if not (overlap and self.ends.routed_alone(decoded, routing)):
            self._settle(connection)  # what follows uses the database, or its decisions may
        passing, unhandled = self.ends.route(connection, decoded, routing)
        if unhandled is not None:
            self.transaction.consume_unhandled(connection(), *unhandled)
        for routed in passing:
            self._apply_one(connection, routed, "overlap" if overlap else "alone")

    def _settle(self, connection: ConnectionSource) -> None:
        """Wait for the COMMIT in flight; a record whose COMMIT failed is redone now."""
        try:
            self.transaction.in_flight.settle()
        except EarlierCommitFailed as failed:
            self._redo(connection, failed)
        self._end_records()

    def _redo(self, connection: ConnectionSource, failed: EarlierCommitFailed) -> None:
        """The record whose COMMIT failed in flight, on its own (nothing after it ran)."""
        log.warning("%s; redoing it before the records after it", failed)
        self._apply_one(connection, failed.pending.routed, Redo(failed.cause))
        self._end_records()

    def _confirmed(self, pending: InFlight) -> None:
        """An overlapped transaction's COMMIT answered: it ends as it was applied."""
        routed, outcome = pending.routed, pending.outcome
        if outcome is Outcome.PROCESSED:
            seconds = time.perf_counter() - pending.started
            self.stats.handled(routed.consumer, routed.event.occurred_at, seconds)
        self.stats.count(outcome, routed.consumer)
        self._end_records()

    def _end_records(self) -> None:
        """The records processed so far have ended (nothing of theirs is in flight)."""
        unended, self._unended = self._unended, []
        for record, ended in unended:
            ended(record)

    def process_batch(
        self, connection: ConnectionSource, records: Sequence[ConsumedRecord]
    ) -> None:
        """A poll batch in one transaction (`cdcbox.consumer.batch_mode`)."""
        self.batch_mode.process(connection, records)

    def _replay_tripped(self, connection: ConnectionSource, consumer: str, since: Any) -> None:
        """The breaker closed: replay what this process's partitions dead-lettered while
        it tripped, so those aggregates are released and applied in order."""
        owned = self._owned_partitions() if self._owned_partitions else None
        self.dead_letter.replay_since(connection, consumer, since, owned)

    def _apply_one(
        self, connection: ConnectionSource, routed: Routed, first: FirstTry = "alone"
    ) -> None:
        """Retry around the transaction, then dead letter, in the record's span
        (`cdcbox.telemetry.tracing`). `first` "overlap": its COMMIT may be left in flight
        (its outcome is then counted when it answers). Should the COMMIT in flight before it
        turn out to have failed, that record is redone first and this one goes through
        the park gate again: the earlier one may have parked its aggregate."""
        event, record = routed.event, routed.record
        while True:
            with tracing.consumer_span(
                topic=record.topic,
                partition=record.partition,
                offset=record.offset,
                event_id=event.id_text,
                key=event.aggregate_id,
                group=self.group_id,
                consumer=routed.consumer,
                traceparent=event.trace_id,
            ) as span:
                if first == "overlap" and self.retry.breaker.is_open(routed.consumer):
                    first = "alone"
                try:
                    outcome = self.retry.run(connection, routed, self.dead_letter.give_up, first)
                except EarlierCommitFailed as e:
                    failed: EarlierCommitFailed | None = e
                else:
                    failed = None
                    span.ended(outcome.value)
            if failed is None:
                break
            self._redo(connection, failed)
            if self.park_gate.holds(connection, routed):
                self.stats.count(Outcome.PARKED, routed.consumer)
                return
        pending = self.transaction.in_flight.pending
        if pending is None or pending.routed is not routed:
            self.stats.count(outcome, routed.consumer)


def _ignore(record: ConsumedRecord) -> None:
    """`ended` for callers that commit no offsets."""

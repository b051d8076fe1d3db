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

Batch mode (`batch`) runs the transaction for a whole poll batch at once and hands the
records it could not apply to the same per-record path. Every record ends with exactly
one counted `Outcome`; the Kafka offset is the runner's business, after all of this.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from cdcbox.consumer.breaker import CircuitBreaker
from cdcbox.consumer.config import ConsumerConfig
from cdcbox.consumer.handler import BaseHandler, NoHandler
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
    Undecodable,
    Unreadable,
    Unroutable,
)
from cdcbox.consumer.steps.transaction import FirstTry, RecordTransaction, Redo
from cdcbox.db import ConnectionSource
from cdcbox.event import Event
from cdcbox.kafka.dlq import DeadLetterPublisher
from cdcbox.seam.stores import Stores
from cdcbox.telemetry import tracing
from cdcbox.wire import ConsumedRecord

log = logging.getLogger("cdcbox.consumer")
Routing = list[Routed | Undecodable | Unreadable] | Unroutable  # what `Router.route` found


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
        self._ended: Callable[[ConsumedRecord], None] = _ignore
        self._unended: list[ConsumedRecord] = []  # processed, a COMMIT still in flight
        self._consumers_of_topic: dict[str, list[str]] = {}
        for handler in {id(h): h for hs in handlers.values() for h in hs}.values():
            for topic in handler.subscribed_topics():
                names = self._consumers_of_topic.setdefault(topic, [])
                if handler.consumer_name not in names:
                    names.append(handler.consumer_name)

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
        self._ended = ended
        in_flight = self.transaction.in_flight
        try:
            for record in records:
                self._process_decoded(connection, self.router.decode(record), overlap=True)
                self._unended.append(record)
                if in_flight.pending is None:
                    self._end_records()
            self._settle(connection)
        except BaseException:
            in_flight.abandon()  # not ended: those records come back
            raise
        finally:
            self._unended.clear()
            self._ended = _ignore

    def _process_decoded(
        self, connection: ConnectionSource, decoded: Decoded | Unroutable, overlap: bool = False
    ) -> None:
        routing = decoded if isinstance(decoded, Unroutable) else self.router.route(decoded)
        if not (overlap and self._routed_alone(decoded, routing)):
            self._settle(connection)  # what follows uses the database, or its decisions may
        passing, unhandled = self._route(connection, decoded, routing)
        if unhandled is not None:
            self.transaction.consume_unhandled(connection(), *unhandled)
        for routed in passing:
            self._apply_one(connection, routed, "overlap" if overlap else "alone")

    def _routed_alone(self, decoded: Decoded | Unroutable, routing: Routing) -> bool:
        """True when routing the record needs no statement and no earlier record's end:
        every handler of its topic takes it, none is parked (known without asking), it
        is no replayed copy. Such a record's transaction may begin while the earlier
        COMMIT is in flight; anything else waits for that COMMIT first."""
        if isinstance(decoded, Unroutable) or isinstance(routing, Unroutable) or decoded.replay:
            return False
        taken_by: set[str] = set()
        for r in routing:
            if not isinstance(r, Routed) or self.park_gate.might_hold(r.parked_key):
                return False
            taken_by.add(r.consumer)
        return taken_by.issuperset(self._consumers_of_topic.get(decoded.record.topic, []))

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
        for record in unended:
            self._ended(record)

    def process_batch(
        self, connection: ConnectionSource, records: Sequence[ConsumedRecord]
    ) -> None:
        """A poll batch in one transaction; what it could not apply goes record by record.
        A batch holding replayed copies goes record by record: whether a copy may pass its
        aggregate's park depends on the records before it having been applied. A record
        no handler of a consumer takes advances that consumer's version only after the
        batch's earlier records of its aggregate are applied, so it never makes them stale.
        """
        decoded = [self.router.decode(record) for record in records]
        if any(isinstance(d, Decoded) and d.replay is not None for d in decoded):
            for one in decoded:
                self._process_decoded(connection, one)
            return
        pending: list[Routed] = []
        self._settle(connection)
        for one in decoded:
            routing = one if isinstance(one, Unroutable) else self.router.route(one)
            passing, unhandled = self._route(connection, one, routing)
            if unhandled is not None:
                event, consumers = unhandled
                if any(r.parked_key in _keys(event, consumers) for r in pending):
                    self._apply_batch(connection, pending)
                    pending = []
                self.transaction.consume_unhandled(connection(), event, consumers)
            pending += passing
        if pending:
            self._apply_batch(connection, pending)

    def _apply_batch(self, connection: ConnectionSource, routed: list[Routed]) -> None:
        started = time.perf_counter()
        distinct = self._distinct(routed)
        with tracing.batch_span(
            topics=[r.record.topic for r in distinct],
            group=self.group_id,
            traceparents=[r.event.trace_id for r in distinct],
        ):
            result = self.batch.apply(connection(), distinct)
        # Each record's time is its batch's: none of them is committed before all are.
        seconds = time.perf_counter() - started
        counts = Counter((outcome, r.consumer) for r, outcome in result.applied)
        for (outcome, consumer), ended in counts.items():
            self.stats.count(outcome, consumer, ended)
        processed: dict[str, list[datetime | None]] = {}
        for r, outcome in result.applied:
            if outcome is Outcome.PROCESSED:
                processed.setdefault(r.consumer, []).append(r.event.occurred_at)
        for consumer, occurred in processed.items():
            self.stats.handled_together(consumer, occurred, seconds)
        for r in result.deferred:
            if self.park_gate.holds(connection, r):
                self.stats.count(Outcome.PARKED, r.consumer)
            else:
                self._apply_one(connection, r)

    def _route(
        self, connection: ConnectionSource, decoded: Decoded | Unroutable, routing: Routing
    ) -> tuple[list[Routed], tuple[Event, list[str]] | None]:
        """The park gate after routing; what ends there is counted there. Returns the
        records to apply, and the consumers of the record's topic that take none of it
        and only need its version consumed (the caller does that, in order with the
        records to apply)."""
        if isinstance(decoded, Unroutable):
            self._end(decoded)
            return [], None
        if isinstance(routing, Unroutable):
            self._end(routing)
            if routing.error is not None or routing.event is None:
                return [], None
            event, taken_by = routing.event, set()
            candidates: list[Routed | Undecodable | Unreadable] = []
        else:
            event = next((e for r in routing if (e := _event(r)) is not None), decoded.event)
            taken_by = {_consumer(r) for r in routing}
            candidates = list(routing)
        skipped, unhandled = self._not_taken(decoded, event, taken_by)
        passing: list[Routed] = []
        for r in [*candidates, *skipped]:
            if isinstance(r, Unreadable):
                name = r.handler.consumer_name
                self.dead_letter.publish(r.record, None, name, r.error, attempts=0)
                self.stats.count(Outcome.DEAD_LETTERED, name)
            elif isinstance(r, Undecodable):
                self.dead_letter.give_up(connection, r.routed, r.error, attempts=0)
                self.stats.count(Outcome.DEAD_LETTERED, r.routed.consumer)
            elif self.park_gate.holds(connection, r):
                self.stats.count(Outcome.PARKED, r.consumer)
            else:
                passing.append(r)
        return passing, unhandled

    def _end(self, unroutable: Unroutable) -> None:
        """Count a record that ends at routing; dead-letter it when it is poison."""
        self.stats.count(unroutable.outcome, self.group_id)
        if unroutable.error is not None:
            self.dead_letter.publish(
                unroutable.record, unroutable.event, None, unroutable.error, attempts=0
            )

    def _not_taken(
        self, decoded: Decoded, event: Event, taken_by: set[str]
    ) -> tuple[list[Routed], tuple[Event, list[str]] | None]:
        """The consumers of the record's topic that take none of `event`: every event
        consumes its version for each of them, or `hold` would wait for it forever.

        Where the aggregate may be parked for a consumer (or the record is a copy replayed
        for it), the version must not move past the parked event: the record then goes
        the way of a handled one (park gate, inbox, guard) to a handler that skips it,
        so it follows the park to the dead letters and is consumed in order on replay.
        The others only need their version advanced: returned for the caller to do."""
        if event.aggregate_version is None:
            return [], None
        record, replay = decoded.record, decoded.replay
        others = [c for c in self._consumers_of_topic.get(record.topic, []) if c not in taken_by]
        if replay is not None:
            # A replayed copy is for one consumer; the others consumed the original.
            others = [c for c in others if c == replay.consumer]
        slow = [
            c
            for c in others
            if replay is not None
            or self.park_gate.might_hold((c, event.aggregate_type, event.aggregate_id))
        ]
        fast = [c for c in others if c not in slow]
        skipped = [Routed(record, event, NoHandler(c, event.event_type), replay) for c in slow]
        return skipped, ((event, fast) if fast else None)

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

    def _distinct(self, routed: list[Routed]) -> list[Routed]:
        """The same event twice in one batch: the second is a counted duplicate."""
        seen: set[tuple[Any, str]] = set()
        unique: list[Routed] = []
        for r in routed:
            key = (r.event.event_id, r.consumer)
            if key in seen:
                self.stats.count(Outcome.DUPLICATE, r.consumer)
            else:
                seen.add(key)
                unique.append(r)
        return unique


def _ignore(record: ConsumedRecord) -> None:
    """`ended` for callers that commit no offsets."""


def _event(r: Routed | Undecodable | Unreadable) -> Event | None:
    """The event as the handler reads it (None where its format cannot read it)."""
    if isinstance(r, Unreadable):
        return None
    return (r if isinstance(r, Routed) else r.routed).event


def _consumer(r: Routed | Undecodable | Unreadable) -> str:
    if isinstance(r, Unreadable):
        return r.handler.consumer_name
    return (r if isinstance(r, Routed) else r.routed).consumer


def _keys(event: Event, consumers: list[str]) -> set[tuple[str, str, str]]:
    return {(c, event.aggregate_type, event.aggregate_id) for c in consumers}

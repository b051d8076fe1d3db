"""Records through the steps: decode → inbox claim → version guard → handler → commit.

Every record ends with exactly one `Outcome`. Per-record mode runs one transaction per
record with no savepoint: the inbox row is claimed as PROCESSED, the guard advances the
version, the handler writes, COMMIT. Batch mode (`process_batch`) claims a whole poll
batch with one statement, applies the records and commits once; only when a record fails
is the batch redone with a savepoint per record, and the failing record is deferred, with
its aggregate's later records, to the per-record path (retries, dead letter) after the
commit, so per-aggregate order holds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg

from cdcbox import wire
from cdcbox.consumer.breaker import CircuitBreaker
from cdcbox.consumer.config import ConsumerConfig
from cdcbox.consumer.dead_letter import DeadLetters
from cdcbox.consumer.event import Event, PayloadDecoder, decode, decode_payload
from cdcbox.consumer.handler import Handler
from cdcbox.consumer.signals import HandlerSignal, RefuseTransition, RetryLater, SkipEvent
from cdcbox.consumer.stats import ConsumerStats, Outcome
from cdcbox.errors import PoisonRecord
from cdcbox.inbox import Inbox
from cdcbox.parking import ParkedKey, Parking
from cdcbox.reconciliation import Reconciliation

log = logging.getLogger("cdcbox.consumer")

ConnectionSource = Callable[[], psycopg.Connection[Any]]


@dataclass(frozen=True)
class Stores:
    """The consumer's tables, each behind the one module that owns its SQL."""

    inbox: Inbox
    reconciliation: Reconciliation
    parking: Parking


@dataclass(frozen=True)
class _Routed:
    record: Any
    event: Event
    handler: Handler

    @property
    def parked_key(self) -> ParkedKey:
        return (self.handler.consumer_name, self.event.aggregate_type, self.event.aggregate_id)


class _NeedsSavepoints(Exception):
    """A record failed on the batch's fast path; the batch is redone with savepoints."""


class RecordPipeline:
    def __init__(
        self,
        handlers: Mapping[str, Handler],
        stores: Stores,
        dead_letters: DeadLetters,
        config: ConsumerConfig,
        stats: ConsumerStats,
        breaker: CircuitBreaker,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.handlers = handlers
        self.stores = stores
        self.dead_letters = dead_letters
        self.config = config
        self.stats = stats
        self.breaker = breaker
        self.sleep = sleep
        self.parked: set[ParkedKey] = set()
        self._decode_payload = self._payload_decoder()

    def _payload_decoder(self) -> PayloadDecoder:
        """Decode the payloads of handled event types only: a type no handler takes is
        counted as unhandled, whatever its bytes, never dead-lettered for them."""
        catalogue = self.config.schemas

        def decode_for_handlers(content_type: str, event_type: str, value: bytes) -> Any:
            handler = self.handlers.get(event_type)
            if handler is None:
                return value
            if catalogue is None or content_type != wire.CONTENT_TYPE_AVRO:
                return decode_payload(content_type, event_type, value)
            return catalogue.decode(
                value, catalogue.reader_schema(event_type, handler.schema_version)
            )

        return decode_for_handlers

    # --- routing (both modes) ----------------------------------------------------------
    def _route(self, connection: ConnectionSource, record: Any) -> _Routed | None:
        """Decode and find the handler; records that end here are counted here."""
        group = self.config.group_id
        try:
            event = decode(record, self._decode_payload)
        except PoisonRecord as e:
            self._dead_letter(connection, record, None, None, e, attempts=0)
            self.stats.count(Outcome.DEAD_LETTERED, group)
            return None
        handler = self.handlers.get(event.event_type)
        if handler is None:
            if self.config.unhandled == "dead-letter":
                error = PoisonRecord(f"no handler takes event type {event.event_type!r}")
                self._dead_letter(connection, record, event, None, error, attempts=0)
                self.stats.count(Outcome.DEAD_LETTERED, group)
            else:
                self.stats.count(Outcome.UNHANDLED, group)
            return None
        routed = _Routed(record, event, handler)
        if self.config.park_aggregates and self._still_parked(connection, routed.parked_key):
            error = PoisonRecord(
                f"aggregate {event.aggregate_type}/{event.aggregate_id} is "
                "parked behind an earlier dead-lettered event"
            )
            self._dead_letter(connection, record, event, handler, error, attempts=0)
            self.stats.count(Outcome.PARKED, handler.consumer_name)
            return None
        return routed

    def _still_parked(self, connection: ConnectionSource, key: ParkedKey) -> bool:
        """The in-memory set is a cache; an operator's release must count at once."""
        if key not in self.parked:
            return False
        conn = connection()
        with conn.transaction():
            if self.stores.parking.is_parked(conn, key):
                return True
        self.parked.discard(key)
        return False

    # --- per-record mode ---------------------------------------------------------------
    def process(self, connection: ConnectionSource, record: Any) -> None:
        routed = self._route(connection, record)
        if routed is not None:
            outcome = self._with_retries(connection, routed)
            self.stats.count(outcome, routed.handler.consumer_name)

    def _with_retries(self, connection: ConnectionSource, routed: _Routed) -> Outcome:
        policy, name = self.config.retry, routed.handler.consumer_name
        attempt = 0
        while True:
            attempt += 1
            try:
                outcome = self._apply(connection(), routed.event, routed.handler)
            except (SkipEvent, RefuseTransition) as signal:
                return self._record_signal(connection(), routed.event, routed.handler, signal)
            except Exception as e:
                if not isinstance(e, RetryLater):
                    log.warning(
                        "event %s (aggregate %s, trace %s) failed attempt %d/%d: %r",
                        routed.event.event_id,
                        routed.event.aggregate_id,
                        routed.event.trace_id,
                        attempt,
                        policy.max_attempts,
                        e,
                    )
                    if self.breaker.record_failure(routed.event.aggregate_id):
                        self.stats.metrics.breaker_open.set(1)
                        log.error(
                            "circuit open: failures across many aggregates look like an "
                            "outage; holding records back instead of dead-lettering"
                        )
                if attempt >= policy.max_attempts and not self.breaker.open:
                    self._dead_letter(
                        connection, routed.record, routed.event, routed.handler, e, attempt
                    )
                    return Outcome.DEAD_LETTERED
                self.stats.retry(name)
                self.sleep(policy.delay(min(attempt, policy.max_attempts)))
                continue
            if self.breaker.record_success():
                self.stats.metrics.breaker_open.set(0)
                log.warning("circuit closed: records flow again")
            return outcome

    def _apply(self, conn: psycopg.Connection[Any], event: Event, handler: Handler) -> Outcome:
        started = time.perf_counter()
        with conn.transaction():
            if not self.stores.inbox.claim(conn, event, handler.consumer_name):
                return Outcome.DUPLICATE
            outcome = self._guard_and_handle(conn, event, handler)
            if outcome is Outcome.STALE:
                self.stores.inbox.mark_skipped(conn, event, handler.consumer_name, "stale version")
        if outcome is Outcome.PROCESSED:
            self.stats.handled(
                handler.consumer_name, event.occurred_at, time.perf_counter() - started
            )
        return outcome

    def _guard_and_handle(
        self, conn: psycopg.Connection[Any], event: Event, handler: Handler
    ) -> Outcome:
        """Version guard, then the handler; the caller owns the transaction."""
        if event.aggregate_version is not None:
            guard = self.stores.inbox.advance_version(conn, event, handler.consumer_name)
            if not guard.applied:
                return Outcome.STALE
            if (
                self.config.gap_policy == "hold"
                and guard.previous is not None
                and event.aggregate_version > guard.previous + 1
            ):
                raise RetryLater(f"gap: version {event.aggregate_version} after {guard.previous}")
        handler.handle(event, conn)
        return Outcome.PROCESSED

    def _record_signal(
        self, conn: psycopg.Connection[Any], event: Event, handler: Handler, signal: HandlerSignal
    ) -> Outcome:
        """The handler's writes were rolled back; record why, in a transaction of its own."""
        name = handler.consumer_name
        with conn.transaction():
            if not self.stores.inbox.claim(conn, event, name):
                return Outcome.DUPLICATE
            if isinstance(signal, RefuseTransition):
                self.stores.reconciliation.record(conn, event, name, signal.reason)
                self.stores.inbox.mark_skipped(conn, event, name, f"refused: {signal.reason}")
                return Outcome.REFUSED
            self.stores.inbox.mark_skipped(conn, event, name, signal.reason)
            return Outcome.SKIPPED

    # --- batch mode --------------------------------------------------------------------
    def process_batch(self, connection: ConnectionSource, records: list[Any]) -> None:
        """One claim statement, the handlers, one COMMIT for the batch (a savepoint per
        record only when a record fails)."""
        routed = [r for r in (self._route(connection, rec) for rec in records) if r is not None]
        seen: set[tuple[Any, str]] = set()
        unique: list[_Routed] = []
        for r in routed:  # the same event twice in one batch: the second is a duplicate
            key = (r.event.event_id, r.handler.consumer_name)
            if key in seen:
                self.stats.count(Outcome.DUPLICATE, r.handler.consumer_name)
            else:
                seen.add(key)
                unique.append(r)
        conn = connection()
        started = time.perf_counter()
        try:
            try:
                applied, deferred = self._batch_transaction(conn, unique, savepoints=False)
            except _NeedsSavepoints:
                # Something failed: redo the batch with a savepoint per record, so the
                # failing record is set aside and the rest still commit together.
                applied, deferred = self._batch_transaction(conn, unique, savepoints=True)
        except psycopg.Error as e:
            # The batch transaction itself failed (e.g. the database went away): nothing
            # of it committed, so every record takes the per-record path, in order.
            log.warning(
                "batch of %d records failed as a whole (%s); processing them one by one",
                len(unique),
                e,
            )
            applied, deferred = [], list(unique)
        seconds = (time.perf_counter() - started) / max(len(applied), 1)
        for r, outcome in applied:
            self.stats.count(outcome, r.handler.consumer_name)
            if outcome is Outcome.PROCESSED:
                self.stats.handled(r.handler.consumer_name, r.event.occurred_at, seconds)
        for r in deferred:
            if self.config.park_aggregates and r.parked_key in self.parked:
                self._route(connection, r.record)  # parks it behind the dead letter
                continue
            self.stats.count(self._with_retries(connection, r), r.handler.consumer_name)

    def _batch_transaction(
        self, conn: psycopg.Connection[Any], batch: list[_Routed], savepoints: bool
    ) -> tuple[list[tuple[_Routed, Outcome]], list[_Routed]]:
        """Claim, apply and mark a batch in one transaction.

        Without savepoints (the fast path: no extra round trips per record) any failure
        aborts the whole transaction with `_NeedsSavepoints`; with them, a failing record
        and its aggregate's later records are deferred and the rest are kept.
        """
        applied: list[tuple[_Routed, Outcome]] = []
        deferred: list[_Routed] = []
        blocked: set[ParkedKey] = set()
        with conn.transaction():
            claimed = self.stores.inbox.claim_many(
                conn, [(r.event, r.handler.consumer_name) for r in batch]
            )
            for r in batch:
                if (r.event.event_id, r.handler.consumer_name) not in claimed:
                    applied.append((r, Outcome.DUPLICATE))
                elif r.parked_key in blocked:
                    deferred.append(r)  # keep order behind its failed predecessor
                elif not savepoints:
                    try:
                        applied.append((r, self._guard_and_handle(conn, r.event, r.handler)))
                    except Exception as e:
                        raise _NeedsSavepoints from e
                else:
                    try:
                        with conn.transaction():  # SAVEPOINT
                            applied.append((r, self._guard_and_handle(conn, r.event, r.handler)))
                    except Exception:
                        blocked.add(r.parked_key)
                        deferred.append(r)
            self.stores.inbox.finish_many(
                conn,
                [
                    (
                        r.event,
                        r.handler.consumer_name,
                        "PROCESSED" if o is Outcome.PROCESSED else "SKIPPED",
                        "stale version" if o is Outcome.STALE else None,
                    )
                    for r, o in applied
                    if o in (Outcome.PROCESSED, Outcome.STALE)
                ],
            )
        return applied, deferred

    # --- dead letters --------------------------------------------------------------------
    def _dead_letter(
        self,
        connection: ConnectionSource,
        record: Any,
        event: Event | None,
        handler: Handler | None,
        error: BaseException,
        attempts: int,
    ) -> None:
        """Publish to the DLQ (awaited), then remember the failure (and park the aggregate)."""
        consumer = handler.consumer_name if handler else self.config.group_id
        self.dead_letters.publish(
            record,
            error_type=type(error).__name__,
            message=str(error),
            attempts=attempts,
            consumer=consumer,
        )
        log.error(
            "dead-lettered %s[%d]@%d (event %s): %s: %s",
            record.topic,
            record.partition,
            record.offset,
            event.event_id if event else "?",
            type(error).__name__,
            error,
        )
        if event is None or handler is None:
            return
        conn = connection()
        with conn.transaction():
            self.stores.inbox.record_failure(
                conn, event, consumer, attempts, f"{type(error).__name__}: {error}"
            )
            if self.config.park_aggregates:
                self.stores.parking.park(conn, event, consumer, f"{type(error).__name__}: {error}")
        if self.config.park_aggregates:
            self.parked.add((consumer, event.aggregate_type, event.aggregate_id))

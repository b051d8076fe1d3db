"""One record through the steps: decode → inbox claim → version guard → handler → commit.

Every record ends with exactly one `Outcome`. The happy path is one transaction and no
savepoint: the inbox row is claimed as PROCESSED, the guard advances the version, the
handler writes, COMMIT. Signals and failures roll back and take a separate, rarer path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import psycopg

from cdcbox.consumer.config import ConsumerConfig
from cdcbox.consumer.dead_letter import DeadLetters
from cdcbox.consumer.event import Event, decode
from cdcbox.consumer.handler import Handler
from cdcbox.consumer.signals import HandlerSignal, RefuseTransition, RetryLater, SkipEvent
from cdcbox.consumer.stats import ConsumerStats, Outcome
from cdcbox.errors import PoisonRecord
from cdcbox.inbox import Inbox
from cdcbox.reconciliation import Reconciliation

log = logging.getLogger("cdcbox.consumer")

ConnectionSource = Callable[[], psycopg.Connection[Any]]


class RecordPipeline:
    def __init__(
        self,
        handlers: Mapping[str, Handler],
        inbox: Inbox,
        reconciliation: Reconciliation,
        dead_letters: DeadLetters,
        config: ConsumerConfig,
        stats: ConsumerStats,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.handlers = handlers
        self.inbox = inbox
        self.reconciliation = reconciliation
        self.dead_letters = dead_letters
        self.config = config
        self.stats = stats
        self.sleep = sleep

    def process(self, connection: ConnectionSource, record: Any) -> Outcome:
        try:
            event = decode(record)
        except PoisonRecord as e:
            self._dead_letter(connection, record, None, None, e, attempts=0)
            return Outcome.DEAD_LETTERED
        handler = self.handlers.get(event.event_type)
        if handler is None:
            if self.config.unhandled == "dead-letter":
                error = PoisonRecord(f"no handler takes event type {event.event_type!r}")
                self._dead_letter(connection, record, event, None, error, attempts=0)
                return Outcome.DEAD_LETTERED
            return Outcome.UNHANDLED
        return self._with_retries(connection, record, event, handler)

    def _with_retries(
        self, connection: ConnectionSource, record: Any, event: Event, handler: Handler
    ) -> Outcome:
        policy = self.config.retry
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._apply(connection(), event, handler)
            except (SkipEvent, RefuseTransition) as signal:
                return self._record_signal(connection(), event, handler, signal)
            except Exception as e:
                if not isinstance(e, RetryLater):
                    log.warning(
                        "event %s (aggregate %s, trace %s) failed attempt %d/%d: %r",
                        event.event_id,
                        event.aggregate_id,
                        event.trace_id,
                        attempt,
                        policy.max_attempts,
                        e,
                    )
                if attempt >= policy.max_attempts:
                    self._dead_letter(connection, record, event, handler, e, attempt)
                    return Outcome.DEAD_LETTERED
                self.stats.retries += 1
                self.sleep(policy.delay(attempt))

    def _apply(self, conn: psycopg.Connection[Any], event: Event, handler: Handler) -> Outcome:
        name = handler.consumer_name
        with conn.transaction():
            if not self.inbox.claim(conn, event, name):
                return Outcome.DUPLICATE
            if event.aggregate_version is not None:
                guard = self.inbox.advance_version(conn, event, name)
                if not guard.applied:
                    self.inbox.mark_skipped(
                        conn,
                        event,
                        name,
                        f"stale: version {event.aggregate_version} <= {guard.previous}",
                    )
                    return Outcome.STALE
                if (
                    self.config.gap_policy == "hold"
                    and guard.previous is not None
                    and event.aggregate_version > guard.previous + 1
                ):
                    raise RetryLater(
                        f"gap: version {event.aggregate_version} after {guard.previous}"
                    )
            handler.handle(event, conn)
        return Outcome.PROCESSED

    def _record_signal(
        self, conn: psycopg.Connection[Any], event: Event, handler: Handler, signal: HandlerSignal
    ) -> Outcome:
        """The handler's writes were rolled back; record why, in a transaction of its own."""
        name = handler.consumer_name
        with conn.transaction():
            if not self.inbox.claim(conn, event, name):
                return Outcome.DUPLICATE
            if isinstance(signal, RefuseTransition):
                self.reconciliation.record(conn, event, name, signal.reason)
                self.inbox.mark_skipped(conn, event, name, f"refused: {signal.reason}")
                return Outcome.REFUSED
            self.inbox.mark_skipped(conn, event, name, signal.reason)
            return Outcome.SKIPPED

    def _dead_letter(
        self,
        connection: ConnectionSource,
        record: Any,
        event: Event | None,
        handler: Handler | None,
        error: BaseException,
        attempts: int,
    ) -> None:
        """Publish to the DLQ (awaited), then remember the failure in the inbox."""
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
        if event is not None and handler is not None:
            conn = connection()
            with conn.transaction():
                self.inbox.record_failure(
                    conn, event, consumer, attempts, f"{type(error).__name__}: {error}"
                )

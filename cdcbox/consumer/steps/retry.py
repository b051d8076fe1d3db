"""The retry step, with the circuit breaker, around the record's transaction.

A failing record is retried with backoff while its partition waits, so order holds.
When the retries are spent it is handed to the dead-letter step — unless the breaker
holds it (many aggregates failing: an outage, not a poison message), in which case it is
retried at the longest backoff until it succeeds. The success that closes the breaker
replays what was dead-lettered while it tripped. Handler signals end the record without
a retry. A database outage is no fault of the record: it is waited out with backoff,
however long it lasts, without spending the record's attempts.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import datetime

from cdcbox.consumer.breaker import CircuitBreaker
from cdcbox.consumer.config import RetryPolicy
from cdcbox.consumer.signals import RefuseTransition, RetryLater, SkipEvent
from cdcbox.consumer.stats import ConsumerStats, Outcome
from cdcbox.consumer.steps.in_flight import CommitInDoubt, EarlierCommitFailed
from cdcbox.consumer.steps.route import Routed
from cdcbox.consumer.steps.transaction import FirstTry, RecordTransaction
from cdcbox.db import ConnectionSource, is_outage
from cdcbox.errors import RegistryUnavailable, SessionChanged
from cdcbox.telemetry import tracing

log = logging.getLogger("cdcbox.consumer")
GiveUp = Callable[[ConnectionSource, Routed, BaseException, int], None]
OnClosed = Callable[[ConnectionSource, str, datetime], object]


class RetryStep:
    """Runs a record's transaction until it ends: retried with backoff while its partition
    waits, dead-lettered after `policy.max_attempts` unless the breaker holds it, and
    waiting out a database outage without spending attempts."""

    def __init__(
        self,
        transaction: RecordTransaction,
        policy: RetryPolicy,
        breaker: CircuitBreaker,
        stats: ConsumerStats,
        sleep: Callable[[float], None],
        on_closed: OnClosed,
    ) -> None:
        self.transaction = transaction
        self.policy = policy
        self.breaker = breaker
        self.stats = stats
        self.sleep = sleep
        self.on_closed = on_closed

    def run(
        self,
        connection: ConnectionSource,
        routed: Routed,
        give_up: GiveUp,
        first: FirstTry = "alone",
    ) -> Outcome:
        """Apply the record until it ends; `give_up` dead-letters it after the last try.
        `first`: how its first try runs (`RecordTransaction.apply`); the others alone."""
        attempt = outage = 0
        while True:
            this_try = first if attempt == outage == 0 else "alone"
            try:
                outcome = self._apply(connection, routed, this_try)
            except (SessionChanged, EarlierCommitFailed, CommitInDoubt):
                # Nothing of this record ran: the batch again from its start (a new
                # session), from the earlier record, or from the last record that ended.
                raise
            except Exception as e:
                if is_service_outage(e):
                    outage += 1
                    self.wait_out_outage(e, outage)
                    continue
                attempt += 1
                if not isinstance(e, RetryLater):
                    self._failed(routed, attempt, e)
                if attempt >= self.policy.max_attempts and not self._holds(connection, routed):
                    give_up(connection, routed, e, attempt)
                    return Outcome.DEAD_LETTERED
                tracing.retried(attempt, e)
                self.stats.retry(routed.consumer)
                self.sleep(self._delay(routed, attempt))
                continue
            self.stats.metrics.database_up.set(1)
            self._succeeded(connection, routed)
            return outcome

    def _apply(self, connection: ConnectionSource, routed: Routed, first: FirstTry) -> Outcome:
        try:
            return self.transaction.apply(connection(), routed, first)
        except (SkipEvent, RefuseTransition) as signal:
            return self.transaction.record_signal(connection(), routed, signal)

    def wait_out_outage(self, error: BaseException, waits: int) -> None:
        """One backoff wait for the database (or the schema registry) to come back
        (readiness already says the database is unreachable); the metrics say so too."""
        metrics = self.stats.metrics
        if isinstance(error, RegistryUnavailable):
            service = "schema registry"
            metrics.registry_outage_waits.inc()
        else:
            service = "database"
            metrics.database_up.set(0)
            metrics.outage_waits.inc()
        delay = self.policy.delay(min(waits, self.policy.max_attempts))
        log.warning(
            "%s unavailable (%s); waiting %.1fs for it (wait %d)", service, error, delay, waits
        )
        self.sleep(delay)

    def _delay(self, routed: Routed, attempt: int) -> float:
        if self.breaker.is_open(routed.consumer):  # an outage: probe at the longest backoff
            return random.uniform(self.policy.max_delay_s / 2, self.policy.max_delay_s)
        return self.policy.delay(min(attempt, self.policy.max_attempts))

    def _holds(self, connection: ConnectionSource, routed: Routed) -> bool:
        name = routed.consumer
        if self.breaker.is_open(name):
            return True
        event = routed.event
        if not self.breaker.holds(connection(), name, (event.aggregate_type, event.aggregate_id)):
            return False
        self.stats.metrics.breaker_open.labels(name).set(1)
        log.error(
            "circuit open for %s: failures across many aggregates look like an outage; "
            "holding records back instead of dead-lettering",
            name,
        )
        return True

    def _succeeded(self, connection: ConnectionSource, routed: Routed) -> None:
        name = routed.consumer
        if not self.breaker.is_open(name):
            return
        tripped_at = self.breaker.record_success(connection(), name)
        self.stats.metrics.breaker_open.labels(name).set(0)
        log.warning("circuit closed for %s: records flow again", name)
        if tripped_at is not None:
            self.on_closed(connection, name, tripped_at)

    def _failed(self, routed: Routed, attempt: int, error: Exception) -> None:
        log.warning(
            "event %s failed attempt %d/%d: %r",
            routed.event.log_fields,
            attempt,
            self.policy.max_attempts,
            error,
            extra=routed.event.log_extra,
        )


def is_service_outage(error: BaseException) -> bool:
    """The database or the schema registry is unreachable: the record in flight is not
    at fault (no attempt is charged to it); waiting for the service is the remedy."""
    return is_outage(error) or isinstance(error, RegistryUnavailable)

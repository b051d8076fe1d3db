"""Step 5, retry with the circuit breaker around the record's transaction.

A failing record is retried with backoff while its partition waits, so order holds.
When the retries are spent it is handed to the dead-letter step — unless the breaker is
open (many aggregates failing: an outage, not a poison message), in which case it keeps
retrying at the longest backoff. Handler signals end the record without a retry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from cdcbox.consumer.breaker import CircuitBreaker
from cdcbox.consumer.config import RetryPolicy
from cdcbox.consumer.signals import RefuseTransition, RetryLater, SkipEvent
from cdcbox.consumer.stats import ConsumerStats, Outcome
from cdcbox.consumer.steps.route import Routed
from cdcbox.consumer.steps.transaction import RecordTransaction
from cdcbox.db import ConnectionSource

log = logging.getLogger("cdcbox.consumer")
GiveUp = Callable[[ConnectionSource, Routed, BaseException, int], None]


class RetryStep:
    def __init__(
        self,
        transaction: RecordTransaction,
        policy: RetryPolicy,
        breaker: CircuitBreaker,
        stats: ConsumerStats,
        sleep: Callable[[float], None],
    ) -> None:
        self.transaction = transaction
        self.policy = policy
        self.breaker = breaker
        self.stats = stats
        self.sleep = sleep

    def run(self, connection: ConnectionSource, routed: Routed, give_up: GiveUp) -> Outcome:
        """Apply the record until it ends; `give_up` dead-letters it after the last try."""
        attempt = 0
        while True:
            attempt += 1
            try:
                outcome = self.transaction.apply(connection(), routed)
            except (SkipEvent, RefuseTransition) as signal:
                return self.transaction.record_signal(connection(), routed, signal)
            except Exception as e:
                if not isinstance(e, RetryLater):
                    self._failed(routed, attempt, e)
                if attempt >= self.policy.max_attempts and not self.breaker.open:
                    give_up(connection, routed, e, attempt)
                    return Outcome.DEAD_LETTERED
                self.stats.retry(routed.consumer)
                self.sleep(self.policy.delay(min(attempt, self.policy.max_attempts)))
                continue
            if self.breaker.record_success():
                self.stats.metrics.breaker_open.set(0)
                log.warning("circuit closed: records flow again")
            return outcome

    def _failed(self, routed: Routed, attempt: int, error: Exception) -> None:
        log.warning(
            "event %s failed attempt %d/%d: %r",
            routed.event.log_fields,
            attempt,
            self.policy.max_attempts,
            error,
        )
        if self.breaker.record_failure(routed.event.aggregate_id):
            self.stats.metrics.breaker_open.set(1)
            log.error(
                "circuit open: failures across many aggregates look like an outage; "
                "holding records back instead of dead-lettering"
            )

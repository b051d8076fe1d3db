"""A circuit breaker that tells an outage from a poison message, shared by every process
of a consumer name.

One aggregate failing is a poison message: retry, then dead-letter it. Many different
aggregates failing within a short window is an outage (database, downstream service):
dead-lettering them all would flood the DLQ with good events. Guarantees:

- it opens when a record has used up its retries and, counting it, `failing_aggregates`
  distinct aggregates of this consumer name have used up theirs within `window_s` (and
  since the last close) in any of its processes; each decision is taken under the
  breaker row's lock, so at most `failing_aggregates - 1` aggregates are dead-lettered
  before it opens;
- while open (a row in `consumer_breaker`, seen by every process) no record is
  dead-lettered: the current one is retried at the longest backoff;
- it closes only on a success; each process that held records gets, with its own first
  success, the moment the tripping window began, so it can replay what its partitions
  dead-lettered since (its thread alone feeds those partitions: nothing of theirs is
  dead-lettered while it replays).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from cdcbox.names import DbNames
from cdcbox.postgres.breaker_state import BreakerState
from cdcbox.seam.stores import BreakerStore
from cdcbox.session import Session


@dataclass(frozen=True)
class BreakerPolicy:
    """When many aggregates failing at once count as an outage: `failing_aggregates` distinct
    aggregates of one consumer name spending their retries within `window_s` open the breaker."""

    failing_aggregates: int = 5  # distinct aggregates failing within the window
    window_s: float = 30.0
    enabled: bool = True


class CircuitBreaker:
    """The breaker shared by every process of a consumer name (its row in `consumer_breaker`).

    Guarantee: each decision is taken under that row's lock, so however many processes
    run, fewer than `failing_aggregates` aggregates reach the dead letters before it
    opens; it closes only on a success, never because failures aged out."""

    def __init__(
        self, policy: BreakerPolicy, names: DbNames = DbNames(), state: BreakerStore | None = None
    ) -> None:
        self.policy = policy
        self._open: set[str] = set()  # consumer names this process holds records for
        self.state: BreakerStore = state if state is not None else BreakerState(names)

    def is_open(self, consumer: str) -> bool:
        """This process's view: True while it holds a record back for `consumer`."""
        return consumer in self._open

    def holds(self, conn: Session, consumer: str, aggregate: tuple[str, str]) -> bool:
        """A record of `aggregate` used up its retries: True when it must be held (the
        breaker is open, or opens now) instead of dead-lettered."""
        if not self.policy.enabled:
            return False
        with conn.transaction():
            is_open, closed_at = self.state.lock(conn, consumer)
            if not is_open:
                failing = self.state.failing(
                    conn, consumer, self.policy.window_s, closed_at, aggregate
                )
                if failing + 1 < self.policy.failing_aggregates:
                    # Noted under the lock: a concurrent process counts it at once.
                    self.state.note(conn, consumer, aggregate)
                    return False
                self.state.open(conn, consumer)
        self._open.add(consumer)
        return True

    def record_success(self, conn: Session, consumer: str) -> datetime | None:
        """A record of `consumer` succeeded. If this process held records back it stops,
        closes the shared breaker (unless another process did already) and gets when the
        tripping window began, to replay what its partitions dead-lettered since."""
        if consumer not in self._open:
            return None
        self._open.discard(consumer)
        with conn.transaction():
            return self.state.close(conn, consumer, self.policy.window_s)

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
from typing import Any

import psycopg
from psycopg import sql

from cdcbox.names import DbNames


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

    def __init__(self, policy: BreakerPolicy, names: DbNames = DbNames()) -> None:
        self.policy = policy
        self._open: set[str] = set()  # consumer names this process holds records for
        breakers, failures = names.table("breakers"), names.table("breaker_failures")
        # Creates the row on first use and locks it either way: deciders queue here.
        self._lock_state = sql.SQL(
            "INSERT INTO {} AS b (consumer_name) VALUES (%s) ON CONFLICT (consumer_name) "
            "DO UPDATE SET consumer_name = b.consumer_name RETURNING is_open, closed_at"
        ).format(breakers)
        self._failing = sql.SQL(
            "SELECT count(*) FROM {} WHERE consumer_name = %s "
            "AND failed_at > greatest(now() - make_interval(secs => %s), "
            "coalesce(%s::timestamptz, '-infinity')) "
            "AND (aggregate_type, aggregate_id) IS DISTINCT FROM (%s, %s)"
        ).format(failures)
        self._note = sql.SQL(
            "INSERT INTO {} (consumer_name, aggregate_type, aggregate_id) VALUES (%s, %s, %s) "
            "ON CONFLICT (consumer_name, aggregate_type, aggregate_id) "
            "DO UPDATE SET failed_at = now()"
        ).format(failures)
        self._open_it = sql.SQL(
            "UPDATE {} SET is_open = true, opened_at = now() WHERE consumer_name = %s"
        ).format(breakers)
        self._close_it = sql.SQL(
            "UPDATE {} SET is_open = false, closed_at = now() WHERE consumer_name = %s AND is_open"
        ).format(breakers)
        self._tripped_at = sql.SQL(
            "SELECT opened_at - make_interval(secs => %s) FROM {} WHERE consumer_name = %s"
        ).format(breakers)

    def is_open(self, consumer: str) -> bool:
        """This process's view: True while it holds a record back for `consumer`."""
        return consumer in self._open

    def holds(
        self, conn: psycopg.Connection[Any], consumer: str, aggregate: tuple[str, str]
    ) -> bool:
        """A record of `aggregate` used up its retries: True when it must be held (the
        breaker is open, or opens now) instead of dead-lettered."""
        if not self.policy.enabled:
            return False
        with conn.transaction():
            row = conn.execute(self._lock_state, (consumer,)).fetchone()
            assert row is not None
            is_open, closed_at = row
            if not is_open:
                failing = conn.execute(
                    self._failing, (consumer, self.policy.window_s, closed_at, *aggregate)
                ).fetchone()
                assert failing is not None
                if failing[0] + 1 < self.policy.failing_aggregates:
                    # Noted under the lock: a concurrent process counts it at once.
                    conn.execute(self._note, (consumer, *aggregate))
                    return False
                conn.execute(self._open_it, (consumer,))
        self._open.add(consumer)
        return True

    def record_success(self, conn: psycopg.Connection[Any], consumer: str) -> datetime | None:
        """A record of `consumer` succeeded. If this process held records back it stops,
        closes the shared breaker (unless another process did already) and gets when the
        tripping window began, to replay what its partitions dead-lettered since."""
        if consumer not in self._open:
            return None
        self._open.discard(consumer)
        with conn.transaction():
            conn.execute(self._close_it, (consumer,))
            row = conn.execute(self._tripped_at, (self.policy.window_s, consumer)).fetchone()
        return row[0] if row else None

"""The circuit breaker's shared state (`consumer_breaker`, `consumer_breaker_failure`):
the statements `cdcbox.consumer.breaker.CircuitBreaker` takes its decisions with, each in
the caller's transaction."""

from __future__ import annotations

from datetime import datetime

from psycopg import sql

from cdcbox.names import DbNames
from cdcbox.session import Session


class BreakerState:
    """One row per consumer name (open or closed) and the aggregates that used up their
    retries. Guarantee: `lock` holds the name's row until the caller's transaction ends,
    so decisions of several processes about one name are taken one after the other."""

    def __init__(self, names: DbNames = DbNames()) -> None:
        breakers, failures = names.table("breakers"), names.table("breaker_failures")
        self._lock = sql.SQL(
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
        self._open = sql.SQL(
            "UPDATE {} SET is_open = true, opened_at = now() WHERE consumer_name = %s"
        ).format(breakers)
        self._close = sql.SQL(
            "UPDATE {} SET is_open = false, closed_at = now() WHERE consumer_name = %s AND is_open"
        ).format(breakers)
        self._tripped_at = sql.SQL(
            "SELECT opened_at - make_interval(secs => %s) FROM {} WHERE consumer_name = %s"
        ).format(breakers)

    def lock(self, conn: Session, consumer: str) -> tuple[bool, datetime | None]:
        """(open?, last closed) of the name's row, created on first use, locked."""
        row = conn.execute(self._lock, (consumer,)).fetchone()
        assert row is not None
        return bool(row[0]), row[1]

    def failing(
        self,
        conn: Session,
        consumer: str,
        window_s: float,
        closed_at: datetime | None,
        aggregate: tuple[str, str],
    ) -> int:
        """How many other aggregates used up their retries within the window, since the
        last close."""
        row = conn.execute(self._failing, (consumer, window_s, closed_at, *aggregate)).fetchone()
        assert row is not None
        return int(row[0])

    def note(self, conn: Session, consumer: str, aggregate: tuple[str, str]) -> None:
        conn.execute(self._note, (consumer, *aggregate))

    def open(self, conn: Session, consumer: str) -> None:
        conn.execute(self._open, (consumer,))

    def close(self, conn: Session, consumer: str, window_s: float) -> datetime | None:
        """Close the breaker (unless already closed); when its tripping window began."""
        conn.execute(self._close, (consumer,))
        row = conn.execute(self._tripped_at, (window_s, consumer)).fetchone()
        return row[0] if row else None

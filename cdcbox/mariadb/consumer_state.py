"""The consumer's other tables on MariaDB: parked aggregates, reconciliation, the group
binding and the circuit breaker's state, with the PostgreSQL stores' guarantees (see
`cdcbox.seam.stores`). Upserts that must not change an existing row are
`ON DUPLICATE KEY UPDATE <key> = <key>` (see `cdcbox.mariadb.inbox`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from cdcbox.event import Event
from cdcbox.mariadb.inbox import aggregate_id_text, placeholders
from cdcbox.names import DbNames
from cdcbox.seam.parked_cache import ParkedCache
from cdcbox.seam.stores import ParkedKey, ParkState, names_to_move
from cdcbox.session import Session


class MariaDbParking(ParkedCache):
    """The parked-aggregate table on MariaDB, and this process's cache of it."""

    def __init__(self, names: DbNames = DbNames()) -> None:
        super().__init__()
        self.table, self.inbox = names.parked, names.inbox
        self._key = "consumer_name = %s AND aggregate_type = %s AND aggregate_id = %s"
        # Only where every held (FAILED) event is among those replayed (see `Parking`).
        self._replaying = (
            f"UPDATE {self.table} SET replaying = TRUE WHERE {self._key} AND NOT EXISTS "
            f"(SELECT 1 FROM {self.inbox} AS f WHERE f.consumer_name = %s "
            "AND f.aggregate_type = %s AND f.aggregate_id = %s AND f.status = 'FAILED' "
            "AND f.event_id NOT IN "
        )
        self._drained = (
            f"DELETE FROM {self.table} WHERE {self._key} AND NOT EXISTS (SELECT 1 FROM "
            f"{self.inbox} AS i WHERE i.consumer_name = %s AND i.status = 'FAILED' "
            "AND i.aggregate_type = %s AND i.aggregate_id = %s)"
        )

    def refresh(self, conn: Session, consumers: list[str]) -> None:
        """Reload the cache with the parked aggregates of these consumers."""

        def keys() -> set[ParkedKey]:
            if not consumers:
                return set()
            rows = conn.execute(
                f"SELECT consumer_name, aggregate_type, aggregate_id FROM {self.table} "
                "WHERE consumer_name IN %s",
                (tuple(consumers),),
            ).fetchall()
            return {(c, t, aggregate_id_text(a)) for c, t, a in rows}

        self._reload(keys)

    def state(self, conn: Session, key: ParkedKey) -> ParkState | None:
        row = conn.execute(f"SELECT replaying FROM {self.table} WHERE {self._key}", key).fetchone()
        return self._answer(key, None if row is None else bool(row[0]))

    def mark_replaying(self, conn: Session, keys: list[ParkedKey], event_ids: list[str]) -> None:
        """As `Parking.mark_replaying`: one statement per aggregate (a replay is rare)."""
        if not keys or not event_ids:
            return
        statement = self._replaying + "(" + ", ".join(["%s"] * len(event_ids)) + "))"
        for key in keys:
            conn.execute(statement, (*key, *key, *event_ids))

    def park(self, conn: Session, event: Event, consumer: str, reason: str) -> None:
        reason = reason[:2000]
        conn.execute(
            f"INSERT INTO {self.table} (consumer_name, aggregate_type, aggregate_id, event_id, "
            "reason) VALUES (%s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE replaying = FALSE",
            (
                consumer,
                event.aggregate_type,
                event.aggregate_id,
                str(event.event_id),
                reason[:2000],
            ),
        )

    def release(self, conn: Session, consumer: str, aggregate_type: str, aggregate_id: str) -> bool:
        key = (consumer, aggregate_type, aggregate_id)
        return conn.execute(f"DELETE FROM {self.table} WHERE {self._key}", key).rowcount > 0

    def release_if_drained(self, conn: Session, key: ParkedKey) -> bool:
        return conn.execute(self._drained, (*key, *key)).rowcount > 0

    def list(self, conn: Session) -> list[tuple[Any, ...]]:
        rows = conn.execute(
            "SELECT consumer_name, aggregate_type, aggregate_id, event_id, reason, parked_at "
            f"FROM {self.table} ORDER BY parked_at"
        ).fetchall()
        return [(c, t, aggregate_id_text(a), uuid.UUID(e), r, at) for c, t, a, e, r, at in rows]


class MariaDbReconciliation:
    """Refused transitions, once per event and consumer."""

    def __init__(self, names: DbNames = DbNames()) -> None:
        self._insert = (
            f"INSERT INTO {names.reconciliation} (event_id, consumer_name, event_type, "
            "aggregate_type, aggregate_id, reason) VALUES (%s, %s, %s, %s, %s, %s) "
            "ON DUPLICATE KEY UPDATE event_id = event_id"
        )

    def record(self, conn: Session, event: Event, consumer: str, reason: str) -> None:
        conn.execute(
            self._insert,
            (
                str(event.event_id),
                consumer,
                event.event_type,
                event.aggregate_type,
                event.aggregate_id,
                reason,
            ),
        )


class MariaDbGroupBinding:
    """One consumer name, one consumer group (see `cdcbox.postgres.group_binding`)."""

    def __init__(self, names: DbNames = DbNames()) -> None:
        self.table = names.bindings

    def groups(self, conn: Session) -> list[str]:
        rows = conn.execute(f"SELECT DISTINCT group_id FROM {self.table} ORDER BY 1")
        return [group for (group,) in rows.fetchall()]

    def bind(
        self, conn: Session, consumer_names: Sequence[str], group_id: str, move: bool = False
    ) -> None:
        names = list(consumer_names)
        if not names:
            return
        with conn.transaction():
            conn.execute(
                f"INSERT INTO {self.table} (consumer_name, group_id) VALUES "
                f"{placeholders(len(names), 2)} ON DUPLICATE KEY UPDATE "
                "consumer_name = consumer_name",
                [v for name in names for v in (name, group_id)],
            )
            bound = conn.execute(
                f"SELECT consumer_name, group_id FROM {self.table} WHERE consumer_name IN %s "
                "FOR UPDATE",
                (tuple(names),),
            ).fetchall()
            moving = names_to_move(bound, group_id, move)
            if moving:
                conn.execute(
                    f"UPDATE {self.table} SET group_id = %s, bound_at = UTC_TIMESTAMP(6) "
                    "WHERE consumer_name IN %s",
                    (group_id, tuple(moving)),
                )


class MariaDbBreakerState:
    """The circuit breaker's shared state on MariaDB (see `BreakerState`)."""

    def __init__(self, names: DbNames = DbNames()) -> None:
        self.breakers, self.failures = names.breakers, names.breaker_failures

    def lock(self, conn: Session, consumer: str) -> tuple[bool, datetime | None]:
        conn.execute(
            f"INSERT INTO {self.breakers} (consumer_name) VALUES (%s) "
            "ON DUPLICATE KEY UPDATE consumer_name = consumer_name",
            (consumer,),
        )
        row = conn.execute(
            f"SELECT is_open, closed_at FROM {self.breakers} WHERE consumer_name = %s FOR UPDATE",
            (consumer,),
        ).fetchone()
        return bool(row[0]), row[1]

    def failing(
        self,
        conn: Session,
        consumer: str,
        window_s: float,
        closed_at: datetime | None,
        aggregate: tuple[str, str],
    ) -> int:
        row = conn.execute(
            f"SELECT COUNT(*) FROM {self.failures} WHERE consumer_name = %s AND failed_at > "
            "GREATEST(UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND, "
            "COALESCE(%s, TIMESTAMP '1000-01-01 00:00:00')) "
            "AND NOT (aggregate_type = %s AND aggregate_id = %s)",
            (consumer, round(window_s * 1e6), closed_at, *aggregate),
        ).fetchone()
        return int(row[0])

    def note(self, conn: Session, consumer: str, aggregate: tuple[str, str]) -> None:
        conn.execute(
            f"INSERT INTO {self.failures} (consumer_name, aggregate_type, aggregate_id) "
            "VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE failed_at = UTC_TIMESTAMP(6)",
            (consumer, *aggregate),
        )

    def open(self, conn: Session, consumer: str) -> None:
        conn.execute(
            f"UPDATE {self.breakers} SET is_open = TRUE, opened_at = UTC_TIMESTAMP(6) "
            "WHERE consumer_name = %s",
            (consumer,),
        )

    def close(self, conn: Session, consumer: str, window_s: float) -> datetime | None:
        conn.execute(
            f"UPDATE {self.breakers} SET is_open = FALSE, closed_at = UTC_TIMESTAMP(6) "
            "WHERE consumer_name = %s AND is_open",
            (consumer,),
        )
        row = conn.execute(
            f"SELECT opened_at - INTERVAL %s MICROSECOND FROM {self.breakers} "
            "WHERE consumer_name = %s",
            (round(window_s * 1e6), consumer),
        ).fetchone()
        return row[0] if row else None

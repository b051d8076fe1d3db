"""Parked aggregates: after one event of an aggregate is dead-lettered, its later events
follow it to the dead-letter topic instead of being applied out of order.

Every held-back event has a FAILED inbox row. A replay (`cdc-ctl dlq replay`) puts them
back on the topic addressed to the parked consumer, which applies them in order while the
aggregate stays parked for live events; the transaction that applies the last FAILED one
releases the aggregate. An operator can also release it by hand (`cdc-ctl parked release`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg import sql

from cdcbox.event import Event
from cdcbox.names import DbNames
from cdcbox.session import Session
from cdcbox.stores.protocols import ParkedKey, ParkState


class ParkedCache:
    """This process's cache of a parked-aggregate table, whichever the database.

    The cache (`might_be_parked`) is only a shortcut for the common case "not parked":
    `state` asks the database, so an operator's release counts at once, and a key
    this process parked is in the cache from the moment it commits. `refresh` reloads the
    cache from the table (the consumer calls it at start, now and then, and on every
    partition assignment, so a park made by another member is seen).
    """

    def __init__(self) -> None:
        self._cache: set[ParkedKey] = set()
        self._stale = False
        self._invalidations = 0  # written by `invalidate` only, read by `refresh`

    def _reload(self, keys: Callable[[], set[ParkedKey]]) -> None:
        """Replace the cache with `keys()`. An `invalidate` that lands while the table is
        read keeps the cache distrusted."""
        invalidations = self._invalidations
        self._cache = keys()
        if self._invalidations == invalidations:
            self._stale = False

    def _answer(self, key: ParkedKey, replaying: bool | None) -> ParkState | None:
        """The database's answer for `key` (None: no row); a released key leaves the cache."""
        if replaying is None:
            self._cache.discard(key)
            return None
        return "replaying" if replaying else "held"

    def invalidate(self) -> None:
        """Distrust the cache until the next `refresh` (e.g. after a partition assignment):
        meanwhile every key might be parked, so `state` asks the database. Safe to call
        from another thread (kafka-python's IO thread runs the assignment listener); it
        touches no database session."""
        self._invalidations += 1
        self._stale = True

    def might_be_parked(self, key: ParkedKey) -> bool:
        return self._stale or key in self._cache

    def remember(self, key: ParkedKey) -> None:
        self._cache.add(key)


class Parking(ParkedCache):
    """The parked-aggregate table on PostgreSQL, and this process's cache of it."""

    def __init__(self, names: DbNames = DbNames()) -> None:
        super().__init__()
        table = names.table("parked")
        self._select = sql.SQL(
            "SELECT consumer_name, aggregate_type, aggregate_id FROM {} "
            "WHERE consumer_name = ANY(%s)"
        ).format(table)
        self._state = sql.SQL(
            "SELECT replaying FROM {} WHERE consumer_name = %s AND aggregate_type = %s "
            "AND aggregate_id = %s"
        ).format(table)
        # A failure while replaying holds the aggregate again (its followers go to the DLQ).
        self._park = sql.SQL(
            "INSERT INTO {} (consumer_name, aggregate_type, aggregate_id, event_id, reason) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (consumer_name, aggregate_type, "
            "aggregate_id) DO UPDATE SET replaying = false"
        ).format(table)
        # Only where every held (FAILED) event is among those replayed: a live event may
        # then wait behind copies that are really on their way.
        self._replaying = sql.SQL(
            "UPDATE {parked} AS p SET replaying = true "
            "FROM unnest(%s::text[], %s::text[], %s::text[]) AS k(c, t, i) "
            "WHERE p.consumer_name = k.c AND p.aggregate_type = k.t AND p.aggregate_id = k.i "
            "AND NOT EXISTS (SELECT 1 FROM {inbox} AS f WHERE f.consumer_name = k.c "
            "AND f.aggregate_type = k.t AND f.aggregate_id = k.i AND f.status = 'FAILED' "
            "AND NOT (f.event_id = ANY(%s::uuid[])))"
        ).format(parked=table, inbox=names.table("inbox"))
        self._release = sql.SQL(
            "DELETE FROM {} WHERE consumer_name = %s AND aggregate_type = %s AND aggregate_id = %s"
        ).format(table)
        self._release_drained = sql.SQL(
            "DELETE FROM {parked} AS p WHERE consumer_name = %s AND aggregate_type = %s "
            "AND aggregate_id = %s AND NOT EXISTS (SELECT 1 FROM {inbox} AS i "
            "WHERE i.consumer_name = p.consumer_name AND i.status = 'FAILED' "
            "AND i.aggregate_type = p.aggregate_type AND i.aggregate_id = p.aggregate_id)"
        ).format(parked=table, inbox=names.table("inbox"))
        self._list = sql.SQL(
            "SELECT consumer_name, aggregate_type, aggregate_id, event_id, reason, parked_at "
            "FROM {} ORDER BY parked_at"
        ).format(table)

    def refresh(self, conn: Session, consumers: list[str]) -> None:
        """Reload the cache with the parked aggregates of these consumers."""
        self._reload(
            lambda: {
                (r[0], r[1], r[2]) for r in conn.execute(self._select, (consumers,)).fetchall()
            }
        )

    def state(self, conn: Session, key: ParkedKey) -> ParkState | None:
        """The database's answer (None: not parked); a released key leaves the cache here."""
        row = conn.execute(self._state, key).fetchone()
        return self._answer(key, None if row is None else bool(row[0]))

    def mark_replaying(self, conn: Session, keys: list[ParkedKey], event_ids: list[str]) -> None:
        """These events were just replayed: an aggregate all of whose held events are
        among them has its live events requeued behind the copies from now on, instead of
        dead-lettered. The others stay held."""
        if keys:
            columns = [list(c) for c in zip(*keys, strict=True)]
            conn.execute(self._replaying, [*columns, event_ids])

    def park(self, conn: Session, event: Event, consumer: str, reason: str) -> None:
        """Park the event's aggregate in the caller's transaction (cached once it commits:
        call `remember` after the commit)."""
        conn.execute(
            self._park,
            (consumer, event.aggregate_type, event.aggregate_id, event.event_id, reason[:2000]),
        )

    def release(self, conn: Session, consumer: str, aggregate_type: str, aggregate_id: str) -> bool:
        return conn.execute(self._release, (consumer, aggregate_type, aggregate_id)).rowcount > 0

    def release_if_drained(self, conn: Session, key: ParkedKey) -> bool:
        """Release the aggregate once none of its held-back events is still FAILED (in
        the caller's transaction: the last replayed event's commit releases it). The
        cache keeps the key: `state` drops it once the release is committed."""
        return conn.execute(self._release_drained, key).rowcount > 0

    def list(self, conn: Session) -> list[tuple[Any, ...]]:
        return conn.execute(self._list).fetchall()

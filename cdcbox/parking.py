"""Parked aggregates: after one event of an aggregate is dead-lettered, its later events
follow it to the dead-letter topic instead of being applied out of order.

Every held-back event has a FAILED inbox row. A replay (`cdc-ctl dlq replay`) puts them
back on the topic addressed to the parked consumer, which applies them in order while the
aggregate stays parked for live events; the transaction that applies the last FAILED one
releases the aggregate. An operator can also release it by hand (`cdc-ctl parked release`).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from cdcbox.event import Event
from cdcbox.names import DbNames

ParkedKey = tuple[str, str, str]  # consumer_name, aggregate_type, aggregate_id


class Parking:
    """The parked-aggregate table and this process's cache of it.

    The cache (`might_be_parked`) is only a shortcut for the common case "not parked":
    `is_parked` asks the database, so an operator's release counts at once, and a key
    this process parked is in the cache from the moment it commits. `refresh` reloads the
    cache from the table (the consumer calls it at start, now and then, and on every
    partition assignment, so a park made by another member is seen).
    """

    def __init__(self, names: DbNames = DbNames()) -> None:
        self._cache: set[ParkedKey] = set()
        self._stale = False
        table = names.table("parked")
        self._select = sql.SQL(
            "SELECT consumer_name, aggregate_type, aggregate_id FROM {} "
            "WHERE consumer_name = ANY(%s)"
        ).format(table)
        self._exists = sql.SQL(
            "SELECT 1 FROM {} WHERE consumer_name = %s AND aggregate_type = %s "
            "AND aggregate_id = %s"
        ).format(table)
        self._park = sql.SQL(
            "INSERT INTO {} (consumer_name, aggregate_type, aggregate_id, event_id, reason) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
        ).format(table)
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

    def refresh(self, conn: psycopg.Connection[Any], consumers: list[str]) -> None:
        """Reload the cache with the parked aggregates of these consumers."""
        self._cache = {(r[0], r[1], r[2]) for r in conn.execute(self._select, (consumers,))}
        self._stale = False

    def invalidate(self) -> None:
        """Distrust the cache until the next `refresh` (e.g. after a partition assignment):
        meanwhile every key might be parked, so `is_parked` asks the database."""
        self._stale = True

    def might_be_parked(self, key: ParkedKey) -> bool:
        return self._stale or key in self._cache

    def is_parked(self, conn: psycopg.Connection[Any], key: ParkedKey) -> bool:
        """The database's answer; a released key leaves the cache here."""
        parked = conn.execute(self._exists, key).fetchone() is not None
        if not parked:
            self._cache.discard(key)
        return parked

    def park(self, conn: psycopg.Connection[Any], event: Event, consumer: str, reason: str) -> None:
        """Park the event's aggregate in the caller's transaction (cached once it commits:
        call `remember` after the commit)."""
        conn.execute(
            self._park,
            (consumer, event.aggregate_type, event.aggregate_id, event.event_id, reason[:2000]),
        )

    def remember(self, key: ParkedKey) -> None:
        self._cache.add(key)

    def release(
        self, conn: psycopg.Connection[Any], consumer: str, aggregate_type: str, aggregate_id: str
    ) -> bool:
        return conn.execute(self._release, (consumer, aggregate_type, aggregate_id)).rowcount > 0

    def release_if_drained(self, conn: psycopg.Connection[Any], key: ParkedKey) -> bool:
        """Release the aggregate once none of its held-back events is still FAILED (in
        the caller's transaction: the last replayed event's commit releases it). The
        cache keeps the key: `is_parked` drops it once the release is committed."""
        return conn.execute(self._release_drained, key).rowcount > 0

    def list(self, conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
        return conn.execute(self._list).fetchall()

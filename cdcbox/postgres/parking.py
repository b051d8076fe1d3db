"""Parked aggregates: after one event of an aggregate is dead-lettered, its later events
follow it to the dead-letter topic instead of being applied out of order.

Every held-back event has a FAILED inbox row. A replay (`cdc-ctl dlq replay`) puts them
back on the topic addressed to the parked consumer, which applies them in order while the
aggregate stays parked for live events; the transaction that applies the last FAILED one
releases the aggregate. An operator can also release it by hand (`cdc-ctl parked release`).
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from cdcbox.event import Event
from cdcbox.names import DbNames
from cdcbox.seam.parked_cache import ParkedCache
from cdcbox.seam.stores import ParkedKey, ParkState
from cdcbox.session import Session


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

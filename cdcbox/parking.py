"""Parked aggregates: after one event of an aggregate is dead-lettered, its later events
follow it to the dead-letter topic instead of being applied out of order, until an
operator releases the aggregate (and replays the dead letters, in order)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

if TYPE_CHECKING:
    from cdcbox.consumer.event import Event

from cdcbox.names import DbNames

ParkedKey = tuple[str, str, str]  # consumer_name, aggregate_type, aggregate_id


class Parking:
    def __init__(self, names: DbNames = DbNames()) -> None:
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
        self._list = sql.SQL(
            "SELECT consumer_name, aggregate_type, aggregate_id, event_id, reason, parked_at "
            "FROM {} ORDER BY parked_at"
        ).format(table)

    def load(self, conn: psycopg.Connection[Any], consumers: list[str]) -> set[ParkedKey]:
        return {(r[0], r[1], r[2]) for r in conn.execute(self._select, (consumers,))}

    def is_parked(self, conn: psycopg.Connection[Any], key: ParkedKey) -> bool:
        return conn.execute(self._exists, key).fetchone() is not None

    def park(self, conn: psycopg.Connection[Any], event: Event, consumer: str, reason: str) -> None:
        conn.execute(
            self._park,
            (consumer, event.aggregate_type, event.aggregate_id, event.event_id, reason[:2000]),
        )

    def release(
        self, conn: psycopg.Connection[Any], consumer: str, aggregate_type: str, aggregate_id: str
    ) -> bool:
        return conn.execute(self._release, (consumer, aggregate_type, aggregate_id)).rowcount > 0

    def list(self, conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
        return conn.execute(self._list).fetchall()

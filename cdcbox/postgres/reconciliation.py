"""Events a handler refused as illegal transitions, kept for people to reconcile."""

from __future__ import annotations

from psycopg import sql

from cdcbox.event import Event
from cdcbox.names import DbNames
from cdcbox.session import Session


class Reconciliation:
    """Events a handler refused as illegal transitions, kept for people to reconcile (once
    per event and consumer)."""

    def __init__(self, names: DbNames = DbNames()) -> None:
        self._insert = sql.SQL(
            "INSERT INTO {} (event_id, consumer_name, event_type, aggregate_type, "
            "aggregate_id, reason) VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (event_id, consumer_name) DO NOTHING"
        ).format(names.table("reconciliation"))

    def record(self, conn: Session, event: Event, consumer: str, reason: str) -> None:
        conn.execute(
            self._insert,
            (
                event.event_id,
                consumer,
                event.event_type,
                event.aggregate_type,
                event.aggregate_id,
                reason,
            ),
        )

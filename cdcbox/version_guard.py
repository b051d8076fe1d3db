"""The aggregate-version guard: the last applied version per (consumer, aggregate type,
aggregate id), in `consumer_aggregate_version`.

`advance` reads the previous version and moves it forward in one round trip, inside the
caller's transaction; the row lock of the upsert serialises two consumers racing on one
aggregate, and a rollback of the handler's transaction undoes the advance with it. An
event not newer than the last applied one is stale: `advance` leaves the row unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cdcbox.event import Event
from cdcbox.names import DbNames


@dataclass(frozen=True)
class GuardResult:
    applied: bool  # False: the event is stale (not newer than the last applied)
    previous: int | None  # the version applied before, None for a new aggregate

    def gap_before(self, version: int) -> bool:
        """True when versions between the previous one and `version` were never applied."""
        return self.applied and self.previous is not None and version > self.previous + 1


class VersionGuard:
    def __init__(self, names: DbNames = DbNames()) -> None:
        self._advance = sql.SQL(
            "WITH prev AS (SELECT version FROM {v} WHERE consumer_name = %(c)s "
            "AND aggregate_type = %(t)s AND aggregate_id = %(a)s), "
            "up AS (INSERT INTO {v} AS cv (consumer_name, aggregate_type, aggregate_id, version) "
            "VALUES (%(c)s, %(t)s, %(a)s, %(n)s) ON CONFLICT "
            "(consumer_name, aggregate_type, aggregate_id) DO UPDATE SET version = "
            "EXCLUDED.version, updated_at = now() WHERE cv.version < EXCLUDED.version "
            "RETURNING 1) SELECT (SELECT version FROM prev), (SELECT count(*) FROM up)"
        ).format(v=names.table("versions"))

    def advance(self, conn: psycopg.Connection[Any], event: Event, consumer: str) -> GuardResult:
        """Advance the aggregate's version to the event's if the event is newer."""
        assert event.aggregate_version is not None
        row = conn.execute(
            self._advance,
            {
                "c": consumer,
                "t": event.aggregate_type,
                "a": event.aggregate_id,
                "n": event.aggregate_version,
            },
        ).fetchone()
        assert row is not None
        return GuardResult(applied=bool(row[1]), previous=row[0])
